//go:build linux

package initproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Env marks a process started by the backend as its spawner or a
// sandbox's init (the holder): legorl-sandbox-init, or the host's own binary
// (/proc/self/exe), so every binary that links this package can act as one.
const Env = "LEGORL_SANDBOX_INIT"

// CtlFD is the holder's end of the control socket; the O_PATH descriptors of
// the workspace and extra mounts follow it.
const CtlFD = 3

func init() { Init() }

// Init turns the process into a sandbox init when the local backend started
// it as one, and never returns then; otherwise it returns at once. The
// package calls it from its own init function, so linking the package is
// enough; calling it first thing in main as well is harmless and documents
// the re-exec.
func Init() {
	mode := os.Getenv(Env)
	if mode != ModeHolder && mode != ModeSpawner {
		return
	}
	// Namespaces, capabilities and no_new_privs are per thread: the holder
	// does all its privileged work, and forks every command, on this one;
	// the spawner starts every holder from it.
	runtime.LockOSThread()
	os.Unsetenv(Env)
	main := holderMain
	if mode == ModeSpawner {
		main = spawnerMain
	}
	if err := main(); err != nil {
		fmt.Fprintf(os.Stderr, "legorl sandbox init: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// holderMain is pid 1 of the sandbox: it builds the root file system from
// the host's (read-only system folders, the workspace, private /tmp, /proc
// and /dev), drops privileges, and then runs one command at a time for the
// host, killing whatever the command left behind when it ends.
func holderMain() error {
	// No descriptor the holder inherited reaches a command: not its
	// control socket to the host (a command could answer for the holder
	// on it), nor any the host itself inherited.
	if err := cloexecFrom(CtlFD); err != nil {
		return err
	}
	// Phase 1, before the host has asked for anything (a prestarted
	// holder waits here): build everything that does not depend on the
	// spec, and drop what privileges the rest of the setup does not need.
	filter, err := prepare()
	if err != nil {
		Send(CtlFD, &Message{Op: "prepared", Error: err.Error()})
		return err
	}
	if err := Send(CtlFD, &Message{Op: "prepared"}); err != nil {
		return err
	}
	// Phase 2: the spec's workspace, mounts and limits; then seal.
	m, fds, err := Recv(CtlFD)
	if err != nil {
		return err
	}
	if m.Op != "setup" || m.Setup == nil || len(fds) != 1+len(m.Setup.Mounts) {
		CloseAll(fds)
		return fmt.Errorf("protocol: want setup, got %q", m.Op)
	}
	cfg := m.Setup
	err = setupSandbox(cfg, fds, filter)
	CloseAll(fds)
	if err != nil {
		Send(CtlFD, &Message{Op: "ready", Error: err.Error()})
		return err
	}
	if err := Send(CtlFD, &Message{Op: "ready"}); err != nil {
		return err
	}
	return serve(cfg)
}

// systemPaths are the host folders shown read-only inside (symlinks, as on
// merged-/usr systems, are recreated as symlinks).
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// maskedFiles hide host secrets that /etc would otherwise show (their
// permissions already deny the sandbox's unmapped uid; this is a second wall).
var maskedFiles = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers"}

var devices = []string{"null", "zero", "full", "random", "urandom"}

const newRoot = "/tmp" // where the new root is assembled, in the holder's own mount namespace

// sandboxHostname is the host name inside every sandbox.
const sandboxHostname = "sandbox"

// prepare is phase 1: it builds the root file system (prepareRoot), drops
// every privilege that the commands must not have and that the rest of the
// setup does not need (dropPrivileges), and assembles the seccomp filter,
// which setupSandbox installs last.
func prepare() ([]unix.SockFilter, error) {
	if err := prepareRoot(); err != nil {
		return nil, err
	}
	if err := dropPrivileges(); err != nil {
		return nil, err
	}
	return seccompFilter()
}

// prepareRoot builds the sandbox's root file system, enters it and brings
// up lo. The root stays writable (for the workspace's mount point) until
// setupSandbox seals it.
func prepareRoot() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Sethostname([]byte(sandboxHostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	r := func(p string) string { return filepath.Join(newRoot, p) }
	for _, p := range systemPaths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			dest, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(dest, r(p)); err != nil {
				return err
			}
			continue
		}
		if !fi.IsDir() {
			continue
		}
		if err := bindDir(p, r(p), true); err != nil {
			return err
		}
	}
	if err := os.WriteFile(r("/.empty"), nil, 0o444); err != nil {
		return err
	}
	for _, p := range maskedFiles {
		if _, err := os.Lstat(r(p)); err != nil {
			continue
		}
		if err := unix.Mount(r("/.empty"), r(p), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask %s: %w", p, err)
		}
	}
	// /proc of the sandbox's own pid namespace.
	if err := os.Mkdir(r("/proc"), 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", r("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// A minimal /dev: a few host device nodes, no tty, no disks.
	if err := os.Mkdir(r("/dev"), 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", r("/dev"), "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		t := r("/dev/" + d)
		if err := os.WriteFile(t, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+d, t, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", d, err)
		}
	}
	for name, dest := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(dest, r("/dev/"+name)); err != nil {
			return err
		}
	}
	tmpOpts := "mode=1777,size=1m" // the spec's size comes in setupSandbox
	if err := os.Mkdir(r("/dev/shm"), 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", r("/dev/shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOpts); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	if err := remountRO(r("/dev"), unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
		return err
	}
	if err := os.Mkdir(r("/tmp"), 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", r("/tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOpts); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	// Enter the new root and drop the old one.
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	return loopbackUp()
}

// setupSandbox adds what the spec asks for: the workspace and extra mounts
// (fds: detached open_tree clones made by the host, since the holder's
// unprivileged uid could not walk the host paths to them and a bind mount
// cannot cross mount namespaces) and the size of /tmp; then it makes the
// root read-only, sets the process limit and installs the seccomp filter
// (when cfg.Seccomp), which refuses the mount calls above.
func setupSandbox(cfg *SetupConfig, fds []int, filter []unix.SockFilter) error {
	if err := attach(fds[0], cfg.WorkspaceDir, false); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	for i, mnt := range cfg.Mounts {
		if err := attach(fds[1+i], mnt.Target, mnt.ReadOnly); err != nil {
			return fmt.Errorf("mount %s: %w", mnt.Target, err)
		}
	}
	size := "size=" + strconv.FormatInt(cfg.TmpBytes, 10)
	for _, p := range []string{"/tmp", "/dev/shm"} {
		if err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, size); err != nil {
			return fmt.Errorf("size of %s: %w", p, err)
		}
	}
	if err := remountRO("/", unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	if cfg.NprocLimit > 0 {
		// Counted per user and user namespace: this sandbox's tasks only.
		n := uint64(cfg.NprocLimit)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("rlimit nproc: %w", err)
		}
	}
	if cfg.Seccomp {
		return installSeccomp(filter)
	}
	return nil
}

// bindDir shows the folder (or file) src at dst, read-only when ro.
func bindDir(src, dst string, ro bool) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dst, err)
	}
	return restrict(dst, ro)
}

