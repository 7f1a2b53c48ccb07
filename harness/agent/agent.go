// Package agent is the two built-in coding agents, the library behind the
// legorl-agent program (cmd/legorl-agent) that runs inside a sandbox and
// talks to the proxy over HTTP exactly as a third-party harness does:
//
//   - bash: one shell command per turn in a fenced ```bash block, its exit
//     code and capped output returned as the next user message, and a
//     submit action (`echo COMPLETE_TASK_AND_SUBMIT`); a reply with no block
//     or several gets a format-error observation (mini-swe-agent's protocol).
//   - tools: OpenAI Chat Completions function calling with the tools bash,
//     view_file, str_replace, create_file and submit, streamed; when the
//     conversation outgrows a character budget, old turns are replaced by a
//     summary note (history condensation), which rewrites history, so the
//     proxy records a new segment.
//
// Both stop on submit, after MaxTurns model turns, after MaxIdleTurns
// consecutive turns without an action, or on an error, and print one JSON
// line (Result) as the last line of their standard output. They import
// nothing but the standard library, so the program is small and static.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Stop reasons (Result.Stop).
const (
	StopSubmitted   = "submitted"     // the model submitted
	StopMaxTurns    = "max_turns"     // MaxTurns model turns passed without a submit
	StopNoToolCalls = "no_tool_calls" // MaxIdleTurns consecutive turns made no action
	StopError       = "error"         // the model server failed or the agent could not go on
)

// Config configures one run of an agent. Zero fields take the defaults in
// their comments.
type Config struct {
	// BaseURL is the API base, e.g. http://127.0.0.1:8080/rollout/ID/v1;
	// requests go to BaseURL + "/chat/completions". Required.
	BaseURL string
	// Model is the model name sent with each request. Defaults to "legorl".
	Model string
	// APIKey is sent as a bearer token. Defaults to "legorl".
	APIKey string
	// Task is the problem statement. Required.
	Task string
	// Workdir is the repository folder commands run in. Defaults to the
	// current folder.
	Workdir string
	// MaxTurns bounds the model turns (one LLM call each). Defaults to 30.
	MaxTurns int
	// MaxIdleTurns ends the run after this many consecutive turns without
	// an action (no tool call, no well-formed command). Defaults to 3.
	MaxIdleTurns int
	// CommandTimeout bounds one command. Defaults to 60 seconds.
	CommandTimeout time.Duration
	// OutputBytes caps the output shown of one command or file view
	// (head and tail are kept). Defaults to 10000.
	OutputBytes int
	// MaxTokens bounds each completion (sent as max_tokens); 0 sends none.
	// Defaults to 0.
	MaxTokens int
	// RequestTimeout bounds one LLM call. Defaults to 10 minutes.
	RequestTimeout time.Duration
	// Stream asks for streamed replies (server-sent events). Defaults to
	// false; the tools agent's command line turns it on.
	Stream bool
	// ContextChars is the tools agent's history budget: when the messages
	// hold more characters, old turns are condensed. Defaults to 60000.
	ContextChars int
	// KeepTurns is how many recent turns condensation keeps. Defaults to 4.
	KeepTurns int
	// Log receives one line per turn; nil discards them.
	Log io.Writer
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = "legorl"
	}
	if c.APIKey == "" {
		c.APIKey = "legorl"
	}
	if c.Workdir == "" {
		c.Workdir = "."
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = 30
	}
	if c.MaxIdleTurns <= 0 {
		c.MaxIdleTurns = 3
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = time.Minute
	}
	if c.OutputBytes <= 0 {
		c.OutputBytes = 10000
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Minute
	}
	if c.ContextChars <= 0 {
		c.ContextChars = 60000
	}
	if c.KeepTurns <= 0 {
		c.KeepTurns = 4
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Result is what a run did; the program prints it as its last line.
type Result struct {
	Agent string `json:"agent"` // "bash" or "tools"
	Stop  string `json:"stop"`  // one of the Stop constants
	// Submitted: the model submitted (Stop is StopSubmitted).
	Submitted bool `json:"submitted"`
	// Turns counts model turns (answered LLM calls).
	Turns int `json:"turns"`
	// ToolCalls counts actions run (well-formed commands and tool calls,
	// the submit included).
	ToolCalls int `json:"tool_calls"`
	// ParseFailures counts replies whose action could not be read: no or
	// several bash blocks, unknown tools, bad arguments.
	ParseFailures int `json:"parse_failures"`
	// IdleTurns is the run of turns without an action at the end.
	IdleTurns int `json:"idle_turns"`
	// Condensations counts history condensations (tools agent).
	Condensations int     `json:"condensations"`
	LLMSeconds    float64 `json:"llm_seconds"`
	ToolSeconds   float64 `json:"tool_seconds"`
	Error         string  `json:"error,omitempty"`
	Steps         []Step  `json:"steps"`
}

// Step is one action or failed attempt at one.
type Step struct {
	Turn             int     `json:"turn"`
	Tool             string  `json:"tool"`      // empty when the turn had no action
	Arguments        string  `json:"arguments"` // JSON, long strings cut
	ObservationBytes int     `json:"observation_bytes"`
	ExitCode         int     `json:"exit_code"`
	ParseFailure     bool    `json:"parse_failure"`
	Seconds          float64 `json:"seconds"`
}

// maxArgBytes bounds one string of a step's recorded arguments.
const maxArgBytes = 2048

// stepArgs encodes arguments for a Step, cutting long strings so the
// result line stays small.
func stepArgs(args map[string]any) string {
	cut := map[string]any{}
	for k, v := range args {
		if s, ok := v.(string); ok && len(s) > maxArgBytes {
			v = s[:maxArgBytes] + "...[cut]"
		}
		cut[k] = v
	}
	b, _ := json.Marshal(cut)
	return string(b)
}

// ErrUsage: the command line is wrong.
var ErrUsage = errors.New("agent: usage")

// Names lists the agents Main runs.
func Names() []string { return []string{"bash", "tools"} }

// Run runs the named agent ("bash" or "tools") to its end. The error is
// only for a bad configuration; every end of a run is a Result.
func Run(ctx context.Context, name string, cfg Config) (Result, error) {
	if cfg.BaseURL == "" || strings.TrimSpace(cfg.Task) == "" {
		return Result{}, fmt.Errorf("%w: a base URL and a task are required", ErrUsage)
	}
	cfg = cfg.withDefaults()
	switch name {
	case "bash":
		return runBash(ctx, cfg), nil
	case "tools":
		return runTools(ctx, cfg), nil
	}
	return Result{}, fmt.Errorf("%w: unknown agent %q (want bash or tools)", ErrUsage, name)
}

// Main is the program: args are "bash|tools" and flags. It prints the
// Result as the last line of stdout and returns the exit status: 0 for a
// run that ended by itself (submitted, max turns, no tool calls), 1 for a
// run that ended in an error, 2 for a bad command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "bash" && args[0] != "tools") {
		fmt.Fprintln(stderr, "usage: legorl-agent bash|tools --base-url URL --task-file FILE [--model M] [--max-turns N] [flags]")
		return 2
	}
	name := args[0]
	fs := flag.NewFlagSet("legorl-agent "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var taskFile string
	fs.StringVar(&cfg.BaseURL, "base-url", "", "API base URL, e.g. http://127.0.0.1:PORT/rollout/ID/v1 (required)")
	fs.StringVar(&cfg.Model, "model", "legorl", "model name sent with each request")
	fs.StringVar(&taskFile, "task-file", "", "file holding the problem statement (required)")
	fs.StringVar(&cfg.Workdir, "workdir", ".", "repository folder commands run in")
	fs.IntVar(&cfg.MaxTurns, "max-turns", 30, "model turns at most")
	fs.IntVar(&cfg.MaxIdleTurns, "max-idle-turns", 3, "stop after this many consecutive turns without an action")
	fs.DurationVar(&cfg.CommandTimeout, "command-timeout", time.Minute, "timeout of one command")
	fs.IntVar(&cfg.OutputBytes, "output-bytes", 10000, "output shown of one command, head and tail")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 0, "max_tokens of each request (0: none sent)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 10*time.Minute, "timeout of one LLM call")
	fs.BoolVar(&cfg.Stream, "stream", name == "tools", "stream replies (server-sent events)")
	fs.IntVar(&cfg.ContextChars, "context-chars", 60000, "tools: condense the history when it holds more characters")
	fs.IntVar(&cfg.KeepTurns, "keep-turns", 4, "tools: recent turns kept by a condensation")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "legorl-agent: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if taskFile == "" || cfg.BaseURL == "" {
		fmt.Fprintln(stderr, "legorl-agent: --base-url and --task-file are required")
		return 2
	}
	task, err := os.ReadFile(taskFile)
	if err != nil {
		fmt.Fprintf(stderr, "legorl-agent: %v\n", err)
		return 2
	}
	cfg.Task = string(task)
	cfg.Log = stderr
	res, err := Run(ctx, name, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "legorl-agent: %v\n", err)
		return 2
	}
	b, err := json.Marshal(res)
	if err != nil { // plain types only
		fmt.Fprintf(stderr, "legorl-agent: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	if res.Stop == StopError {
		return 1
	}
	return 0
}

