package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const toolsSystem = `You are a software engineer fixing an issue in a code repository at %s. Use the tools to explore the code, edit it and run commands; call one or more tools in every reply. Commands run with bash in a new shell in the repository folder, without network or interactive input. When the issue is fixed, call submit.`

const toolsTask = `<task>
%s
</task>

Fix the issue by editing the source files of the repository (do not edit tests), then call submit.`

const noToolCall = "You did not call a tool. Use the tools to work on the task, and call submit when the issue is fixed."

// condensedHead begins the note that replaces condensed turns.
const condensedHead = "[Condensed history] Earlier turns were removed to keep the conversation short. What they did:"

// maxNoteLines bounds the condensation note.
const maxNoteLines = 60

// toolSpecs are the tools offered to the model.
var toolSpecs = []tool{
	fn("bash", "Run a bash command in the repository folder and return its exit code and output.",
		`{"type": "object", "properties": {"command": {"type": "string", "description": "The command to run."}}, "required": ["command"]}`),
	fn("view_file", "Show a file with line numbers (or list a folder). Optionally only lines start_line to end_line (1-based, inclusive).",
		`{"type": "object", "properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}}, "required": ["path"]}`),
	fn("str_replace", "Replace the one occurrence of old_str in a file by new_str. old_str must match exactly once, white space included.",
		`{"type": "object", "properties": {"path": {"type": "string"}, "old_str": {"type": "string"}, "new_str": {"type": "string"}}, "required": ["path", "old_str", "new_str"]}`),
	fn("create_file", "Create a file (or replace its whole content), creating missing folders.",
		`{"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}`),
	fn("submit", "Submit the work when the issue is fixed. The episode ends.",
		`{"type": "object", "properties": {}}`),
}

func fn(name, desc, params string) tool {
	return tool{Type: "function", Function: toolFunction{Name: name, Description: desc, Parameters: json.RawMessage(params)}}
}

// errParse marks a call whose name or arguments cannot be used.
var errParse = errors.New("bad tool call")

func runTools(ctx context.Context, cfg Config) Result {
	l := newLoop("tools", cfg)
	msgs := []message{
		{Role: "system", Content: fmt.Sprintf(toolsSystem, cfg.Workdir)},
		{Role: "user", Content: fmt.Sprintf(toolsTask, strings.TrimSpace(cfg.Task))},
	}
	var note []string // the condensation note's lines so far
	for l.res.Turns < cfg.MaxTurns {
		if err := ctx.Err(); err != nil {
			return l.stop(StopError, err)
		}
		if c, ok := condense(msgs, &note, cfg.ContextChars, cfg.KeepTurns); ok {
			msgs = c
			l.res.Condensations++
			l.logf("history condensed to %d messages", len(msgs))
		}
		r, err := l.call(ctx, chatRequest{Messages: msgs, Tools: toolSpecs})
		if err != nil {
			return l.stop(StopError, err)
		}
		turn := l.res.Turns
		msgs = append(msgs, message{Role: "assistant", Content: r.Content, ReasoningContent: r.Reasoning, ToolCalls: r.ToolCalls})
		if len(r.ToolCalls) == 0 {
			l.res.Steps = append(l.res.Steps, Step{Turn: turn, ExitCode: -1, ObservationBytes: len(noToolCall)})
			l.logf("no tool call")
			msgs = append(msgs, message{Role: "user", Content: noToolCall})
			if l.idle() {
				return l.stop(StopNoToolCalls, nil)
			}
			continue
		}
		valid := false
		for _, tc := range r.ToolCalls {
			start := time.Now()
			step := Step{Turn: turn, Tool: tc.Function.Name, Arguments: tc.Function.Arguments}
			if tc.Function.Name == "submit" {
				l.acted()
				step.Seconds = time.Since(start).Seconds()
				l.res.Steps = append(l.res.Steps, step)
				l.logf("submit")
				return l.stop(StopSubmitted, nil)
			}
			obs, exit, args, err := runTool(ctx, cfg, tc)
			step.Seconds = time.Since(start).Seconds()
			l.res.ToolSeconds += step.Seconds
			if args != nil {
				step.Arguments = stepArgs(args)
			} else if len(step.Arguments) > maxArgBytes {
				step.Arguments = stepArgs(map[string]any{"raw": step.Arguments})
			}
			if errors.Is(err, errParse) {
				l.res.ParseFailures++
				step.ParseFailure = true
				obs = "Error: " + err.Error()
				exit = -1
			} else {
				valid = true
				l.acted()
			}
			step.ExitCode, step.ObservationBytes = exit, len(obs)
			l.res.Steps = append(l.res.Steps, step)
			l.logf("%s: exit %d", tc.Function.Name, exit)
			msgs = append(msgs, message{Role: "tool", ToolCallID: tc.ID, Content: obs})
		}
		if !valid && l.idle() {
			return l.stop(StopNoToolCalls, nil)
		}
	}
	return l.stop(StopMaxTurns, nil)
}

