//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/internal/capfs"
	"github.com/legorl/legorl/sandbox/local/initproc"
)

// Create builds a sandbox: the holder process in new user, mount, pid,
// network, uts and ipc namespaces, its root mapped to a fresh unprivileged
// host uid; a private copy of the workspace owned by that uid, on a tmpfs
// of Limits.DiskBytes; cgroups with the limits.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	s, err := b.create(ctx, spec)
	b.opts.Metrics.Created("local", err)
	if err != nil {
		return nil, err
	}
	s.met = b.opts.Metrics
	return s, nil
}

func (b *Backend) create(ctx context.Context, spec sandbox.Spec) (_ *localSandbox, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-b.stop:
		return nil, sandbox.ErrClosed
	default:
	}
	spec, err = normalize(spec)
	if err != nil {
		return nil, err
	}
	b.gcOnce.Do(func() { collectOrphans(b.opts.Dir) })
	// A prestarted holder, or a new one that builds its root while the
	// workspace is copied.
	h, refill, err := b.takeHolder(ctx)
	if err != nil {
		return nil, setupErr("init", err)
	}
	s := &localSandbox{spec: spec, uid: h.uid, home: h.home, dir: h.dir, ws: h.ws, cg: h.cg,
		holderPid: h.pid, pidfd: h.pidfd, ctl: h.ctl, ctlFD: h.ctlFD, refill: refill}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// The holder came with the default limits; the spec may ask for others.
	if spec.Limits.DiskBytes != h.disk {
		if err := capfs.Resize(s.ws, spec.Limits.DiskBytes); err != nil {
			return nil, setupErr("workspace", err)
		}
	}
	if spec.Workspace != "" {
		if err := copyTree(spec.Workspace, s.ws, s.uid, s.uid); err != nil {
			return nil, setupErr("workspace", fmt.Errorf("copy %s into a %d-byte workspace: %w", spec.Workspace, spec.Limits.DiskBytes, err))
		}
	}
	if s.cg != nil {
		if err := s.cg.setLimits(cgroupLimits{spec.Limits.MemoryBytes, spec.Limits.Pids, spec.Limits.CPUs}); err != nil {
			return nil, setupErr("cgroups", err)
		}
	}
	if !h.prepared {
		if err := h.waitPrepared(); err != nil {
			return nil, setupErr("init", err)
		}
	}
	if err := s.setup(b.opts); err != nil {
		return nil, setupErr("init", err)
	}
	return s, nil
}

func setupErr(what string, err error) error {
	return fmt.Errorf("%w: local: %s: %v", sandbox.ErrSetup, what, err)
}

// maxMounts bounds Spec.Mounts: they travel with the workspace in one
// message, which carries at most initproc.MaxFDs descriptors.
const maxMounts = initproc.MaxFDs - 1

// normalize checks a spec and fills its defaults.
func normalize(spec sandbox.Spec) (sandbox.Spec, error) {
	spec = spec.WithDefaults()
	if !filepath.IsAbs(spec.WorkspaceDir) || filepath.Clean(spec.WorkspaceDir) == "/" {
		return spec, fmt.Errorf("%w: local: workspace dir %q must be an absolute path below /", sandbox.ErrSetup, spec.WorkspaceDir)
	}
	spec.WorkspaceDir = filepath.Clean(spec.WorkspaceDir)
	if spec.Workspace != "" {
		fi, err := os.Stat(spec.Workspace)
		if err != nil {
			return spec, setupErr("workspace", err)
		}
		if !fi.IsDir() {
			return spec, setupErr("workspace", fmt.Errorf("%s is not a folder", spec.Workspace))
		}
	}
	if len(spec.Mounts) > maxMounts {
		return spec, fmt.Errorf("%w: local: %d mounts, at most %d", sandbox.ErrSetup, len(spec.Mounts), maxMounts)
	}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/" {
			return spec, fmt.Errorf("%w: local: mount target %q must be an absolute path below /", sandbox.ErrSetup, m.Target)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return spec, setupErr("mount", err)
		}
	}
	return spec, nil
}

// randomUID picks the host uid (and gid) the sandbox's root maps to: a
// random unprivileged id far above any real account, so that no two
// sandboxes share one and none owns a host file.
func randomUID() (int, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return 1<<30 + int(binary.LittleEndian.Uint32(b[:])%(1<<29)), nil
}

