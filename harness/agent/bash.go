package agent

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// SubmitMarker is what the bash agent's submit command prints first:
// `echo COMPLETE_TASK_AND_SUBMIT`.
const SubmitMarker = "COMPLETE_TASK_AND_SUBMIT"

const bashSystem = `You are a software engineer fixing an issue in a code repository. You work by running shell commands, one per reply.

Every reply must contain exactly one bash code block, like this:

` + "```bash" + `
ls -la
` + "```" + `

You may write a short thought before the block. The command runs with bash in a new shell in the repository folder (%s): the working folder and environment do not carry over between commands, so chain commands with && when they depend on each other. There is no network and no interactive input. You will see the exit code and the output (long output is cut in the middle).

Edit files with commands (sed, cat with a here-document, python3 scripts). Run the tests to check your work.

When the issue is fixed, submit with this command alone in its block:

` + "```bash" + `
echo ` + SubmitMarker + `
` + "```" + `

After submitting you cannot continue.`

const bashTask = `<task>
%s
</task>

Fix the issue by editing the source files of the repository (do not edit tests). Reply with exactly one bash block.`

// bashBlock matches one fenced bash block.
var bashBlock = regexp.MustCompile("(?s)```bash[ \t]*\n(.*?)```")

// bashActions returns the commands of the bash blocks in text.
func bashActions(text string) []string {
	var out []string
	for _, m := range bashBlock.FindAllStringSubmatch(text, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// bashObservation formats a command's end for the model.
func bashObservation(r cmdResult, timeoutNote string) string {
	var b strings.Builder
	if r.TimedOut {
		fmt.Fprintf(&b, "The command timed out after %s and was killed.\n", timeoutNote)
	}
	fmt.Fprintf(&b, "<returncode>%d</returncode>\n<output>\n%s", r.ExitCode, r.Output)
	if r.Output != "" && !strings.HasSuffix(r.Output, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("</output>")
	return b.String()
}

func runBash(ctx context.Context, cfg Config) Result {
	l := newLoop("bash", cfg)
	msgs := []message{
		{Role: "system", Content: fmt.Sprintf(bashSystem, cfg.Workdir)},
		{Role: "user", Content: fmt.Sprintf(bashTask, strings.TrimSpace(cfg.Task))},
	}
	for l.res.Turns < cfg.MaxTurns {
		if err := ctx.Err(); err != nil {
			return l.stop(StopError, err)
		}
		r, err := l.call(ctx, chatRequest{Messages: msgs})
		if err != nil {
			return l.stop(StopError, err)
		}
		turn := l.res.Turns
		// The reply goes back as it came; reasoning too, so the rendered
		// history extends what the model produced.
		msgs = append(msgs, message{Role: "assistant", Content: r.Content, ReasoningContent: r.Reasoning})
		actions := bashActions(r.Content)
		if len(actions) != 1 {
			l.res.ParseFailures++
			obs := fmt.Sprintf("Format error: your reply must contain exactly one ```bash block; it contained %d. "+
				"Reply with a short thought and one ```bash block holding one command.", len(actions))
			l.res.Steps = append(l.res.Steps, Step{Turn: turn, ParseFailure: true, ObservationBytes: len(obs), ExitCode: -1})
			l.logf("format error (%d blocks)", len(actions))
			msgs = append(msgs, message{Role: "user", Content: obs})
			if l.idle() {
				return l.stop(StopNoToolCalls, nil)
			}
			continue
		}
		command := actions[0]
		l.acted()
		res := runCommand(ctx, cfg.Workdir, command, cfg.CommandTimeout, cfg.OutputBytes)
		l.res.ToolSeconds += res.Seconds
		l.logf("exit %d: %s", res.ExitCode, firstLine(command))
		first, _, _ := strings.Cut(strings.TrimLeft(res.Output, " \t\r\n"), "\n")
		submitted := strings.TrimSpace(first) == SubmitMarker
		obs := bashObservation(res, cfg.CommandTimeout.String())
		l.res.Steps = append(l.res.Steps, Step{Turn: turn, Tool: "bash", Arguments: stepArgs(map[string]any{"command": command}),
			ObservationBytes: len(obs), ExitCode: res.ExitCode, Seconds: res.Seconds})
		if submitted {
			return l.stop(StopSubmitted, nil)
		}
		msgs = append(msgs, message{Role: "user", Content: obs})
	}
	return l.stop(StopMaxTurns, nil)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}
