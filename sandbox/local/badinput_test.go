//go:build linux

package local_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/initproc"
)

// TestBadRequestToHolder: a request the sandbox's init cannot read
// (malformed, truncated, over the size limit) or does not expect (an
// unknown op, a spawner's op), arriving while a command runs: the init
// answers with a fault naming the problem and exits, killing the command;
// the host's Exec returns at once a sandbox crash whose detail is that one
// line, and the sandbox is dead (a rollout ending so is masked). Nothing
// waits for the command's 60 s.
func TestBadRequestToHolder(t *testing.T) {
	exec := initproc.Encode(&initproc.Message{Op: initproc.OpExec, Args: []string{"true"}})
	tests := []struct {
		name   string
		packet []byte
		want   string
	}{
		{"malformed", []byte{0xff, 0xff}, "sandbox init failed: receive: malformed message"},
		{"truncated", exec[:len(exec)-3], "sandbox init failed: receive: malformed message"},
		{"unknown op", initproc.Encode(&initproc.Message{Op: 200}), "sandbox init failed: protocol: unknown op 200 while a command runs"},
		{"a spawner's op", initproc.Encode(&initproc.Message{Op: initproc.OpSpawn, UID: 1 << 30}), "sandbox init failed: protocol: spawn while a command runs"},
		{"over the limit", make([]byte, initproc.MaxMsg+1), fmt.Sprintf("sandbox init failed: receive: a message of %d bytes, over the limit of %d", initproc.MaxMsg+1, initproc.MaxMsg)},
	}
	b := backend(t, local.Options{NoPrestart: true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := create(t, b)
			type out struct {
				res sandbox.Result
				err error
			}
			done := make(chan out, 1)
			start := time.Now()
			go func() {
				res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sleep", "60"}, Timeout: 2 * time.Minute})
				done <- out{res, err}
			}()
			// The command runs when the sandbox has a process besides its init.
			uid := local.HostUID(sb)
			for len(processesOf(uid)) < 2 {
				if time.Since(start) > 30*time.Second {
					t.Fatal("the command did not start within 30s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			fd := local.ControlFD(sb)
			if len(tt.packet) > 200<<10 {
				// Past the default per-packet bound (wmem_max); root may.
				if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4*initproc.MaxMsg); err != nil {
					t.Fatalf("SO_SNDBUFFORCE: %v", err)
				}
			}
			if err := unix.Sendmsg(fd, tt.packet, nil, nil, 0); err != nil {
				t.Fatal(err)
			}
			var r out
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Exec did not return within 20s of the bad request")
			}
			if r.err != nil || r.res.Outcome != sandbox.OutcomeSandboxCrash || r.res.Detail != tt.want {
				t.Fatalf("Exec: %v, outcome %s, detail %q; want a sandbox crash with detail %q", r.err, r.res.Outcome, r.res.Detail, tt.want)
			}
			if pids := processesOf(uid); len(pids) != 0 {
				t.Fatalf("processes %v of the sandbox still run", pids)
			}
			res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"true"}})
			if err != nil || res.Outcome != sandbox.OutcomeSandboxCrash || strings.Contains(res.Detail, "\n") {
				t.Fatalf("Exec after: %v, outcome %s, detail %q; want a one-line sandbox crash", err, res.Outcome, res.Detail)
			}
		})
	}
}

// TestBadRequestIdle: the same with nothing running: the init answers the
// request with a fault and exits (its socket ends).
func TestBadRequestIdle(t *testing.T) {
	tests := []struct {
		name   string
		packet []byte
		want   string
	}{
		{"malformed", []byte{0x80}, "receive: malformed message"},
		{"unknown op", initproc.Encode(&initproc.Message{Op: 99}), "protocol: unknown op 99, want exec or kill"},
		{"a reply", initproc.Encode(&initproc.Message{Op: initproc.OpExited}), "protocol: exited, want exec or kill"},
		{"exec without descriptors", initproc.Encode(&initproc.Message{Op: initproc.OpExec, Args: []string{"true"}}), "protocol: exec with 0 descriptors, want 3"},
	}
	b := backend(t, local.Options{NoPrestart: true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := local.ControlFD(create(t, b))
			if err := unix.Sendmsg(fd, tt.packet, nil, nil, 0); err != nil {
				t.Fatal(err)
			}
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10}); err != nil {
				t.Fatal(err)
			}
			m, fds, err := initproc.Recv(fd)
			initproc.CloseAll(fds)
			if err != nil || m.Op != initproc.OpFault || m.Error != tt.want {
				t.Fatalf("reply %+v, %v; want a fault %q", m, err, tt.want)
			}
			if _, _, err := initproc.Recv(fd); err != initproc.ErrPeerClosed {
				t.Fatalf("after the fault: %v, want the init gone (peer closed)", err)
			}
		})
	}
}

// create makes a sandbox of b that closes with the test.
func create(t *testing.T, b *local.Backend) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}
