package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// killGrace is how long Exec waits for the output stream to end after it
// killed the process tree, before it cuts the stream.
const killGrace = 5 * time.Second

// startLimit bounds how long the engine may take to start a program.
const startLimit = 30 * time.Second

// stopThenExec is the program every Exec starts: it stops itself before
// it runs the command, so the host can move it into the exec's own cgroup
// before it can fork; then it becomes the command (same pid, exit status
// and signals; 127 for a command not found, like a shell).
const stopThenExec = `kill -STOP $$ && exec "$@"`

var execSeq atomic.Int64

// Exec runs cmd in the container through container exec, as the
// sandbox's non-root user, and waits for it, its deadline or ctx. The
// command runs in a cgroup of its own, so when it exits, or at the
// deadline, every process it started is killed (a background child cannot
// outlive it or hold Exec), while other Execs are untouched. The outcome is
// resource_limit when the memory cgroup OOM-killed a process during the
// call, or the program failed after the pids limit refused a fork or with
// the workspace or /tmp full (Result.DiskFull, set whatever the exit).
// The image needs /bin/sh.
func (s *box) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	start := time.Now()
	res, err := s.exec(ctx, cmd)
	s.met.Exec("docker", res, time.Since(start))
	return res, err
}

func (s *box) exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if err := s.alive(); err != nil {
		return sandbox.Result{Outcome: sandbox.OutcomeSandboxCrash, ExitCode: -1, Detail: err.Error()}, err
	}
	if len(cmd.Args) == 0 {
		return sandbox.Result{}, errors.New("docker: exec: no command")
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = s.lim.Timeout
	}
	dir := cmd.Dir
	if dir == "" {
		dir = s.spec.WorkspaceDir
	}
	// API calls outlive ctx: the deadline logic below decides when to stop.
	api := context.WithoutCancel(ctx)
	crash := func(what string, err error) (sandbox.Result, error) {
		if d := s.diedOfOOM(api); d != "" {
			return sandbox.Result{Outcome: sandbox.OutcomeResourceLimit, ExitCode: -1, Detail: d}, nil
		}
		err = fmt.Errorf("docker: exec: %s: %w", what, err)
		return sandbox.Result{Outcome: sandbox.OutcomeSandboxCrash, ExitCode: -1, Detail: err.Error()}, err
	}

	created, err := s.b.cli.ExecCreate(api, s.id, client.ExecCreateOptions{
		User:         s.b.opts.User,
		AttachStdin:  cmd.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Env:          append(baseEnv(s.spec.Env), cmd.Env...),
		WorkingDir:   dir,
		Cmd:          append([]string{"/bin/sh", "-c", stopThenExec, "sh"}, cmd.Args...),
	})
	if err != nil {
		return crash("create", err)
	}
	tree := &execTree{cg: s.cg, name: fmt.Sprintf("%s%d-%d", execGroupPrefix, os.Getpid(), execSeq.Add(1))}
	defer tree.remove()
	oomBefore, pidsBefore := s.cg.oomKills(), s.cg.pidsRefused()

	start := time.Now()
	att, err := s.b.cli.ExecAttach(api, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return crash("start", err)
	}
	defer att.Close()

	stdout := &capped{max: s.lim.OutputBytes, tee: cmd.Stdout}
	stderr := &capped{max: s.lim.OutputBytes, tee: cmd.Stderr}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	if cmd.Stdin != nil {
		go func() {
			io.Copy(att.Conn, cmd.Stdin)
			att.CloseWrite()
		}()
	}
	stop := make(chan struct{})
	defer close(stop)
	resumed, exited := make(chan struct{}), make(chan struct{})
	go s.adopt(api, created.ID, tree, stop, resumed, exited)

	// The deadline counts from the program's start, not from the engine's
	// (slow, load-dependent) setup; a program that never starts is given
	// up on startLimit after the call.
	timer := time.NewTimer(timeout + startLimit)
	defer timer.Stop()
	var killed string // why the tree was killed early; empty if it was not
	streamDone := false