// localSandbox is one sandbox of the local backend.
type localSandbox struct {
	spec sandbox.Spec
	uid  int
	home *home
	dir  string // host folder holding the workspace, in home
	ws   string // host path of the workspace
	cg   *cgroup

	holderMu  sync.Mutex
	holderPid int
	pidfd     int      // of the holder; -1 once it is dead
	ctl       *os.File // host end of the control socket
	ctlFD     int

	execMu sync.Mutex // one Exec at a time
	// Guarded by execMu: the cgroup's event counts when the last Exec
	// ended normally (zero in a fresh cgroup, so the first Exec reads them
	// only once), and why the holder died if the memory limit killed it.
	seen     cgroupCounters
	oomDeath string

	mu        sync.Mutex
	closed    bool
	listeners []net.Listener

	met *sandbox.Metrics // set once Create has counted the sandbox

	// refill, when not nil, asks for the prestarted holder that replaces
	// this sandbox's (see Backend.takeHolder): Close calls it once the
	// sandbox is gone.
	refill func()
}

// setup hands the holder the workspace, the mounts and the limits, and
// waits for it to seal the sandbox.
func (s *localSandbox) setup(opts Options) error {
	var trees []int
	defer func() { closeAll(trees) }()
	for _, p := range append([]string{s.ws}, mountSources(s.spec.Mounts)...) {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("open_tree %s: %w", p, err)
		}
		trees = append(trees, fd)
	}
	cfg := &setupConfig{
		WorkspaceDir: s.spec.WorkspaceDir,
		TmpBytes:     s.spec.Limits.TmpBytes,
		// With cgroups, pids.max is the limit (and says when it was hit);
		// RLIMIT_NPROC is a backstop above it. Without, it is the limit.
		NprocLimit: s.spec.Limits.Pids,
		Seccomp:    !opts.NoSeccomp,
	}
	if s.cg != nil {
		cfg.NprocLimit += 64
	}
	for _, m := range s.spec.Mounts {
		cfg.Mounts = append(cfg.Mounts, mountEntry{Target: filepath.Clean(m.Target), ReadOnly: m.ReadOnly})
	}
	if err := send(s.ctlFD, &message{Op: initproc.OpSetup, Setup: cfg}, trees...); err != nil {
		return s.holderErr(err)
	}
	m, fds, err := recv(s.ctlFD)
	closeAll(fds)
	if err == nil {
		err = want(m, initproc.OpReady)
	}
	if err != nil {
		return s.holderErr(err)
	}
	if m.Error != "" {
		return fmt.Errorf("holder: %s", m.Error)
	}
	return nil
}

// holderErr kills the holder (it failed) and returns err.
func (s *localSandbox) holderErr(err error) error {
	s.killHolder()
	return err
}

func mountSources(ms []sandbox.Mount) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Source
	}
	return out
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// HostWorkspace returns the host folder that is the sandbox's workspace.
func (s *localSandbox) HostWorkspace() string { return s.ws }

// Exec runs one command; see sandbox.Sandbox. Commands run one at a time,
// and when a command ends every process it left behind is killed.
func (s *localSandbox) Exec(ctx context.Context, c sandbox.Cmd) (sandbox.Result, error) {
	start := time.Now()
	res, err := s.exec(ctx, c)
	s.met.Exec("local", res, time.Since(start))
	return res, err
}