// attach moves the detached mount fd to dst (made first: a folder, or an
// empty file when the mount is a file), read-only when ro.
func attach(fd int, dst string, ro bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, nil, 0o644); err != nil {
			return err
		}
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", dst, err)
	}
	return restrict(dst, ro)
}

// restrict remounts the mount at dst nosuid and nodev, and read-only when
// ro: the last step of bindDir and attach.
func restrict(dst string, ro bool) error {
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if ro {
		return remountRO(dst, flags)
	}
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dst, err)
	}
	return nil
}

func remountRO(dst string, flags uintptr) error {
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// cloexecFrom marks every descriptor from fd up close-on-exec.
func cloexecFrom(fd int) error {
	if err := unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close-on-exec from descriptor %d: %w", fd, err)
	}
	return nil
}

// loopbackUp brings up lo, the only interface of the fresh network namespace.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// dropPrivileges leaves the holder able to mount and to fork commands into
// its namespaces (its effective capabilities stay), but makes sure the
// commands start with no capabilities at all (empty bounding, inheritable
// and ambient sets), cannot gain any (no_new_privs), and cannot be
// core-dumped or ptraced into the holder (not dumpable). All of it is
// per thread: this is the thread that forks every command. It runs while
// the holder is prestarted, before the host has sent anything; the
// process limit and the seccomp filter come in setupSandbox.
func dropPrivileges() error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("rlimit core: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("not dumpable: %w", err)
	}
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(last)))
	if err != nil {
		return fmt.Errorf("cap_last_cap: %w", err)
	}
	for c := 0; c <= n; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// serve runs the host's commands one at a time until the host goes away.
