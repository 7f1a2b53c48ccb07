package scripted

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/legorl/legorl/harness"
)

// programTimeout bounds one run of an npm harness: a scripted run takes
// seconds (OpenCode's 15-40 s on 2 idle cores, minutes on loaded ones), a
// hung one is ended.
const programTimeout = 10 * time.Minute

// program is an npm harness that Solve drives with scripted replies: the
// harness, its script, the sandbox folder its launch writes (its
// LEGORL_STATE and the variables under it, moved into the solver's own
// folder so that concurrent runs do not share it), and whether it sends
// side requests without tools (OpenCode's title). canon, when set, makes
// the text of the call-th tool output of a task (seed) the same bytes on
// every run: what the program writes there at random or from the clock.
type program struct {
	h      harness.Harness
	state  string
	script func([]edit) []reply
	titles bool
	canon  func(seed string, call int, text string) string
}

// programs are the npm harnesses Solve writes demonstrations for.
var programs = map[string]program{
	"pi":       {h: harness.Pi{}, state: "/tmp/pi-agent", script: piScript},
	"codex":    {h: harness.Codex{}, state: "/tmp/codex-home", script: codexScript, canon: codexCanon},
	"opencode": {h: harness.OpenCode{}, state: "/tmp/opencode-home", script: openCodeScript, titles: true},
}

// piScript: read the first file, one edit call per file in pi's
// arguments (path, then edits of oldText and newText, its schema's
// order), then a message without a tool call, which ends pi's run.
func piScript(edits []edit) []reply {
	out := []reply{{Content: fmt.Sprintf("Let me read `%s`, where the issue points.", edits[0].Path), Tool: "read", Args: object("path", edits[0].Path)}}
	for _, e := range edits {
		out = append(out, reply{Content: fmt.Sprintf("The bug is at line %d of `%s`. I'll fix it.", e.Line, e.Path), Tool: "edit",
			Args: `{"path": ` + jsonString(e.Path) + `, "edits": [` + object("oldText", e.Old, "newText", e.New) + `]}`})
	}
	return append(out, reply{Content: "The fix is in place."})
}

// install returns the host folder the program is installed in (its
// harness's Install: found in cache, else installed there with npm); a
// rollout shows it at ProgramDir.
func (p program) install(ctx context.Context, cache string) (string, error) {
	prog, err := p.h.Install(ctx, cache)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not installed under %s and could not be installed (run `make test-harnesses` and pass its tools/harnesses as the harness cache): %s",
			ErrNotInstalled, p.h.Name(), cache, firstLine(err.Error()))
	}
	if real, err := filepath.EvalSymlinks(prog); err == nil {
		prog = real // Node.js names its modules by their real path
	}
	return prog, nil
}

// run runs the real program, installed in prog, in ws against baseURL,
// launched as a rollout launches it (its harness's Command: its
// configuration files, flags and environment) but on this machine, with
// its writable state and HOME in tmp, and checks that it ran every
// scripted tool call without error and ended by itself.
func (p program) run(ctx context.Context, prog, baseURL, task, ws, tmp string, replies []reply) error {
	cfg := filepath.Join(tmp, p.h.Name()+"-config")
	taskFile := filepath.Join(cfg, "task.md")
	l, err := p.h.Command(harness.Env{BaseURL: baseURL, TaskFile: taskFile, Workspace: ws, ConfigDir: cfg, ProgramDir: prog})
	if err != nil {
		return fmt.Errorf("scripted: %w", err)
	}
	files := map[string][]byte{filepath.Base(taskFile): []byte(task)}
	for name, b := range l.Files {
		files[name] = b
	}
	if err := writeFiles(cfg, files); err != nil {
		return err
	}
	env, err := programEnv(l.Cmd.Env, tmp, p.state, p.stateDir(tmp))
	if err != nil {
		return fmt.Errorf("%w (harness %s)", err, p.h.Name())
	}
	stdout, err := runLaunch(ctx, p.h.Name(), l.Cmd.Args, l.Cmd.Dir, env)
	if err != nil {
		return err
	}
	return p.check(stdout, replies)
}

// canonical applies canon to d's tool outputs, if the program has one.
func (p program) canonical(d *Demo, seed string) {
	if p.canon == nil {
		return
	}
	call := 0
	for i, m := range d.Messages {
		if m.Role == "tool" {
			d.Messages[i].Content = p.canon(seed, call, m.Content)
			call++
		}
	}
}

// stateDir is where the program's sandbox state folder is in tmp.
func (p program) stateDir(tmp string) string { return filepath.Join(tmp, p.h.Name()+"-state") }

// writeFiles writes files (slash-separated names) under dir.
func writeFiles(dir string, files map[string][]byte) error {
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("scripted: pi's configuration: %w", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("scripted: pi's configuration: %w", err)
		}
	}
	return nil
}

// programEnv is the environment a program runs in: the local sandbox's
// defaults with HOME and TMPDIR in tmp, and the launch's own variables,
// those naming the sandbox folder state (LEGORL_STATE and, for pi,
// PI_CODING_AGENT_DIR; OpenCode's HOME and XDG folders) moved to moved. A
// launch whose LEGORL_STATE is no longer under state is refused.
func programEnv(launch []string, tmp, state, moved string) ([]string, error) {
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "LANG=C.UTF-8", "TMPDIR=" + tmp}
	ok := false
	for _, kv := range launch {
		k, v, _ := strings.Cut(kv, "=")
		if v == state || strings.HasPrefix(v, state+"/") {
			kv = k + "=" + moved + v[len(state):]
			ok = ok || k == "LEGORL_STATE"
		}
		env = append(env, kv)
	}
	if !ok {
		return nil, fmt.Errorf("%w: the launch no longer keeps its state (LEGORL_STATE) under %s", ErrUnsupported, state)
	}
	return env, nil
}

// runLaunch runs argv of the harness name in dir with env, no stdin, and
// returns its stdout. A missing program (the shell's exit 127: Node.js not
// installed) is ErrNotInstalled.
func runLaunch(ctx context.Context, name string, argv []string, dir string, env []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: harness %s's launch has no command", ErrUnsupported, name)
	}
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 127:
		return nil, fmt.Errorf("%w: %s needs Node.js (apt-get install nodejs; `make test-harnesses` installs the npm harnesses): %s", ErrNotInstalled, name, firstLine(strings.TrimSpace(stderr.String())))
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w: %s", ErrFailed, name, err, tail(stderr.String(), 500))
	}
	return stdout.Bytes(), nil
}

// check reads the program's JSON events (its harness's Result): it must
// have ended by itself, run one tool call per scripted one, none failing.
func (p program) check(stdout []byte, replies []reply) error {
	name := p.h.Name()
	res, err := p.h.Result(stdout)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	if res.Stop != harness.StopDone || len(res.Flags) > 0 {
		return fmt.Errorf("%w: %s stopped with %q %v: %s", ErrFailed, name, res.Stop, res.Flags, res.Error)
	}
	want := 0
	for _, r := range replies {
		if r.Tool != "" {
			want++
		}
	}
	if res.ToolCalls != want {
		return fmt.Errorf("%w: %s ran %d tool calls, the script has %d", ErrFailed, name, res.ToolCalls, want)
	}
	for _, s := range res.Steps {
		if s.ExitCode != 0 {
			return fmt.Errorf("%w: %s's %s call of turn %d failed (%s)", ErrFailed, name, s.ToolName, s.Turn, s.Arguments)
		}
	}
	return nil
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// tail is the last n bytes of s, trimmed, on one line.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return strings.Join(strings.Fields(s), " ")
}
