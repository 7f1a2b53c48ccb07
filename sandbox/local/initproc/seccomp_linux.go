//go:build linux

package initproc

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter is a second wall behind the dropped capabilities: it
// refuses (EPERM) the system calls that have been the way out of
// namespace sandboxes or that a coding agent has no use for: mounting,
// namespaces (new user namespaces, setns), ptrace and cross-process memory
// access, keyrings, BPF, perf, io_uring, userfaultfd, kernel modules and
// kexec, handle-based opens, and terminal injection (TIOCSTI, TIOCLINUX).
// clone3 answers ENOSYS, so that C libraries fall back to clone, whose
// flags the filter can see.

// deniedSyscalls answer EPERM whatever their arguments.
var deniedSyscalls = []uintptr{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_MOVE_MOUNT,
	unix.SYS_OPEN_TREE, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT,
	unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR, unix.SYS_SETNS,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_SYSLOG, unix.SYS_PERSONALITY,
}

// auditArch is the AUDIT_ARCH value of the native system call ABI.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
}

// Offsets into struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits on little-endian machines
	offArg1 = 24
)

// asm is a tiny BPF assembler with forward jumps to labels.
type asm struct {
	ins    []unix.SockFilter
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	at     int
	jt, jf string // labels; "" means fall through
}

func (a *asm) op(code uint16, k uint32) { a.ins = append(a.ins, unix.SockFilter{Code: code, K: k}) }

// jump adds a conditional jump to jt when true, jf when false.
func (a *asm) jump(code uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, fixup{at: len(a.ins), jt: jt, jf: jf})
	a.op(code, k)
}

func (a *asm) label(name string) { a.labels[name] = len(a.ins) }

func (a *asm) assemble() ([]unix.SockFilter, error) {
	for _, f := range a.fixups {
		for i, l := range []string{f.jt, f.jf} {
			if l == "" {
				continue
			}
			to, ok := a.labels[l]
			if !ok || to <= f.at || to-f.at-1 > 255 {
				return nil, fmt.Errorf("seccomp: bad jump to %q", l)
			}
			if i == 0 {
				a.ins[f.at].Jt = uint8(to - f.at - 1)
			} else {
				a.ins[f.at].Jf = uint8(to - f.at - 1)
			}
		}
	}
	return a.ins, nil
}

const (
	bpfLdW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRet  = unix.BPF_RET | unix.BPF_K
)

// seccompFilter builds the filter program.
func seccompFilter() ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	a := &asm{labels: map[string]int{}}
	a.op(bpfLdW, offArch)
	a.jump(bpfJeq, arch, "", "kill")
	a.op(bpfLdW, offNr)
	if runtime.GOARCH == "amd64" {
		a.jump(bpfJge, 0x40000000, "eperm", "") // the x32 ABI
	}
	for _, nr := range deniedSyscalls {
		a.jump(bpfJeq, uint32(nr), "eperm", "")
	}
	a.jump(bpfJeq, unix.SYS_CLONE3, "enosys", "")
	a.jump(bpfJeq, unix.SYS_IOCTL, "ioctl", "")
	a.jump(bpfJeq, unix.SYS_CLONE, "flags", "")
	a.jump(bpfJeq, unix.SYS_UNSHARE, "flags", "")
	a.op(bpfRet, unix.SECCOMP_RET_ALLOW)

	a.label("ioctl")
	a.op(bpfLdW, offArg1)
	a.jump(bpfJeq, unix.TIOCSTI, "eperm", "")
	a.jump(bpfJeq, unix.TIOCLINUX, "eperm", "")
	a.op(bpfRet, unix.SECCOMP_RET_ALLOW)

	a.label("flags") // clone and unshare: no new user namespace
	a.op(bpfLdW, offArg0)
	a.jump(bpfJset, unix.CLONE_NEWUSER, "eperm", "")
	a.op(bpfRet, unix.SECCOMP_RET_ALLOW)

	a.label("eperm")
	a.op(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.label("enosys")
	a.op(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	a.label("kill")
	a.op(bpfRet, unix.SECCOMP_RET_KILL_PROCESS)
	return a.assemble()
}

// installSeccomp loads the filter (seccompFilter's) on every thread of the
// holder; the commands it forks inherit it. no_new_privs must be set
// already.
func installSeccomp(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
