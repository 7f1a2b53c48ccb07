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

// piTimeout bounds one pi run: a scripted run takes seconds, a hung one
// is ended.
const piTimeout = 2 * time.Minute

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

// installPi returns the host folder pi is installed in (harness.Pi's
// Install: found in cache, else installed there with npm); a rollout
// shows it at ProgramDir.
func installPi(ctx context.Context, cache string) (string, error) {
	prog, err := harness.Pi{}.Install(ctx, cache)
	if err != nil {
		return "", fmt.Errorf("%w: pi is not installed under %s and could not be installed (run `make test-harnesses` and pass its tools/harnesses as the harness cache): %s",
			ErrNotInstalled, cache, firstLine(err.Error()))
	}
	if real, err := filepath.EvalSymlinks(prog); err == nil {
		prog = real // Node.js names its modules by their real path
	}
	return prog, nil
}

// runPi runs the real pi program, installed in prog, in ws against
// baseURL, launched as a rollout launches it (harness.Pi's Command: its
// models.json and settings.json, flags and environment) but on this
// machine, with its writable agent folder and HOME in tmp, and checks that
// it ran every scripted tool call without error and ended by itself.
func runPi(ctx context.Context, prog, baseURL, task, ws, tmp string, replies []reply) error {
	cfg := filepath.Join(tmp, "pi-config")
	taskFile := filepath.Join(cfg, "task.md")
	l, err := harness.Pi{}.Command(harness.Env{BaseURL: baseURL, TaskFile: taskFile, Workspace: ws, ConfigDir: cfg, ProgramDir: prog})
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
	env, err := piEnv(l.Cmd.Env, tmp)
	if err != nil {
		return err
	}
	stdout, err := runLaunch(ctx, l.Cmd.Args, l.Cmd.Dir, env)
	if err != nil {
		return err
	}
	return checkPi(stdout, replies)
}

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

// piEnv is the environment pi runs in: the local sandbox's defaults with
// HOME and TMPDIR in tmp, and the launch's own variables, its writable
// agent folder (LEGORL_STATE, PI_CODING_AGENT_DIR: a fixed /tmp folder
// inside a sandbox) moved to tmp so that concurrent runs do not share it.
func piEnv(launch []string, tmp string) ([]string, error) {
	state, home := filepath.Join(tmp, "pi-agent"), filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "LANG=C.UTF-8", "TMPDIR=" + tmp}
	moved := 0
	for _, kv := range launch {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LEGORL_STATE" || k == "PI_CODING_AGENT_DIR" {
			kv = k + "=" + state
			moved++
		}
		env = append(env, kv)
	}
	if moved != 2 {
		return nil, fmt.Errorf("%w: harness pi's launch no longer sets LEGORL_STATE and PI_CODING_AGENT_DIR", ErrUnsupported)
	}
	return env, nil
}

// runLaunch runs argv in dir with env, no stdin, and returns its stdout.
// A missing program (the shell's exit 127: Node.js not installed) is
// ErrNotInstalled.
func runLaunch(ctx context.Context, argv []string, dir string, env []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: harness pi's launch has no command", ErrUnsupported)
	}
	ctx, cancel := context.WithTimeout(ctx, piTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 127:
		return nil, fmt.Errorf("%w: pi needs Node.js (apt-get install nodejs; `make test-harnesses` installs pi): %s", ErrNotInstalled, firstLine(strings.TrimSpace(stderr.String())))
	case err != nil:
		return nil, fmt.Errorf("%w: pi: %w: %s", ErrFailed, err, tail(stderr.String(), 500))
	}
	return stdout.Bytes(), nil
}

// checkPi reads pi's JSON events: it must have ended by itself, run one
// tool call per scripted one, none failing.
func checkPi(stdout []byte, replies []reply) error {
	res, err := harness.Pi{}.Result(stdout)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	if res.Stop != harness.StopDone {
		return fmt.Errorf("%w: pi stopped with %q: %s", ErrFailed, res.Stop, res.Error)
	}
	want := 0
	for _, r := range replies {
		if r.Tool != "" {
			want++
		}
	}
	if res.ToolCalls != want {
		return fmt.Errorf("%w: pi ran %d tool calls, the script has %d", ErrFailed, res.ToolCalls, want)
	}
	for _, s := range res.Steps {
		if s.ExitCode != 0 {
			return fmt.Errorf("%w: pi's %s call of turn %d failed (%s)", ErrFailed, s.ToolName, s.Turn, s.Arguments)
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