// ParseResult reads the Result from a run's standard output: the last
// line that is a JSON object with an "agent" field.
func ParseResult(stdout []byte) (Result, error) {
	lines := strings.Split(string(stdout), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var r Result
		if err := json.Unmarshal([]byte(l), &r); err == nil && r.Agent != "" && r.Stop != "" {
			return r, nil
		}
	}
	return Result{}, errors.New("agent: no result line in the output")
}

// loop holds what both agents track while they run.
type loop struct {
	cfg    Config
	client *client
	res    Result
}

func newLoop(name string, cfg Config) *loop {
	return &loop{cfg: cfg, client: newClient(cfg), res: Result{Agent: name, Steps: []Step{}}}
}

// call asks the model, timing it and counting the turn.
func (l *loop) call(ctx context.Context, req chatRequest) (reply, error) {
	start := time.Now()
	r, err := l.client.complete(ctx, req)
	l.res.LLMSeconds += time.Since(start).Seconds()
	if err == nil {
		l.res.Turns++
	}
	return r, err
}

// idle counts a turn without an action; it reports whether the run must
// stop.
func (l *loop) idle() bool {
	l.res.IdleTurns++
	return l.res.IdleTurns >= l.cfg.MaxIdleTurns
}

// acted counts an action.
func (l *loop) acted() {
	l.res.IdleTurns = 0
	l.res.ToolCalls++
}

func (l *loop) stop(reason string, err error) Result {
	l.res.Stop = reason
	l.res.Submitted = reason == StopSubmitted
	if err != nil {
		l.res.Error = err.Error()
	}
	return l.res
}

func (l *loop) logf(format string, args ...any) {
	fmt.Fprintf(l.cfg.Log, "legorl-agent %s: turn %d: %s\n", l.res.Agent, l.res.Turns, fmt.Sprintf(format, args...))
}
