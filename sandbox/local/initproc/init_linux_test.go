//go:build linux

package initproc_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legorl/legorl/sandbox/local/initproc"
	"github.com/legorl/legorl/sandbox/local/localtest"
)

var update = flag.Bool("update", false, "rewrite c/corpus from the protocol's sample messages")

// TestTablesHeader: c/tables.h is what the tables generate (go generate
// ./sandbox/local/initproc writes it).
func TestTablesHeader(t *testing.T) {
	got, err := os.ReadFile("c/tables.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, initproc.CHeader()) {
		t.Fatal("c/tables.h is not what tables_linux.go generates: run go generate ./sandbox/local/initproc")
	}
}

// TestFuzzCorpus: the C fuzz target's seed corpus (c/corpus) is the
// encoding of every sample message of the protocol, one file each; go test
// ./sandbox/local/initproc -run TestFuzzCorpus -update rewrites it.
func TestFuzzCorpus(t *testing.T) {
	want := map[string][]byte{}
	for _, s := range initproc.Samples() {
		want[strings.ReplaceAll(s.Name, " ", "-")] = initproc.Encode(&s.Message)
	}
	if *update {
		os.RemoveAll("c/corpus")
		if err := os.MkdirAll("c/corpus", 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join("c/corpus", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := os.ReadDir("c/corpus")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Fatalf("c/corpus has %d files, want %d: run go test ./sandbox/local/initproc -run TestFuzzCorpus -update", len(files), len(want))
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join("c/corpus", name))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("c/corpus/%s is not the encoding of its message (%v): run go test ./sandbox/local/initproc -run TestFuzzCorpus -update", name, err)
		}
	}
}

// seccompData is struct seccomp_data: the input of the filter.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (d seccompData) load(off uint32) (uint32, error) {
	var b [64]byte
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	if off%4 != 0 || off+4 > uint32(len(b)) {
		return 0, fmt.Errorf("load at %d", off)
	}
	return binary.LittleEndian.Uint32(b[off:]), nil
}

// runFilter runs a classic BPF program of the instructions the filter uses
// (absolute word loads, jeq, jge, jset, ret) on d.
func runFilter(prog []unix.SockFilter, d seccompData) (uint32, error) {
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			v, err := d.load(in.K)
			if err != nil {
				return 0, err
			}
			a = v
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var ok bool
			switch in.Code & 0xf0 {
			case unix.BPF_JEQ:
				ok = a == in.K
			case unix.BPF_JGE:
				ok = a >= in.K
			default:
				ok = a&in.K != 0
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K, nil
		default:
			return 0, fmt.Errorf("instruction %d: code %#x", pc, in.Code)
		}
	}
	return 0, fmt.Errorf("fell off the end")
}

// TestSeccompFilter runs the filter the shipped init installs
// (--seccomp-filter prints it) on system calls: every one of
// initproc.DeniedSyscalls answers EPERM, the calls a command needs pass,
// clone and unshare pass but not with CLONE_NEWUSER, clone3 answers
// ENOSYS, TIOCSTI is refused, and another ABI is killed.
func TestSeccompFilter(t *testing.T) {
	out, err := exec.Command(localtest.Init(t), "--seccomp-filter").Output()
	if err != nil {
		t.Fatal(err)
	}
	var prog []unix.SockFilter
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var in unix.SockFilter
		if _, err := fmt.Sscan(sc.Text(), &in.Code, &in.Jt, &in.Jf, &in.K); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		prog = append(prog, in)
	}
	arch := uint32(unix.AUDIT_ARCH_X86_64)
	if runtime.GOARCH == "arm64" {
		arch = unix.AUDIT_ARCH_AARCH64
	}
	eperm := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	type call struct {
		name string
		d    seccompData
		want uint32
	}
	calls := []call{
		{"read", seccompData{nr: unix.SYS_READ, arch: arch}, unix.SECCOMP_RET_ALLOW},
		{"execve", seccompData{nr: unix.SYS_EXECVE, arch: arch}, unix.SECCOMP_RET_ALLOW},
		{"openat", seccompData{nr: unix.SYS_OPENAT, arch: arch}, unix.SECCOMP_RET_ALLOW},
		{"clone", seccompData{nr: unix.SYS_CLONE, arch: arch, args: [6]uint64{uint64(unix.SIGCHLD)}}, unix.SECCOMP_RET_ALLOW},
		{"clone newuser", seccompData{nr: unix.SYS_CLONE, arch: arch, args: [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}}, eperm},
		{"unshare newuser", seccompData{nr: unix.SYS_UNSHARE, arch: arch, args: [6]uint64{unix.CLONE_NEWUSER}}, eperm},
		{"unshare newns", seccompData{nr: unix.SYS_UNSHARE, arch: arch, args: [6]uint64{unix.CLONE_NEWNS}}, unix.SECCOMP_RET_ALLOW},
		{"clone3", seccompData{nr: unix.SYS_CLONE3, arch: arch}, unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{"ioctl TIOCSTI", seccompData{nr: unix.SYS_IOCTL, arch: arch, args: [6]uint64{0, unix.TIOCSTI}}, eperm},
		{"ioctl TIOCLINUX", seccompData{nr: unix.SYS_IOCTL, arch: arch, args: [6]uint64{0, unix.TIOCLINUX}}, eperm},
		{"ioctl TCGETS", seccompData{nr: unix.SYS_IOCTL, arch: arch, args: [6]uint64{0, unix.TCGETS}}, unix.SECCOMP_RET_ALLOW},
		{"another ABI", seccompData{nr: unix.SYS_READ, arch: 0x40000003}, unix.SECCOMP_RET_KILL_PROCESS},
	}
	if runtime.GOARCH == "amd64" {
		calls = append(calls, call{"x32", seccompData{nr: 0x40000000 + unix.SYS_READ, arch: arch}, eperm})
	}
	for _, s := range initproc.DeniedSyscalls() {
		calls = append(calls, call{s.Name, seccompData{nr: uint32(s.Nr), arch: arch}, eperm})
	}
	for _, c := range calls {
		got, err := runFilter(prog, c.d)
		if err != nil || got != c.want {
			t.Errorf("%s: filter returns %#x (%v), want %#x", c.name, got, err, c.want)
		}
	}
}