// runTool runs one tool call (not submit) and returns the observation, an
// exit code (0 success, 1 a failed edit or view, the command's for bash)
// and the decoded arguments; the error wraps errParse for a call that
// cannot be run at all.
func runTool(ctx context.Context, cfg Config, tc toolCall) (string, int, map[string]any, error) {
	var args map[string]any
	raw := strings.TrimSpace(tc.Function.Arguments)
	if raw == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
		return "", -1, nil, fmt.Errorf("%w: the arguments of %s are not a JSON object", errParse, tc.Function.Name)
	}
	str := func(name string) (string, error) {
		v, ok := args[name].(string)
		if !ok {
			return "", fmt.Errorf("%w: %s needs the string argument %q", errParse, tc.Function.Name, name)
		}
		return v, nil
	}
	path := func() (string, error) {
		p, err := str("path")
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(cfg.Workdir, p)
		}
		return p, nil
	}
	switch tc.Function.Name {
	case "bash":
		command, err := str("command")
		if err != nil {
			return "", -1, args, err
		}
		r := runCommand(ctx, cfg.Workdir, command, cfg.CommandTimeout, cfg.OutputBytes)
		obs := fmt.Sprintf("exit code: %d\n%s", r.ExitCode, r.Output)
		if r.TimedOut {
			obs = fmt.Sprintf("The command timed out after %s and was killed.\n%s", cfg.CommandTimeout, obs)
		}
		return obs, r.ExitCode, args, nil
	case "view_file":
		p, err := path()
		if err != nil {
			return "", -1, args, err
		}
		obs, code := viewFile(p, intArg(args, "start_line"), intArg(args, "end_line"))
		return capText(obs, cfg.OutputBytes), code, args, nil
	case "str_replace":
		p, err := path()
		if err != nil {
			return "", -1, args, err
		}
		old, err := str("old_str")
		if err != nil {
			return "", -1, args, err
		}
		repl, err := str("new_str")
		if err != nil {
			return "", -1, args, err
		}
		obs, code := strReplace(p, old, repl)
		return obs, code, args, nil
	case "create_file":
		p, err := path()
		if err != nil {
			return "", -1, args, err
		}
		content, err := str("content")
		if err != nil {
			return "", -1, args, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "Error: " + err.Error(), 1, args, nil
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "Error: " + err.Error(), 1, args, nil
		}
		return fmt.Sprintf("Wrote %s (%d bytes).", p, len(content)), 0, args, nil
	}
	return "", -1, args, fmt.Errorf("%w: unknown tool %q (the tools are bash, view_file, str_replace, create_file, submit)", errParse, tc.Function.Name)
}

// intArg reads an optional integer argument; 0 when absent or not a number.
func intArg(args map[string]any, name string) int {
	switch v := args[name].(type) {
	case float64:
		return int(v)
	case string:
		var n int
		fmt.Sscanf(v, "%d", &n)
		return n
	}
	return 0
}

func viewFile(p string, start, end int) (string, int) {
	fi, err := os.Stat(p)
	if err != nil {
		return "Error: " + err.Error(), 1
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(p)
		if err != nil {
			return "Error: " + err.Error(), 1
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() {
				n += "/"
			}
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Sprintf("%s is a folder:\n%s", p, strings.Join(names, "\n")), 0
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "Error: " + err.Error(), 1
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if start < 1 {
		start = 1
	}
	if end < 1 || end > len(lines) {
		end = len(lines)
	}
	if start > end {
		return fmt.Sprintf("Error: %s has %d lines; start_line %d is past them.", p, len(lines), start), 1
	}
	var b strings.Builder
	for i := start; i <= end; i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i, lines[i-1])
	}
	return b.String(), 0
}

func strReplace(p, old, repl string) (string, int) {
	if old == "" {
		return "Error: old_str is empty.", 1
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "Error: " + err.Error(), 1
	}
	switch n := strings.Count(string(data), old); n {
	case 0:
		return fmt.Sprintf("Error: old_str was not found in %s.", p), 1
	case 1:
	default:
		return fmt.Sprintf("Error: old_str occurs %d times in %s; include more lines to make it unique.", n, p), 1
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "Error: " + err.Error(), 1
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, repl, 1)), fi.Mode().Perm()); err != nil {
		return "Error: " + err.Error(), 1
	}
	return fmt.Sprintf("Edited %s: replaced one occurrence.", p), 0
}

// msgChars is the size of a conversation in characters.
func msgChars(msgs []message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + len(m.ReasoningContent)
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	return n
}

// condense replaces the oldest turns of msgs by a note when msgs hold more
// than budget characters, keeping the system prompt, the task and the last
// keep turns (a turn is an assistant message and the tool and user
// messages after it). note carries the note's lines across condensations.
// It reports false when nothing was condensed.
func condense(msgs []message, note *[]string, budget, keep int) ([]message, bool) {
	if msgChars(msgs) <= budget {
		return msgs, false
	}
	body := 2
	if len(msgs) > 2 && msgs[2].Role == "user" && strings.HasPrefix(msgs[2].Content, condensedHead) {
		body = 3 // the note of an earlier condensation
	}
	var starts []int // indexes of assistant messages: turn starts
	for i := body; i < len(msgs); i++ {
		if msgs[i].Role == "assistant" {
			starts = append(starts, i)
		}
	}
	if len(starts) <= keep {
		return msgs, false
	}
	cut := starts[len(starts)-keep]
	for _, m := range msgs[body:cut] {
		*note = append(*note, summarize(m)...)
	}
	if len(*note) > maxNoteLines {
		*note = append([]string{"- ..."}, (*note)[len(*note)-maxNoteLines+1:]...)
	}
	out := append([]message{}, msgs[:2]...)
	out = append(out, message{Role: "user", Content: condensedHead + "\n" + strings.Join(*note, "\n")})
	return append(out, msgs[cut:]...), true
}

// summarize gives the note lines of one condensed message.
func summarize(m message) []string {
	switch m.Role {
	case "assistant":
		if len(m.ToolCalls) == 0 {
			return []string{"- (a reply without a tool call)"}
		}
		var out []string
		for _, tc := range m.ToolCalls {
			out = append(out, fmt.Sprintf("- called %s %s", tc.Function.Name, oneLine(tc.Function.Arguments, 160)))
		}
		return out
	case "tool":
		return []string{"  -> " + oneLine(m.Content, 120)}
	}
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
