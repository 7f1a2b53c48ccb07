//go:build linux

package initproc

import (
	"strconv"

	"golang.org/x/sys/unix"
)

//go:generate go run ./internal/gentables c/tables.h

// The tables below are the one declaration of what the host and the C init
// must agree on, and of the sandbox's fixed shape: CHeader writes them as
// c/tables.h, which init.c includes (TestTablesHeader fails when the
// committed header is not what they generate). The host's tests read them
// too, to check a live sandbox against them.

// Op is a message's kind, its first field.
type Op uint8

// The messages, with the direction they travel and the descriptors that
// come with them.
const (
	OpHello    Op = 1 + iota // spawner -> host, first: Version
	OpSpawn                  // host -> spawner: UID (fds: the holder's control socket)
	OpSpawned                // spawner -> host: Pid (fds: a pidfd), or Error
	OpPrepared               // holder -> host: the root is built, or Error
	OpSetup                  // host -> holder: Setup (fds: the workspace, then each mount, detached)
	OpReady                  // holder -> host: the sandbox is sealed, or Error
	OpExec                   // host -> holder: Args, Dir, Env (fds: stdin, stdout, stderr)
	OpKill                   // host -> holder: kill every process of the running exec
	OpExited                 // holder -> host: Status, NotFound, TmpFull, or Error
	OpFault                  // spawner or holder -> host, last: Error, the request it could not read or serve; it exits next
	opEnd
)

var opNames = [...]string{OpHello: "hello", OpSpawn: "spawn", OpSpawned: "spawned", OpPrepared: "prepared",
	OpSetup: "setup", OpReady: "ready", OpExec: "exec", OpKill: "kill", OpExited: "exited", OpFault: "fault"}

// String is the op's name, or "op N" for a number the protocol lacks.
func (o Op) String() string {
	if o > 0 && o < opEnd {
		return opNames[o]
	}
	return "op " + strconv.Itoa(int(o))
}

const (
	// MaxMsg bounds one message, arguments and environment included.
	MaxMsg = 1 << 20
	// MaxFDs bounds the descriptors that come with one message: the
	// workspace and at most MaxFDs-1 mounts.
	MaxFDs = 16
	// Env names the environment variable that starts the init as the
	// spawner (its value ModeSpawner); the init refuses to run without it.
	Env         = "LEGORL_SANDBOX_INIT"
	ModeSpawner = "spawner"
	// Hostname is the sandbox's host name.
	Hostname = "sandbox"
)

// SystemPaths are the host folders bound read-only into every sandbox's
// root (a symbolic link is copied as a link; a missing one is skipped).
func SystemPaths() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}
}

// MaskedFiles are the host files under SystemPaths that a sandbox sees
// empty: an empty read-only file is bound over each one that exists.
func MaskedFiles() []string {
	return []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers"}
}

// Devices are the host device nodes bound into the sandbox's /dev: no tty,
// no disks.
func Devices() []string { return []string{"null", "zero", "full", "random", "urandom"} }

// Link is a symbolic link made in the sandbox's root.
type Link struct{ Path, Dest string }

// DevLinks are the links of the sandbox's /dev.
func DevLinks() []Link {
	return []Link{{"/dev/fd", "/proc/self/fd"}, {"/dev/stdin", "/proc/self/fd/0"},
		{"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"}}
}

// Mount is one of the sandbox's own file systems, made in this order on a
// new folder of Mode. /tmp and /dev/shm get the spec's TmpBytes as their
// size at setup; /dev turns read-only once its nodes are in.
type Mount struct {
	Target, FSType, Data  string
	Mode                  uint32
	NoSuid, NoDev, NoExec bool
}

// Mounts are the sandbox's own file systems.
func Mounts() []Mount {
	return []Mount{
		{Target: "/proc", FSType: "proc", Mode: 0o555, NoSuid: true, NoDev: true, NoExec: true},
		{Target: "/dev", FSType: "tmpfs", Data: "mode=0755,size=64k", Mode: 0o755, NoSuid: true, NoExec: true},
		{Target: "/dev/shm", FSType: "tmpfs", Data: "mode=1777,size=1m", Mode: 0o777, NoSuid: true, NoDev: true},
		{Target: "/tmp", FSType: "tmpfs", Data: "mode=1777,size=1m", Mode: 0o777, NoSuid: true, NoDev: true},
	}
}

// Syscall is a system call by its name in the C library (__NR_name) and
// its number on this machine, which the host's tests check the init's
// filter against.
type Syscall struct {
	Name string
	Nr   uintptr
}

// DeniedSyscalls answer EPERM in the sandbox whatever their arguments: the
// system calls that have been the way out of namespace sandboxes or that a
// coding agent has no use for: mounting, namespaces (setns; new user
// namespaces are refused by clone's and unshare's flags), ptrace and
// cross-process memory access, keyrings, BPF, perf, io_uring, userfaultfd,
// kernel modules and kexec, handle-based opens. Besides these the filter
// refuses the x32 ABI, TIOCSTI and TIOCLINUX (terminal injection) and
// answers clone3 ENOSYS, so that C libraries fall back to clone, whose
// flags it can see.
func DeniedSyscalls() []Syscall {
	return []Syscall{
		{"ptrace", unix.SYS_PTRACE}, {"process_vm_readv", unix.SYS_PROCESS_VM_READV},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
		{"mount", unix.SYS_MOUNT}, {"umount2", unix.SYS_UMOUNT2}, {"pivot_root", unix.SYS_PIVOT_ROOT},
		{"move_mount", unix.SYS_MOVE_MOUNT}, {"open_tree", unix.SYS_OPEN_TREE}, {"fsopen", unix.SYS_FSOPEN},
		{"fsconfig", unix.SYS_FSCONFIG}, {"fsmount", unix.SYS_FSMOUNT}, {"fspick", unix.SYS_FSPICK},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR}, {"setns", unix.SYS_SETNS},
		{"keyctl", unix.SYS_KEYCTL}, {"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY},
		{"bpf", unix.SYS_BPF}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN}, {"userfaultfd", unix.SYS_USERFAULTFD},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP}, {"io_uring_enter", unix.SYS_IO_URING_ENTER},
		{"io_uring_register", unix.SYS_IO_URING_REGISTER},
		{"init_module", unix.SYS_INIT_MODULE}, {"finit_module", unix.SYS_FINIT_MODULE},
		{"delete_module", unix.SYS_DELETE_MODULE},
		{"kexec_load", unix.SYS_KEXEC_LOAD}, {"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD}, {"reboot", unix.SYS_REBOOT},
		{"swapon", unix.SYS_SWAPON}, {"swapoff", unix.SYS_SWAPOFF}, {"acct", unix.SYS_ACCT}, {"quotactl", unix.SYS_QUOTACTL},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT}, {"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
		{"syslog", unix.SYS_SYSLOG}, {"personality", unix.SYS_PERSONALITY},
	}
}
