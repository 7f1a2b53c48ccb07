//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local/initproc"
)

// The spawner is a small helper process (the C init, started in its
// spawner mode) that starts every holder of a backend. Starting a process in a new user
// namespace cannot use vfork, so the parent's page tables are copied: from
// a host process holding gigabytes (a model, a proxy) that costs many
// milliseconds per sandbox, from the spawner almost nothing. The host starts
// the spawner itself with vfork (no new namespaces).

// spawner is the host's end of the helper.
type spawner struct {
	fd   int // SOCK_SEQPACKET to the spawner
	file *os.File
	done chan struct{} // closed when the spawner exits
}

// startSpawner starts the init at path as the spawner, from a goroutine
// locked to its thread for the spawner's whole life: the parent-death
// signal fires when the thread that started a child exits, not the
// process. The spawner must greet the host with initproc.Version within
// helloTimeout.
func startSpawner(path string) (*spawner, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sp := &spawner{fd: pair[0], file: os.NewFile(uintptr(pair[0]), "sandbox-spawner"), done: make(chan struct{})}
	child := os.NewFile(uintptr(pair[1]), "sandbox-spawner-child")
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cmd := &exec.Cmd{
			Path:        path,
			Args:        []string{"legorl-sandbox-spawner"},
			Env:         []string{initproc.Env + "=" + initproc.ModeSpawner},
			ExtraFiles:  []*os.File{child},
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true},
		}
		err := cmd.Start()
		child.Close()
		started <- err
		if err != nil {
			runtime.UnlockOSThread()
			close(sp.done)
			return
		}
		cmd.Wait() // the thread stays until the spawner is gone
		close(sp.done)
	}()
	if err := <-started; err != nil {
		sp.file.Close()
		return nil, fmt.Errorf("start the sandbox init %s: %w", path, err)
	}
	if err := sp.hello(); err != nil {
		sp.close()
		return nil, fmt.Errorf("sandbox init %s: %w (make build builds the one of this source)", path, err)
	}
	return sp, nil
}

// helloTimeout bounds the wait for a new spawner's greeting.
const helloTimeout = 10 * time.Second

// errInitVersion: the init binary was built from other init source.
var errInitVersion = errors.New("init of another version")

// hello waits for the spawner's greeting and checks its version.
func (sp *spawner) hello() error {
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(sp.fd), Events: unix.POLLIN}}, int(helloTimeout.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: no greeting within %s", errInitVersion, helloTimeout)
		}
		break
	}
	m, fds, err := recv(sp.fd)
	closeAll(fds)
	if err != nil {
		return err
	}
	if err := want(m, initproc.OpHello); err != nil {
		return err
	}
	if v := initproc.Version(); m.Version != v {
		return fmt.Errorf("%w: version %q, want %q", errInitVersion, m.Version, v)
	}
	return nil
}

// spawn starts a holder mapped to uid, handing it files (the control
// socket, then the detached mounts). It returns the holder's pid and a
// pidfd for it. Calls must not overlap.
func (sp *spawner) spawn(uid int, files []*os.File) (pid, pidfd int, err error) {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if err := send(sp.fd, &message{Op: initproc.OpSpawn, UID: uid}, fds...); err != nil {
		return 0, -1, err
	}
	m, got, err := recv(sp.fd)
	if err != nil {
		return 0, -1, err
	}
	if err := want(m, initproc.OpSpawned); err != nil {
		closeAll(got)
		return 0, -1, err
	}
	if m.Error != "" || len(got) != 1 {
		closeAll(got)
		return 0, -1, fmt.Errorf("spawner: %s", m.Error)
	}
	return m.Pid, got[0], nil
}

func (sp *spawner) close() {
	sp.file.Close()
	<-sp.done
}

// spawner returns the backend's spawner, starting it at first use. The
// backend's lock is held until spawnerDone.
func (b *Backend) spawner() (*spawner, error) {
	b.mu.Lock()
	select {
	case <-b.stop:
		b.mu.Unlock()
		return nil, sandbox.ErrClosed
	default:
	}
	if b.sp == nil {
		path, err := FindInit(b.opts.InitPath)
		if err == nil {
			b.sp, err = startSpawner(path)
		}
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
	}
	return b.sp, nil
}

