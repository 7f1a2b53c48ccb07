package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// cmdResult is one command's end.
type cmdResult struct {
	ExitCode int // -1 when killed
	Output   string
	TimedOut bool
	Seconds  float64
}

// commandEnv is added to the agent's environment for every command: no
// pagers, no progress bars, no prompts.
var commandEnv = []string{"PAGER=cat", "MANPAGER=cat", "GIT_PAGER=cat", "LESS=-R", "TERM=dumb",
	"PIP_PROGRESS_BAR=off", "TQDM_DISABLE=1", "GIT_TERMINAL_PROMPT=0", "DEBIAN_FRONTEND=noninteractive"}

// shell returns the shell that runs commands: bash when there is one.
func shell() string {
	for _, p := range []string{"/bin/bash", "/usr/bin/bash"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "/bin/sh"
}

// runCommand runs command with the shell in dir, stdin empty, stdout and
// stderr merged and capped to max bytes (head and tail kept). At timeout
// or when ctx ends, the command's whole process group is killed; when it
// ends, whatever it left in its group is killed too.
func runCommand(ctx context.Context, dir, command string, timeout time.Duration, max int) cmdResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &capWriter{max: max}
	cmd := exec.Command(shell(), "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), commandEnv...)
	cmd.Stdout, cmd.Stderr = out, out
	setGroup(cmd)
	// A background child that keeps the output pipe open does not keep
	// Wait waiting past this.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return cmdResult{ExitCode: -1, Output: fmt.Sprintf("the command could not start: %v", err), Seconds: time.Since(start).Seconds()}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-ctx.Done():
		timedOut = true
		killGroup(cmd)
		err = <-done // bounded: the group is dead and WaitDelay closes the pipes
	}
	killGroup(cmd) // what it left behind
	r := cmdResult{ExitCode: cmd.ProcessState.ExitCode(), Output: out.String(), TimedOut: timedOut, Seconds: time.Since(start).Seconds()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		r.Output += fmt.Sprintf("\n[error: %v]", err)
	}
	return r
}

// capWriter keeps the first and last max/2 bytes written and counts the
// rest.
type capWriter struct {
	max   int
	head  []byte
	tail  []byte
	total int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.total += int64(n)
	half := max(w.max/2, 1)
	if room := half - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		w.tail = append(w.tail, p...)
		if len(w.tail) > 2*half {
			w.tail = append(w.tail[:0], w.tail[len(w.tail)-half:]...)
		}
	}
	return n, nil
}

func (w *capWriter) String() string {
	half := max(w.max/2, 1)
	tail := w.tail
	if len(tail) > half {
		tail = tail[len(tail)-half:]
	}
	kept := int64(len(w.head) + len(tail))
	if kept == w.total {
		return string(w.head) + string(tail)
	}
	var b strings.Builder
	b.Write(w.head)
	fmt.Fprintf(&b, "\n[... %d bytes of output elided ...]\n", w.total-kept)
	b.Write(tail)
	return b.String()
}

// capText cuts s to max bytes, head and tail kept.
func capText(s string, max int) string {
	w := &capWriter{max: max}
	w.Write([]byte(s))
	return w.String()
}
