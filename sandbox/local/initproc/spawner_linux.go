//go:build linux

package initproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Modes: the value of Env in a process the backend starts.
const (
	ModeHolder  = "holder"
	ModeSpawner = "spawner"
)

// spawnerMain serves spawn requests until the host goes away. It runs on
// the thread locked in Init, so the holders' parent-death signal stays armed.
func spawnerMain() error {
	// The kernel reaps the holders as they die (SIGCHLD ignored): a holder
	// is gone, not a zombie waiting for this process to be scheduled, once
	// the host sees it exit. Ignored signals stay ignored across exec, but
	// the Go runtime of the holder installs its own SIGCHLD handler, and so
	// it reaps its commands itself.
	signal.Ignore(syscall.SIGCHLD)
	// The host's own descriptors stay out of the holders (each holder
	// gets only the files of its spawn request).
	if err := cloexecFrom(CtlFD + 1); err != nil {
		return err
	}
	if err := Send(CtlFD, &Message{Op: "hello", Version: Version}); err != nil {
		return err
	}
	for {
		m, fds, err := Recv(CtlFD)
		if errors.Is(err, ErrPeerClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Op != "spawn" || len(fds) == 0 {
			CloseAll(fds)
			return fmt.Errorf("protocol: want spawn, got %q", m.Op)
		}
		pid, err := spawnHolder(m.UID, fds)
		if err != nil {
			if err := Send(CtlFD, &Message{Op: "spawned", Error: err.Error()}); err != nil {
				return err
			}
			continue
		}
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			unix.Kill(pid, unix.SIGKILL)
			if err := Send(CtlFD, &Message{Op: "spawned", Error: "pidfd: " + err.Error()}); err != nil {
				return err
			}
			continue
		}
		err = Send(CtlFD, &Message{Op: "spawned", Pid: pid}, pidfd)
		unix.Close(pidfd)
		if err != nil {
			return err
		}
	}
}

// spawnHolder starts a holder in new namespaces, its root mapped to uid.
func spawnHolder(uid int, fds []int) (int, error) {
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "sandbox-fd")
	}
	defer closeFiles(files)
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"legorl-sandbox-init"},
		Env:        []string{Env + "=" + ModeHolder, "GOMAXPROCS=1"},
		ExtraFiles: files,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
				unix.CLONE_NEWNET | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappingsEnableSetgroups: false,
			// Become the namespace's root, host uid uid, before exec.
			Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
			Setsid:     true,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	cmd.Process.Release() // the kernel reaps it (see spawnerMain)
	return pid, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
