//go:build linux

package initproc

import (
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The host and the sandbox's init (the holder) talk over a SOCK_SEQPACKET
// socket pair: one JSON message per packet, with file descriptors passed
// alongside (SCM_RIGHTS) where a message needs them.

const maxMsg = 1 << 20 // one message, arguments and environment included

// Message is every message of the protocol; Op says which fields matter.
type Message struct {
	Op string `json:"op"`

	// op "prepared" (holder -> host): the root is built; Error set when not.
	// op "setup" (host -> holder; fds: the workspace, then each mount, as
	// detached mounts)
	Setup *SetupConfig `json:"setup,omitempty"`

	// op "exec" (host -> holder; fds: stdin, stdout, stderr)
	Args []string `json:"args,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	Env  []string `json:"env,omitempty"`

	// op "spawn" (host -> spawner; fds: the holder's control socket, then
	// the detached mounts) and "spawned" (spawner -> host; fds: a pidfd).
	UID int `json:"uid,omitempty"`
	Pid int `json:"pid,omitempty"`

	// op "hello" (spawner -> host, first): the init's version.
	Version string `json:"version,omitempty"`

	// op "kill" (host -> holder): kill every process of the running exec.

	// op "ready" (holder -> host): answer to setup; Error set when it failed.
	// op "exited" (holder -> host): the exec ended.
	Error    string `json:"error,omitempty"`
	Status   uint32 `json:"status,omitempty"` // wait status of the command
	NotFound bool   `json:"not_found,omitempty"`
	TmpFull  bool   `json:"tmp_full,omitempty"`
}

// SetupConfig is what the holder needs to build the sandbox.
type SetupConfig struct {
	WorkspaceDir string       `json:"workspace_dir"`
	Mounts       []MountEntry `json:"mounts,omitempty"`
	TmpBytes     int64        `json:"tmp_bytes"`
	NprocLimit   int          `json:"nproc_limit"` // RLIMIT_NPROC; 0: none
	Seccomp      bool         `json:"seccomp"`
}

// MountEntry is one of Spec.Mounts, its source passed as a descriptor.
type MountEntry struct {
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only"`
}

// Errors of Send and Recv.
var (
	ErrPeerClosed = errors.New("peer closed the control socket")
	ErrTooBig     = errors.New("message too big")
)

// Send writes one message with optional file descriptors.
func Send(fd int, m *Message, files ...int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > maxMsg {
		return fmt.Errorf("%w: %d bytes of arguments and environment, over %d", ErrTooBig, len(b), maxMsg)
	}
	var oob []byte
	if len(files) > 0 {
		oob = unix.UnixRights(files...)
	}
	for {
		err = unix.Sendmsg(fd, b, oob, nil, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", m.Op, err)
	}
	return nil
}

// Recv reads one message and the file descriptors that came with it
// (close-on-exec set).
func Recv(fd int) (*Message, []int, error) {
	// Peek at the packet's length first: most messages are small, and a
	// maxMsg buffer per message costs more than the rest of an exec.
	var size int
	var err error
	var one [1]byte
	for {
		size, _, _, _, err = unix.Recvmsg(fd, one[:], nil, unix.MSG_PEEK|unix.MSG_TRUNC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("receive: %w", err)
	}
	if size > maxMsg {
		size = maxMsg
	}
	buf := make([]byte, max(size, 1))
	oob := make([]byte, unix.CmsgSpace(16*4))
	var n, oobn int
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("receive: %w", err)
	}
	var fds []int
	if oobn > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, fmt.Errorf("receive: %w", err)
		}
		for _, c := range cmsgs {
			r, err := unix.ParseUnixRights(&c)
			if err == nil {
				fds = append(fds, r...)
			}
		}
	}
	if n == 0 {
		CloseAll(fds)
		return nil, nil, ErrPeerClosed
	}
	var m Message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		CloseAll(fds)
		return nil, nil, fmt.Errorf("receive: %w", err)
	}
	return &m, fds, nil
}

// CloseAll closes every descriptor of fds.
func CloseAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