// spawner starts the shipped init as the spawner on a socket pair and
// reads its greeting; it returns the host's end and the process.
func spawner(t *testing.T) (int, *exec.Cmd) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	child := os.NewFile(uintptr(pair[1]), "child")
	cmd := exec.Command(localtest.Init(t))
	cmd.Env = []string{initproc.Env + "=" + initproc.ModeSpawner}
	cmd.ExtraFiles = []*os.File{child}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	t.Cleanup(func() {
		unix.Close(pair[0])
		cmd.Process.Kill()
		cmd.Wait()
	})
	m, fds, err := initproc.Recv(pair[0])
	initproc.CloseAll(fds)
	if err != nil || initproc.Want(m, initproc.OpHello) != nil || m.Version != initproc.Version() {
		t.Fatalf("greeting %+v, %v", m, err)
	}
	return pair[0], cmd
}

// TestBadRequest: a request the spawner cannot read (malformed,
// truncated, over the size limit) or does not expect (an unknown op, a
// holder's op) gets a fault naming the problem, and the spawner exits 1
// at once.
func TestBadRequest(t *testing.T) {
	spawn := initproc.Encode(&initproc.Message{Op: initproc.OpSpawn, UID: 1 << 30})
	tests := []struct {
		name   string
		packet []byte
		want   string
	}{
		{"malformed", []byte{0xff, 0xff}, "receive: malformed message"},
		{"truncated", spawn[:len(spawn)-2], "receive: malformed message"},
		{"a byte more", append(spawn[:len(spawn):len(spawn)], 0), "receive: malformed message"},
		{"unknown op", initproc.Encode(&initproc.Message{Op: 200}), "protocol: unknown op 200, want spawn"},
		{"a holder's op", initproc.Encode(&initproc.Message{Op: initproc.OpExec, Args: []string{"true"}}), "protocol: exec, want spawn"},
		{"no control socket", spawn, "protocol: spawn without a control socket"},
		{"over the limit", make([]byte, initproc.MaxMsg+1), fmt.Sprintf("over the limit of %d", initproc.MaxMsg)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd, cmd := spawner(t)
			if len(tt.packet) > 200<<10 {
				// Root may raise the buffer past what the kernel lets one
				// packet be by default (wmem_max).
				if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4*initproc.MaxMsg); err != nil {
					t.Fatalf("SO_SNDBUFFORCE: %v", err)
				}
			}
			if err := unix.Sendmsg(fd, tt.packet, nil, nil, 0); err != nil {
				t.Fatal(err)
			}
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10}); err != nil {
				t.Fatal(err)
			}
			m, fds, err := initproc.Recv(fd)
			initproc.CloseAll(fds)
			if err != nil {
				t.Fatalf("no fault: %v", err)
			}
			if err := initproc.Want(m, initproc.OpSpawned); err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("reply %v, want one line: a fault with %q", err, tt.want)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if cmd.ProcessState.ExitCode() != 1 {
					t.Fatalf("spawner exit %v, want 1", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the spawner did not exit within 10s")
			}
		})
	}
}
