//go:build linux

package initproc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The host and the sandbox's init (the holder) talk over a SOCK_SEQPACKET
// socket pair: one message per packet (see encode), with file descriptors
// passed alongside (SCM_RIGHTS) where a message needs them.

// Message is every message of the protocol; Op says which fields matter
// (see the Op constants).
type Message struct {
	Op Op

	Setup *SetupConfig // setup

	Args []string // exec
	Dir  string
	Env  []string

	UID int // spawn: the host uid the holder's root maps to
	Pid int // spawned

	Version string // hello

	Error    string // spawned, prepared, ready, exited, fault
	Status   uint32 // exited: the command's wait status
	NotFound bool   // exited: the program does not exist
	TmpFull  bool   // exited: /tmp was full when the command ended
}

// SetupConfig is what the holder needs to build the sandbox.
type SetupConfig struct {
	WorkspaceDir string
	Mounts       []MountEntry
	TmpBytes     int64
	NprocLimit   int // RLIMIT_NPROC; 0: none
	Seccomp      bool
}

// MountEntry is one of Spec.Mounts, its source passed as a descriptor.
type MountEntry struct {
	Target   string
	ReadOnly bool
}

// Errors of Send and Recv.
var (
	ErrPeerClosed = errors.New("peer closed the control socket")
	ErrTooBig     = errors.New("message too big")
)

// Send writes one message with optional file descriptors.
func Send(fd int, m *Message, files ...int) error {
	b := m.encode()
	if len(b) > MaxMsg {
		return fmt.Errorf("%w: %d bytes of arguments and environment, over %d", ErrTooBig, len(b), MaxMsg)
	}
	var oob []byte
	if len(files) > 0 {
		oob = unix.UnixRights(files...)
	}
	var err error
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
	// MaxMsg buffer per message costs more than the rest of an exec.
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
	if size > MaxMsg {
		size = MaxMsg
	}
	buf := make([]byte, max(size, 1))
	oob := make([]byte, unix.CmsgSpace(MaxFDs*4))
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
	m, err := decode(buf[:n])
	if err != nil {
		CloseAll(fds)
		return nil, nil, fmt.Errorf("receive: %w", err)
	}
	return m, fds, nil
}

// encode writes every field of m in a fixed order: strings and lists as a
// uvarint length then their bytes or elements, numbers as varints,
// booleans as one byte; Setup as a presence byte, then its fields. It is
// not a format for anything but two processes built from the same source
// (the spawner checks the init's Version first).
func (m *Message) encode() []byte {
	var e encoder
	e.uint(uint64(m.Op))
	e.bool(m.Setup != nil)
	if c := m.Setup; c != nil {
		e.str(c.WorkspaceDir)
		e.uint(uint64(len(c.Mounts)))
		for _, mnt := range c.Mounts {
			e.str(mnt.Target)
			e.bool(mnt.ReadOnly)
		}
		e.int(c.TmpBytes)
		e.int(int64(c.NprocLimit))
		e.bool(c.Seccomp)
	}
	e.strs(m.Args)
	e.str(m.Dir)
	e.strs(m.Env)
	e.int(int64(m.UID))
	e.int(int64(m.Pid))
	e.str(m.Version)
	e.str(m.Error)
	e.uint(uint64(m.Status))
	e.bool(m.NotFound)
	e.bool(m.TmpFull)
	return e.b
}

// errMalformed: a packet that encode did not write.
var errMalformed = errors.New("malformed message")

// decode reads what encode wrote; anything else (short, long, a length
// past the end, a varint longer than it need be) is errMalformed.
func decode(b []byte) (*Message, error) {
	d := decoder{b: b}
	m := &Message{Op: d.op()}
	if d.bool() {
		c := &SetupConfig{WorkspaceDir: d.str()}
		if n := d.count(); n > 0 {
			c.Mounts = make([]MountEntry, n)
			for i := range c.Mounts {
				c.Mounts[i] = MountEntry{Target: d.str(), ReadOnly: d.bool()}
			}
		}
		c.TmpBytes = d.int()
		c.NprocLimit = int(d.int())
		c.Seccomp = d.bool()
		m.Setup = c
	}
	m.Args = d.strs()
	m.Dir = d.str()
	m.Env = d.strs()
	m.UID = int(d.int())
	m.Pid = int(d.int())
	m.Version = d.str()
	m.Error = d.str()
	m.Status = uint32(d.uint())
	m.NotFound = d.bool()
	m.TmpFull = d.bool()
	if d.bad || len(d.b) > 0 {
		return nil, errMalformed
	}
	return m, nil
}

type encoder struct{ b []byte }

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) strs(ss []string) {
	e.uint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

// decoder reads from b; after the first error (bad) every read returns
// the zero value.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if !d.varint(n) {
		return 0
	}
	return v
}

func (d *decoder) int() int64 {
	v, n := binary.Varint(d.b)
	if !d.varint(n) {
		return 0
	}
	return v
}

// varint consumes the n bytes of a varint that binary.Uvarint or Varint
// read; it fails on n <= 0 (short or too long) and on a varint longer than
// it needs to be (a last byte of 0), which encode never writes.
func (d *decoder) varint(n int) bool {
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		d.bad, d.b = true, nil
		return false
	}
	d.b = d.b[n:]
	return true
}

// op reads an op; any number fits the field (the reader says whether it
// knows it), but not one over 255.
func (d *decoder) op() Op {
	v := d.uint()
	if v > 255 {
		d.bad, d.b = true, nil
		return 0
	}
	return Op(v)
}

func (d *decoder) bool() bool {
	if len(d.b) == 0 || d.b[0] > 1 {
		d.bad, d.b = true, nil
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// count reads a list's length, which cannot exceed the bytes left (every
// element takes one at least).
func (d *decoder) count() int {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.bad, d.b = true, nil
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.count()
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) strs() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// CloseAll closes every descriptor of fds.
func CloseAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// ErrFault: the init could not read or serve a request (a fault message),
// and exits.
var ErrFault = errors.New("sandbox init failed")

// Want checks that m is of op want: a fault becomes ErrFault with the
// init's reason, any other op a protocol error.
func Want(m *Message, want Op) error {
	switch m.Op {
	case want:
		return nil
	case OpFault:
		return fmt.Errorf("%w: %s", ErrFault, m.Error)
	}
	return fmt.Errorf("protocol: want %s, got %s", want, m.Op)
}