// FindInit returns the path of the init binary the backend starts: the
// one Options.InitPath names (explicit), else legorl-sandbox-init beside
// the running executable, where make build puts it beside bin/legorl.
// There is no other: without it the backend starts no sandbox, and the
// error says to run make build.
func FindInit(explicit string) (string, error) {
	p := explicit
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("sandbox: local: %w: %v", ErrNoInit, err)
		}
		p = filepath.Join(filepath.Dir(exe), initName)
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("sandbox: local: %w: %s is not an executable file (make build builds bin/%s beside bin/legorl)", ErrNoInit, p, initName)
	}
	return p, nil
}

// spawnerDone releases the spawner after a spawn; failed says the spawner
// broke, so the next Create starts a new one.
func (b *Backend) spawnerDone(failed bool) {
	if failed && b.sp != nil {
		b.sp.close()
		b.sp = nil
	}
	b.mu.Unlock()
}

// Close ends the backend's helper process and prestarted inits, and with
// them every sandbox of the backend still open, and removes the prestarted
// inits' folders and cgroups, and the folder that holds the sandboxes'
// folders (when the last open sandbox closes, if any is). Create fails with
// sandbox.ErrClosed afterwards.
func (b *Backend) Close() error {
	b.stopOnce.Do(func() { close(b.stop) })
	// The spawner goes first: its end kills every holder (their
	// parent-death signal), so a prestart waiting on one returns.
	b.mu.Lock()
	if b.sp != nil {
		b.sp.close()
		b.sp = nil
	}
	b.mu.Unlock()
	b.prestarting.Wait()
	var errs []error
	for {
		select {
		case h := <-b.pool:
			errs = append(errs, h.close())
			continue
		default:
		}
		break
	}
	if err := b.home.close(); err != nil {
		errs = append(errs, fmt.Errorf("sandbox: local: %w", err))
	}
	return errors.Join(errs...)
}

// holderProc is a started holder, not yet given a spec, with what the host
// made for it: its folder, the workspace tmpfs mounted in it at the default
// size, and its cgroups with the default limits, the holder in them.
type holderProc struct {
	uid      int
	pid      int
	pidfd    int      // -1 until spawned and once reaped
	ctl      *os.File // host end of the control socket
	ctlFD    int
	home     *home
	dir      string // host folder in home, named for collectOrphans
	ws       string // dir/workspace: a tmpfs of disk bytes
	disk     int64
	cg       *cgroup // nil with Options.NoCgroups
	prepared bool    // its root is built
}