func (s *localSandbox) exec(ctx context.Context, c sandbox.Cmd) (sandbox.Result, error) {
	s.execMu.Lock()
	defer s.execMu.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return sandbox.Result{}, sandbox.ErrClosed
	}
	if len(c.Args) == 0 {
		return sandbox.Result{}, errors.New("sandbox: local: exec: no command")
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = s.spec.Limits.Timeout
	}
	dir := c.Dir
	if dir == "" {
		dir = s.spec.WorkspaceDir
	}
	env := append(defaultEnv(), s.spec.Env...)
	env = append(env, c.Env...)

	start := time.Now()
	before := s.seen
	stdin, err := s.stdin(c.Stdin)
	if err != nil {
		return sandbox.Result{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return sandbox.Result{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		outR.Close()
		outW.Close()
		return sandbox.Result{}, err
	}
	var stdout, stderr capture
	stdout.limit, stderr.limit = s.spec.Limits.OutputBytes, s.spec.Limits.OutputBytes
	stdout.tee, stderr.tee = c.Stdout, c.Stderr
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); stdout.drain(outR) }()
	go func() { defer wg.Done(); stderr.drain(errR) }()

	err = send(s.ctlFD, &message{Op: initproc.OpExec, Args: c.Args, Dir: dir, Env: env},
		int(stdin.Fd()), int(outW.Fd()), int(errW.Fd()))
	stdin.Close()
	outW.Close()
	errW.Close()
	var (
		exit     *message
		timedOut bool
		ctxErr   error
	)
	if errors.Is(err, errTooBig) {
		wg.Wait()
		return sandbox.Result{}, fmt.Errorf("sandbox: local: exec: %w", err)
	}
	if err == nil {
		exit, timedOut, ctxErr, err = s.wait(ctx, timeout)
	}
	if err != nil {
		// The holder is gone or speaks nonsense: the sandbox is dead.
		s.killHolder()
		wg.Wait()
		res := sandbox.Result{Outcome: sandbox.OutcomeSandboxCrash, ExitCode: -1, Duration: time.Since(start),
			Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(),
			StdoutTruncated: stdout.truncated, StderrTruncated: stderr.truncated,
			Detail: s.holderErr(err).Error()}
		if d := s.diedOfOOM(); d != "" {
			res.Outcome, res.Detail = sandbox.OutcomeResourceLimit, d
		}
		return res, nil
	}
	// Every process is dead, so the pipes are at EOF; a bound all the same,
	// lest a bug here hang the caller.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	stuck := false
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		stuck = true
		outR.Close()
		errR.Close()
		<-drained
	}
	after := s.cg.counters()
	s.seen = after
	res := sandbox.Result{
		Outcome:         sandbox.OutcomeCompleted,
		Duration:        time.Since(start),
		Stdout:          stdout.buf.Bytes(),
		Stderr:          stderr.buf.Bytes(),
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
	}
	if exit.Error != "" {
		res.ExitCode = 126
		if exit.NotFound {
			res.ExitCode = 127
		}
		res.Detail = exit.Error
		res.Stderr = append(res.Stderr, exit.Error+"\n"...)
		if after.oomKills > before.oomKills { // the fork itself was refused
			res.Outcome = sandbox.OutcomeResourceLimit
			res.Detail = fmt.Sprintf("memory limit of %d bytes hit: %s", s.spec.Limits.MemoryBytes, exit.Error)
		}
		return res, nil
	}
	ws := syscall.WaitStatus(exit.Status)
	switch {
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.ExitCode = -1
		res.Signal = ws.Signal().String()
	}
	full := diskFull(capfs.Full(s.ws), s.spec.Limits.DiskBytes, exit.TmpFull, s.spec.Limits.TmpBytes)
	res.DiskFull = full != ""
	switch {
	case timedOut:
		res.Outcome = sandbox.OutcomeTimeout
		res.Detail = fmt.Sprintf("deadline of %s passed; the process tree was killed", timeout)
	case ctxErr != nil:
		res.Outcome = sandbox.OutcomeTimeout
		res.Detail = "canceled: " + ctxErr.Error()
	case after.oomKills > before.oomKills:
		res.Outcome = sandbox.OutcomeResourceLimit
		res.Detail = fmt.Sprintf("memory limit of %d bytes hit (%d processes killed)", s.spec.Limits.MemoryBytes, after.oomKills-before.oomKills)
	case res.ExitCode != 0 && after.pidsMax > before.pidsMax:
		res.Outcome = sandbox.OutcomeResourceLimit
		res.Detail = fmt.Sprintf("process limit of %d hit", s.spec.Limits.Pids)
	case res.ExitCode != 0 && res.DiskFull:
		res.Outcome = sandbox.OutcomeResourceLimit
		res.Detail = full
	}
	if stuck {
		res.Detail += "; output was still open 10s after the command ended"
	}
	if timedOut && after.pidsMax > before.pidsMax {
		res.Detail += fmt.Sprintf("; the process limit of %d was hit", s.spec.Limits.Pids)
	}
	return res, ctxErr
}

// diedOfOOM says why the holder died, "" unless the memory limit killed
// it: the OOM killer picks the largest process, which the holder can be
// when what commands wrote to the workspace and /tmp holds the memory. The
// answer sticks, so every later Exec says so too: the agent's own writes
// ended the sandbox, not the infrastructure.
func (s *localSandbox) diedOfOOM() string {
	if s.oomDeath == "" {
		if n := s.cg.counters().oomKills; n > s.seen.oomKills {
			s.oomDeath = fmt.Sprintf("memory limit of %d bytes hit: the sandbox's init was OOM-killed (%d OOM kills), so the sandbox is gone (files in the workspace and /tmp count against the limit)",
				s.spec.Limits.MemoryBytes, n-s.seen.oomKills)
		}
	}
	return s.oomDeath
}

// diskFull says which of the workspace and /tmp are full, "" if neither.
func diskFull(ws bool, wsBytes int64, tmp bool, tmpBytes int64) string {
	var full []string
	if ws {
		full = append(full, fmt.Sprintf("the workspace is full (%d bytes)", wsBytes))
	}
	if tmp {
		full = append(full, fmt.Sprintf("/tmp is full (%d bytes)", tmpBytes))
	}
	return strings.Join(full, "; ")
}