wait:
	for {
		select {
		case <-resumed:
			timer.Reset(timeout)
			resumed = nil
		case <-exited:
			break wait
		case <-copied:
			// The output ended: the program exited, or never started, or
			// closed its stdout and stderr and runs on.
			streamDone, copied = true, nil
			if code, err := s.exitCode(api, created.ID, 0); err == nil && code >= 0 {
				break wait
			}
		case <-timer.C:
			killed = fmt.Sprintf("deadline of %s passed; process tree killed", timeout)
			break wait
		case <-ctx.Done():
			killed = fmt.Sprintf("%v; process tree killed", context.Cause(ctx))
			break wait
		}
	}
	// The program is gone or out of time: end everything it started.
	killErr := tree.kill()
	if !streamDone {
		select {
		case <-copied:
		case <-time.After(killGrace):
			att.Close() // a process we could not kill holds the stream open
			<-copied
		}
	}
	dur := time.Since(start)

	res := sandbox.Result{
		Outcome:         sandbox.OutcomeCompleted,
		Duration:        dur,
		Stdout:          stdout.buf,
		Stderr:          stderr.buf,
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
	}
	code, err := s.exitCode(api, created.ID, 10*time.Second)
	if err != nil && killed == "" {
		return crash("inspect", err)
	}
	res.ExitCode = code
	full := s.diskFull()
	res.DiskFull = full != ""
	if code > 128 && code <= 128+64 {
		// The engine reports death by signal N as 128+N, like a shell.
		res.ExitCode = -1
		res.Signal = syscall.Signal(code - 128).String()
	}
	switch {
	case killed != "":
		res.Outcome = sandbox.OutcomeTimeout
		res.ExitCode, res.Signal = -1, syscall.SIGKILL.String()
		res.Detail = killed
		if killErr != nil {
			res.Detail += " (" + killErr.Error() + ")"
		}
	case s.cg.oomKills() > oomBefore:
		res.Outcome = sandbox.OutcomeResourceLimit
		res.Detail = fmt.Sprintf("memory limit of %d bytes hit: a process was OOM-killed", s.lim.MemoryBytes)
	case code != 0 && s.cg.pidsRefused()-pidsBefore+tree.refused() > 0:
		res.Outcome = sandbox.OutcomeResourceLimit
		res.Detail = fmt.Sprintf("pids limit of %d hit: a fork was refused", s.lim.Pids)
	case res.ExitCode != 0 && res.DiskFull:
		res.Outcome = sandbox.OutcomeResourceLimit
		res.Detail = full
	}
	if res.Outcome == sandbox.OutcomeCompleted && res.Signal != "" {
		// Killed, with no OOM kill counted: the container may have died
		// (its cgroup, and the count, went with it).
		if d := s.diedOfOOM(api); d != "" {
			res.Outcome, res.Detail = sandbox.OutcomeResourceLimit, d
		}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// diedOfOOM says why the container is gone, "" unless the memory limit
// killed its init: the OOM killer goes on killing while files in the
// workspace and /tmp hold the memory, and can reach the init. The answer
// sticks, so every later Exec says so too (as resource_limit, not
// sandbox_crash): the agent's own writes ended the sandbox.
func (s *box) diedOfOOM(ctx context.Context) string {
	s.mu.Lock()
	d := s.oomDeath
	s.mu.Unlock()
	if d != "" {
		return d
	}
	ins, err := s.b.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil || ins.Container.State == nil || ins.Container.State.Running || !ins.Container.State.OOMKilled {
		return ""
	}
	d = fmt.Sprintf("memory limit of %d bytes hit: the container's init was OOM-killed, so the sandbox is gone (files in the workspace and /tmp count against the limit)", s.lim.MemoryBytes)
	s.mu.Lock()
	s.oomDeath = d
	s.mu.Unlock()
	return d
}

// diskFull says which of the workspace and /tmp are full, "" if neither.
// /tmp is the container's, seen through its init's root.
func (s *box) diskFull() string {
	var full []string
	if capfs.Full(s.ws) {
		full = append(full, fmt.Sprintf("the workspace is full (%d bytes)", s.lim.DiskBytes))
	}
	if capfs.Full(fmt.Sprintf("/proc/%d/root/tmp", s.pid)) {
		full = append(full, fmt.Sprintf("/tmp is full (%d bytes)", s.lim.TmpBytes))
	}
	return strings.Join(full, "; ")
}

// exitCode returns the exec's exit code, waiting up to wait for the
// engine to record it; -1 with no error when it is still running.
func (s *box) exitCode(ctx context.Context, execID string, wait time.Duration) (int, error) {
	deadline := time.Now().Add(wait)
	for {
		ins, err := s.b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, err
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		if time.Now().After(deadline) {
			if wait > 0 {
				return -1, errors.New("exec still running")
			}
			return -1, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// adopt finds the exec's process (stopped by stopThenExec), moves it into
// the exec's cgroup, resumes it, and closes exited when it ends. It returns
// early when stop closes.
func (s *box) adopt(ctx context.Context, execID string, tree *execTree, stop <-chan struct{}, resumed, exited chan<- struct{}) {
	var pid int
	wait := time.Millisecond
	for {
		// PID is set once the process has started and stays set after it
		// ended; before the start it is 0.
		ins, err := s.b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return
		}
		if ins.PID > 0 {
			pid = ins.PID
			break
		}
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
	if !waitStopped(pid, stop) {
		close(exited) // gone before it could be adopted
		return
	}
	tree.adopt(pid)
	close(resumed)
	if waitPid(pid, stop) {
		close(exited)
	}
}

// waitStopped waits until process pid is stopped (true) or gone (false).
func waitStopped(pid int, stop <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) S ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			switch b[i+2] {
			case 'T', 't':
				return true
			case 'Z', 'X':
				return false
			}
		}
		if time.Now().After(deadline) {
			return true // never stopped: adopt it anyway
		}
		select {
		case <-stop:
			return false
		case <-time.After(500 * time.Microsecond):
		}
	}
}

// execTree is the process tree of one Exec: its root pid once known and
// the cgroup that holds it and its descendants.
type execTree struct {
	cg   cgroups
	name string

	mu    sync.Mutex
	pid   int
	group *execGroup // nil when not (yet) adopted
	err   error      // why adoption failed
	dead  bool       // killed; a late adoption kills instead of resuming
}

// adopt moves the stopped root process into a new cgroup and resumes it.
// Without a cgroup it still resumes it (kill then reaches the root only).
func (t *execTree) adopt(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pid = pid
	if t.dead {
		syscall.Kill(pid, syscall.SIGKILL)
		return
	}
	g, err := t.cg.newExecGroup(t.name)
	if err == nil {
		if err = g.add(pid); err != nil {
			g.remove()
			g = nil
		}
	}
	t.group, t.err = g, err
	syscall.Kill(pid, syscall.SIGCONT)
}

// kill ends the whole tree; later adoptions kill too.
func (t *execTree) kill() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dead = true
	if t.group != nil {
		return t.group.kill()
	}
	if t.pid > 0 {
		syscall.Kill(t.pid, syscall.SIGKILL)
	}
	if t.err != nil {
		return fmt.Errorf("only the root process was killed: %w", t.err)
	}
	return nil
}

// refused is how many forks of the tree the pids limit refused.
func (t *execTree) refused() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.group == nil {
		return 0
	}
	return t.group.refused()
}

// remove kills what is left and deletes the cgroup.
func (t *execTree) remove() {
	t.kill()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.group != nil {
		t.group.remove()
		t.group = nil
	}
}

// capped keeps the first max bytes written to it, records whether more
// came, and passes everything on to tee (if set). It never fails, so a
// flood is drained rather than blocking the program.
type capped struct {
	max       int64
	buf       []byte
	truncated bool
	tee       io.Writer
	teeErr    error
}

func (c *capped) Write(p []byte) (int, error) {
	if c.tee != nil && c.teeErr == nil {
		_, c.teeErr = c.tee.Write(p)
	}
	room := c.max - int64(len(c.buf))
	if room >= int64(len(p)) {
		c.buf = append(c.buf, p...)
	} else {
		if room > 0 {
			c.buf = append(c.buf, p[:room]...)
		}
		c.truncated = true
	}
	return len(p), nil
}
