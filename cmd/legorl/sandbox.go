package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/docker"
	"github.com/legorl/legorl/sandbox/local"
)

// sandboxCommands is the table of `legorl sandbox` subcommands; each lives
// in its own file (sandbox_NAME.go) and adds one line here.
func sandboxCommands() map[string]command {
	return map[string]command{
		"exec":  {"run one command in a fresh sandbox; the outcome is a JSON object on the last line", runSandboxExec},
		"grade": {"grade a diff against a task's hidden tests in a fresh sandbox", runSandboxGrade},
	}
}

// sandboxBackends is the table of sandbox backends by --backend name.
func sandboxBackends() map[string]func(ctx context.Context) (sandbox.Backend, error) {
	return map[string]func(ctx context.Context) (sandbox.Backend, error){
		"local":  func(context.Context) (sandbox.Backend, error) { return local.Open(local.Options{}) },
		"docker": func(ctx context.Context) (sandbox.Backend, error) { return docker.New(ctx, docker.Options{}) },
	}
}

// runSandbox dispatches `legorl sandbox SUBCOMMAND`.
func runSandbox(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	cmds := sandboxCommands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stdout
		fmt.Fprintln(w, "usage: legorl sandbox SUBCOMMAND [flags]    (legorl sandbox SUBCOMMAND -h for its flags)")
		fmt.Fprintln(w, "\nsubcommands:")
		names := make([]string, 0, len(cmds))
		for n := range cmds {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "  %-6s %s\n", n, cmds[n].summary)
		}
		if len(args) == 0 {
			return fmt.Errorf("missing subcommand: want one of %s", strings.Join(names, ", "))
		}
		return nil
	}
	c, ok := cmds[args[0]]
	if !ok {
		return fmt.Errorf("unknown subcommand %q (see legorl sandbox -h)", args[0])
	}
	return c.run(ctx, env, args[1:], stdout, stderr)
}

// execOutcome is the JSON object `legorl sandbox exec` prints last.
type execOutcome struct {
	Outcome         sandbox.Outcome `json:"outcome"`
	ExitCode        int             `json:"exit_code"`
	Signal          string          `json:"signal,omitempty"`
	DurationMS      float64         `json:"duration_ms"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	Detail          string          `json:"detail,omitempty"`
}

// runSandboxExec is `legorl sandbox exec [flags] -- CMD ARGS...`.
func runSandboxExec(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox exec", stderr)
	backend := fs.String("backend", "local", "sandbox backend: "+strings.Join(backendNames(), ", "))
	workspace := fs.String("workspace", "", "host folder copied in as the workspace (the original is never modified); empty: an empty workspace")
	timeout := fs.Duration("timeout", 10*time.Minute, "wall-clock deadline of the command")
	memory := fs.Int64("memory", 2<<30, "memory limit in bytes, all processes together")
	pids := fs.Int("pids", 256, "limit on processes and threads")
	stdin := fs.Bool("stdin", false, "pass legorl's stdin to the command (default: empty stdin)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stderr)
			fmt.Fprintln(stderr, "\nusage: legorl sandbox exec [flags] -- CMD ARGS...")
			return err
		}
		return fmt.Errorf("%v (see %s -h)", err, fs.Name())
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fmt.Errorf("no command: usage legorl sandbox exec [flags] -- CMD ARGS...")
	}
	if *timeout <= 0 || *memory <= 0 || *pids <= 0 {
		return fmt.Errorf("--timeout, --memory and --pids must be positive")
	}
	b, err := openBackend(ctx, *backend)
	if err != nil {
		return err
	}
	if c, ok := b.(io.Closer); ok {
		defer c.Close()
	}
	spec := sandbox.Spec{Workspace: *workspace, Limits: sandbox.Limits{MemoryBytes: *memory, Pids: *pids, Timeout: *timeout}}
	sb, err := b.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer sb.Close()
	out := &lastByteWriter{w: stdout}
	c := sandbox.Cmd{Args: argv, Stdout: out, Stderr: stderr}
	if *stdin {
		c.Stdin = os.Stdin
	}
	res, err := sb.Exec(ctx, c)
	if err != nil && res.Outcome == "" {
		return err
	}
	if out.last != 0 && out.last != '\n' {
		fmt.Fprintln(stdout)
	}
	line, jerr := json.Marshal(execOutcome{
		Outcome: res.Outcome, ExitCode: res.ExitCode, Signal: res.Signal,
		DurationMS:      float64(res.Duration.Microseconds()) / 1000,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		Detail: res.Detail,
	})
	if jerr != nil {
		return jerr
	}
	fmt.Fprintf(stdout, "%s\n", line)
	if cerr := sb.Close(); cerr != nil {
		return cerr
	}
	return nil
}

// openBackend starts the sandbox backend called name (see sandboxBackends).
func openBackend(ctx context.Context, name string) (sandbox.Backend, error) {
	newBackend, ok := sandboxBackends()[name]
	if !ok {
		return nil, fmt.Errorf("unknown backend %q: want one of %s", name, strings.Join(backendNames(), ", "))
	}
	return newBackend(ctx)
}

func backendNames() []string {
	var names []string
	for n := range sandboxBackends() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lastByteWriter remembers the last byte written, so the outcome line can
// start on a line of its own.
type lastByteWriter struct {
	w    io.Writer
	last byte
}

func (l *lastByteWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.last = p[len(p)-1]
	}
	return l.w.Write(p)
}