// wait waits for the exec to end; at the deadline or when ctx ends it has
// the holder kill the process tree, and waits for that.
func (s *localSandbox) wait(ctx context.Context, timeout time.Duration) (exit *message, timedOut bool, ctxErr error, err error) {
	type in struct {
		m   *message
		err error
	}
	got := make(chan in, 1)
	go func() {
		m, fds, err := recv(s.ctlFD)
		closeAll(fds)
		got <- in{m, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var grace <-chan time.Time
	killed := false
	kill := func() {
		if !killed {
			killed = true
			send(s.ctlFD, &message{Op: initproc.OpKill})
			grace = time.After(10 * time.Second)
		}
	}
	done := ctx.Done()
	for {
		select {
		case r := <-got:
			if r.err != nil {
				return nil, timedOut, ctxErr, r.err
			}
			if err := want(r.m, initproc.OpExited); err != nil {
				return nil, timedOut, ctxErr, err
			}
			return r.m, timedOut, ctxErr, nil
		case <-timer.C:
			timedOut = true
			kill()
		case <-done:
			ctxErr = ctx.Err()
			done = nil
			kill()
		case <-grace:
			return nil, timedOut, ctxErr, errors.New("the sandbox did not kill the command within 10s")
		}
	}
}

// stdin returns the read end the command gets as its stdin.
func (s *localSandbox) stdin(r io.Reader) (*os.File, error) {
	if r == nil {
		return os.Open(os.DevNull)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		io.Copy(pw, r)
		pw.Close()
	}()
	return pr, nil
}

// defaultEnv is the environment every command starts from.
func defaultEnv() []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin",
		"HOME=/tmp",
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
	}
}

// capture keeps the first limit bytes of a stream, drains the rest and
// records that it did.
type capture struct {
	limit     int64
	tee       io.Writer
	buf       bytes.Buffer
	truncated bool
}

func (c *capture) drain(r *os.File) {
	defer r.Close()
	b := make([]byte, 64<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			chunk := b[:n]
			room := c.limit - int64(c.buf.Len())
			if room >= int64(n) {
				c.buf.Write(chunk)
			} else {
				if room > 0 {
					c.buf.Write(chunk[:room])
				}
				c.truncated = true
			}
			if c.tee != nil {
				if _, err := c.tee.Write(chunk); err != nil {
					c.tee = nil // keep draining; the caller stopped reading
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Listen opens a TCP listener on 127.0.0.1:port inside the sandbox's
// network namespace: the socket is created on a thread switched into that
// namespace, which keeps it after the thread switches back.
func (s *localSandbox) Listen(ctx context.Context, port int) (net.Listener, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("sandbox: local: listen: port %d out of range", port)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, sandbox.ErrClosed
	}
	type out struct {
		l   net.Listener
		err error
	}
	ch := make(chan out, 1)
	nsPath := "/proc/" + strconv.Itoa(s.holderPid) + "/ns/net"
	go func() {
		// The thread is unlocked only when it is back in the host's
		// namespace; otherwise it ends with this goroutine.
		runtime.LockOSThread()
		l, err, restored := listenIn(nsPath, port)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- out{l, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("sandbox: local: listen: %w", r.err)
	}
	s.listeners = append(s.listeners, r.l)
	return r.l, nil
}

func listenIn(nsPath string, port int) (l net.Listener, err error, restored bool) {
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err, true
	}
	defer host.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, err, true
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("enter network namespace: %w", err), true
	}
	l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if rerr := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); rerr != nil {
		if l != nil {
			l.Close()
		}
		return nil, fmt.Errorf("return to host network namespace: %w", rerr), false
	}
	return l, err, true
}

// killHolder kills the holder, and with it (pid 1 of the namespace) every
// process in the sandbox, and reaps it.
func (s *localSandbox) killHolder() {
	s.holderMu.Lock()
	defer s.holderMu.Unlock()
	if s.pidfd < 0 {
		return
	}
	killAndWait(s.pidfd)
	s.pidfd = -1
}

// Close kills every process, closes the listeners, unmounts the workspace,
// removes the sandbox's folder and the cgroups. Safe to call more than once.
func (s *localSandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ls := s.listeners
	s.listeners = nil
	s.mu.Unlock()
	s.met.Closed("local")
	var errs []error
	for _, l := range ls {
		l.Close()
	}
	// The holder dies while the host's workspace mount and folder go: a
	// running Exec sees the socket end and returns first.
	killed := make(chan struct{})
	go func() {
		s.killHolder()
		close(killed)
	}()
	s.execMu.Lock()
	defer s.execMu.Unlock()
	if s.ctl != nil {
		s.ctl.Close()
	}
	// The workspace mount goes before the cgroups: its pages are charged to
	// them.
	if err := s.home.removeFolder(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("sandbox: local: %w", err))
	}
	<-killed // a cgroup cannot be removed while a process is in it
	if err := s.cg.remove(); err != nil {
		errs = append(errs, err)
	}
	if s.refill != nil {
		s.refill()
	}
	return errors.Join(errs...)
}
