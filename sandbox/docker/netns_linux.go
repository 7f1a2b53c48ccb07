//go:build linux

package docker

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// listenInNetns opens a TCP listener on 127.0.0.1:port inside the network
// namespace at nsPath. It switches one locked OS thread into that
// namespace, creates the socket there and switches back: a socket keeps
// the namespace it was made in, so the host process serves on it while
// only programs inside the namespace can connect. If the thread cannot
// switch back it stays locked, and the runtime discards it.
func listenInNetns(ctx context.Context, nsPath string, port int) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		l, restored, err := listenOnThread(ctx, nsPath, port)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

func listenOnThread(ctx context.Context, nsPath string, port int) (l net.Listener, restored bool, err error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("docker: listen: own netns: %w", err)
	}
	defer self.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, true, fmt.Errorf("docker: listen: sandbox netns: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("docker: listen: enter sandbox netns: %w", err)
	}
	var lc net.ListenConfig
	l, err = lc.Listen(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		err = fmt.Errorf("docker: listen inside sandbox: %w", err)
	}
	if serr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); serr != nil {
		if l != nil {
			l.Close()
		}
		return nil, false, fmt.Errorf("docker: listen: return to own netns: %w", serr)
	}
	return l, true, err
}

// waitPid waits until host process pid exits (true) or stop closes
// (false). A pid that is already gone counts as exited; without pidfd
// support it returns false and the caller relies on the output stream.
func waitPid(pid int, stop <-chan struct{}) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return true
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 100)
		if n > 0 {
			return true
		}
		if err != nil && err != unix.EINTR {
			return false
		}
		select {
		case <-stop:
			return false
		default:
		}
	}
}