// startHolder makes a holder's folder and workspace mount, starts the
// holder through the spawner and, while the holder builds its root (see
// waitPrepared), makes its cgroups, all with spec.WithDefaults()'s limits.
// On error nothing is left.
func (b *Backend) startHolder() (_ *holderProc, err error) {
	uid, err := randomUID()
	if err != nil {
		return nil, err
	}
	// The workspace is a tmpfs of Limits.DiskBytes on the host, filled in
	// Create and shown inside by a bind mount.
	lim := sandbox.Spec{}.WithDefaults().Limits
	dir, err := b.home.newFolder(lim.DiskBytes, uid)
	if err != nil {
		return nil, err
	}
	h := &holderProc{uid: uid, pidfd: -1, home: b.home, dir: dir, ws: filepath.Join(dir, "workspace"), disk: lim.DiskBytes}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	h.ctl, h.ctlFD = os.NewFile(uintptr(pair[0]), "sandbox-control"), pair[0]
	child := os.NewFile(uintptr(pair[1]), "sandbox-control-child")
	defer child.Close()
	sp, err := b.spawner()
	if err != nil {
		return nil, err
	}
	h.pid, h.pidfd, err = sp.spawn(uid, []*os.File{child})
	b.spawnerDone(err != nil)
	if err != nil {
		h.pidfd = -1
		return nil, err
	}
	if !b.opts.NoCgroups {
		h.cg, err = newCgroup(filepath.Base(dir), cgroupLimits{lim.MemoryBytes, lim.Pids, lim.CPUs})
		if err != nil {
			return nil, err
		}
		if err := h.cg.add(h.pid); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// waitPrepared waits for the holder's root to be built.
func (h *holderProc) waitPrepared() error {
	m, fds, err := recv(h.ctlFD)
	closeAll(fds)
	if err != nil {
		return err
	}
	if err := want(m, initproc.OpPrepared); err != nil {
		return err
	}
	if m.Error != "" {
		return fmt.Errorf("holder: %s", m.Error)
	}
	h.prepared = true
	return nil
}

// close kills a holder that no sandbox owns, waits for it to be gone, and
// removes its workspace mount, folder and cgroups.
func (h *holderProc) close() error {
	if h.pidfd >= 0 {
		killAndWait(h.pidfd)
		h.pidfd = -1
	}
	if h.ctl != nil {
		h.ctl.Close()
	}
	var errs []error
	if err := h.home.removeFolder(h.dir); err != nil {
		errs = append(errs, fmt.Errorf("sandbox: local: %w", err))
	}
	if err := h.cg.remove(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killAndWait kills the process of pidfd and, with it when it is pid 1 of
// a namespace, every process in the namespace; it returns once it has
// exited, and closes pidfd.
func killAndWait(pidfd int) {
	unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	// The pidfd turns readable when the process has exited, which for pid
	// 1 of a namespace is after every other process in it.
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, -1)
		if err != unix.EINTR {
			break
		}
	}
	unix.Close(pidfd)
}

// takeHolder returns a prestarted holder when one is ready; else, when the
// prestart goroutine is starting one that no other Create waits for, it
// waits for that one (it is partly made; a second init started beside it
// would slow both); else it starts one itself.
//
// With a prestarted holder comes refill, which asks the prestart goroutine
// for its replacement (see refillOnce). Starting an init costs more CPU
// than a short sandbox's whole life: started at once, in Create, it ran
// beside the caller's Exec and Close on the same cores. So when the pool
// was full, the replacement waits for the sandbox's Close, which runs
// refill, or for refillDelay if the sandbox lives longer: rollouts that
// come apart find a ready init and no init being started. When the pool
// was not full, sandboxes come faster than inits are made, and the
// replacement is asked for at once.
func (b *Backend) takeHolder(ctx context.Context) (h *holderProc, refill func(), err error) {
	if b.opts.Prestart > 0 {
		b.prestartOnce.Do(func() {
			// Under the lock, so that Close either sees the goroutine
			// counted or the goroutine is never started.
			b.mu.Lock()
			defer b.mu.Unlock()
			select {
			case <-b.stop:
			default:
				b.prestarting.Add(1)
				go b.prestart()
			}
		})
		if h := b.pooled(); h != nil {
			return h, b.refillOnce(), nil
		}
		// One Create waits for the holder being started; others start
		// their own.
		b.refillMu.Lock()
		starting := b.starting
		if b.claimed {
			starting = nil
		} else if starting != nil {
			b.claimed = true
		}
		b.refillMu.Unlock()
		if starting != nil {
			select {
			case <-starting:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-b.stop:
				return nil, nil, sandbox.ErrClosed
			}
			if h := b.pooled(); h != nil {
				return h, b.refillOnce(), nil
			}
		}
	}
	h, err = b.startHolder()
	return h, nil, err
}

// pooled takes a prestarted holder from the pool, nil when it is empty.
func (b *Backend) pooled() *holderProc {
	select {
	case h := <-b.pool:
		return h
	default:
		return nil
	}
}

// refillDelay bounds how long a sandbox made from a prestarted holder keeps
// its replacement from being started: a sandbox that lives longer (most
// rollouts) has it started while it runs.
const refillDelay = 100 * time.Millisecond

// refillOnce returns a func that asks the prestart goroutine for one more
// holder, once: at once when the pool, before the holder was taken from
// it, was not full; else when the func is called or refillDelay has
// passed, whichever is first.
func (b *Backend) refillOnce() func() {
	var once sync.Once
	ask := func() {
		once.Do(func() {
			select {
			case b.refill <- struct{}{}:
			default: // cannot happen: one token per holder taken
			}
		})
	}
	if len(b.pool)+1 < b.opts.Prestart {
		ask()
		return ask
	}
	t := time.AfterFunc(refillDelay, ask)
	return func() {
		t.Stop()
		ask()
	}
}

// prestart makes a holder for each refill token, keeping up to
// Options.Prestart prepared holders ready until Close. While it starts one,
// b.starting is a channel closed when that attempt ends.
func (b *Backend) prestart() {
	defer b.prestarting.Done()
	for {
		select {
		case <-b.refill:
		case <-b.stop:
			return
		}
		for {
			done := make(chan struct{})
			b.refillMu.Lock()
			b.starting, b.claimed = done, false
			b.refillMu.Unlock()
			h, err := b.startHolder()
			if err == nil {
				if err = h.waitPrepared(); err != nil {
					h.close()
				}
			}
			if err == nil {
				b.pool <- h // never blocks: a slot per token
			}
			b.refillMu.Lock()
			b.starting = nil
			b.refillMu.Unlock()
			close(done)
			if err == nil {
				break
			}
			select {
			case <-b.stop:
				return
			case <-time.After(100 * time.Millisecond): // a broken machine: do not spin
			}
		}
	}
}