// Everything happens on this one thread, waiting in poll(2) on the control
// socket and the running command's pidfd: no goroutine hands a message or
// an exit to another, so an exec costs the holder no thread switches.
func serve(cfg *SetupConfig) error {
	for {
		m, fds, err := Recv(CtlFD)
		if errors.Is(err, ErrPeerClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		switch m.Op {
		case "kill":
			CloseAll(fds) // nothing is running
		case "exec":
			if len(fds) != 3 {
				CloseAll(fds)
				return fmt.Errorf("protocol: exec with %d descriptors, want 3", len(fds))
			}
			pid, pidfd, notFound, err := startCommand(m, fds)
			CloseAll(fds)
			if err != nil {
				if err := Send(CtlFD, &Message{Op: "exited", Error: err.Error(), NotFound: notFound}); err != nil {
					return err
				}
				continue
			}
			if hostGone := await(pidfd); hostGone {
				unix.Kill(-1, unix.SIGKILL)
				return nil
			}
			exit := reap(pid)
			exit.TmpFull = tmpFull()
			if err := Send(CtlFD, exit); err != nil {
				return err
			}
		default:
			CloseAll(fds)
			return fmt.Errorf("protocol: unknown op %q", m.Op)
		}
	}
}

// await waits for the command of pidfd to exit, meanwhile killing every
// process of the sandbox when the host asks; it says whether the host went
// away instead (or broke the protocol). It closes pidfd.
func await(pidfd int) (hostGone bool) {
	defer unix.Close(pidfd)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}, {Fd: CtlFD, Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return true
		}
		if fds[0].Revents != 0 {
			return false
		}
		if fds[1].Revents != 0 {
			k, kfds, err := Recv(CtlFD)
			CloseAll(kfds)
			if err != nil {
				return true
			}
			if k.Op == "kill" {
				unix.Kill(-1, unix.SIGKILL)
			}
		}
	}
}

// startCommand forks the command in a new session (no controlling
// terminal); it returns its pid and a pidfd for it.
func startCommand(m *Message, fds []int) (pid, pidfd int, notFound bool, err error) {
	if len(m.Args) == 0 {
		return 0, -1, false, errors.New("no command")
	}
	path, err := lookPath(m.Args[0], m.Env)
	if err != nil {
		return 0, -1, true, err
	}
	pidfd = -1
	attr := &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   m.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys:   &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd},
	}
	pid, err = syscall.ForkExec(path, m.Args, attr)
	if err != nil {
		return 0, -1, errors.Is(err, unix.ENOENT), fmt.Errorf("%s: %w", m.Args[0], err)
	}
	return pid, pidfd, false, nil
}

// lookPath finds a program in the PATH of env, as execvp would.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in $PATH", file)
}

// reap waits for the command; once it ends, it kills every other process
// in the sandbox (background children, setsid'd daemons) and reaps them.
func reap(pid int) *Message {
	out := &Message{Op: "exited"}
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			out.Error = "wait: " + err.Error()
			return out
		}
		if p == pid {
			out.Status = uint32(ws)
			break
		}
	}
	// kill(-1) from pid 1 reaches every other process of the namespace.
	for {
		unix.Kill(-1, unix.SIGKILL)
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: nothing left
			return out
		}
		if p == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// tmpFull reports whether the private /tmp has no space left.
func tmpFull() bool {
	var st unix.Statfs_t
	if err := unix.Statfs("/tmp", &st); err != nil {
		return false
	}
	return st.Bavail == 0
}
