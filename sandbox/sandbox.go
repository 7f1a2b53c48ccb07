// Package sandbox runs untrusted programs (coding agents, and the code they
// write) in isolated environments, and is the project's trust boundary: the
// agent under training is an adversary that learns to exploit any gap.
//
// A Backend creates Sandboxes; each Sandbox owns a private writable copy of a
// task workspace, runs commands with resource limits and deadlines, has no
// network except listeners the caller opens inside its own network namespace
// (Listen), and leaves nothing behind when closed.
//
// Backends: local (Linux namespaces, cgroups; the embedded default) and
// docker (image-based tasks through the Docker Engine API). Both pass the
// conformance suite in sandbox/sandboxtest.
package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"time"
)

// Backend creates sandboxes.
type Backend interface {
	// Create makes a new sandbox whose workspace is a private writable copy
	// (or overlay) of spec.Workspace. It fails with ErrSetup (wrapped) when
	// the environment cannot be built.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Name is the backend's name: "local" or "docker".
	Name() string
}

// Sandbox is one isolated environment. Its lifecycle: Create, any number of
// Exec and Listen calls, then Close, which kills every process left inside
// and removes every mount, cgroup, container and temporary file.
type Sandbox interface {
	// Exec runs cmd inside the sandbox and waits for it, its deadline or
	// ctx. A program that fails is a Result, not an error: the error is
	// reserved for the sandbox itself failing, and for ctx ending (then
	// the Result says timeout and the error is ctx's). When the command
	// ends, any process it left behind (background children, setsid'd
	// daemons) is killed, so Exec never waits on them.
	Exec(ctx context.Context, cmd Cmd) (Result, error)
	// Listen opens a TCP listener on 127.0.0.1:port (0: any free port) inside
	// the sandbox's network namespace. The caller serves on it from the host
	// process; programs inside reach it at 127.0.0.1:PORT and reach nothing
	// else.
	Listen(ctx context.Context, port int) (net.Listener, error)
	// HostWorkspace returns the host path of the sandbox's workspace, where
	// the caller reads the agent's changes (without running anything the
	// agent controls).
	HostWorkspace() string
	// Close tears the sandbox down. It is safe to call more than once.
	Close() error
}

// Spec describes a sandbox to create.
type Spec struct {
	// Workspace is the host folder holding the task repository. The sandbox
	// sees a private writable copy at WorkspaceDir; the original is never
	// modified.
	Workspace string
	// WorkspaceDir is where the workspace appears inside. Defaults to "/workspace".
	WorkspaceDir string
	// Image is the docker backend's image. The local backend ignores it and
	// shows the host's system folders read-only.
	Image string
	// Mounts are extra host folders to show inside.
	Mounts []Mount
	// Env is the environment of every command, added to a minimal default
	// (PATH, HOME=/tmp, LANG=C.UTF-8). Nothing of the host's environment leaks in.
	Env []string
	// Limits bound the sandbox's resources.
	Limits Limits
}

// WithDefaults returns the spec with every zero field set to its documented
// default (WorkspaceDir and each field of Limits). Backends call it first.
func (s Spec) WithDefaults() Spec {
	if s.WorkspaceDir == "" {
		s.WorkspaceDir = "/workspace"
	}
	l := &s.Limits
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = 2 << 30
	}
	if l.Pids <= 0 {
		l.Pids = 256
	}
	if l.CPUs <= 0 {
		l.CPUs = 1
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = 256 << 20
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = min(1<<30, l.MemoryBytes/2)
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = 1 << 20
	}
	if l.Timeout <= 0 {
		l.Timeout = 10 * time.Minute
	}
	return s
}

// Mount shows a host folder inside the sandbox.
type Mount struct {
	Source   string // host path
	Target   string // path inside
	ReadOnly bool
}

// Limits bound a sandbox. Zero fields take the defaults in their comments.
//
// /tmp and the workspace are tmpfs file systems of fixed sizes (TmpBytes,
// DiskBytes): a write past the size fails with ENOSPC inside, and nothing
// reaches the host's disk. Their pages are memory, charged to the memory
// cgroup of the process that wrote them, so what commands write there also
// counts against MemoryBytes (the task's files, copied in by the host at
// Create, count against the host process's memory instead).
type Limits struct {
	MemoryBytes int64   // all processes together, and what they wrote to /tmp and the workspace. Defaults to 2 GiB.
	Pids        int     // processes and threads. Defaults to 256.
	CPUs        float64 // CPU time share in cores. Defaults to 1.
	TmpBytes    int64   // size of the private /tmp. Defaults to 256 MiB.
	// DiskBytes is the size of the workspace, the task's files included
	// (Create fails with ErrSetup when they do not fit), with one file per
	// 4 KiB of it (at least 4096). Keep it, with TmpBytes, below
	// MemoryBytes: past that, a full workspace fills the memory limit
	// instead, and commands are OOM-killed (resource_limit) until files
	// are removed. Defaults to 1 GiB, or half of MemoryBytes if less.
	DiskBytes   int64
	OutputBytes int64         // captured stdout and stderr, each. Defaults to 1 MiB.
	Timeout     time.Duration // per Exec, unless Cmd.Timeout is set. Defaults to 10 minutes.
}

// Cmd is one command to run inside a sandbox.
type Cmd struct {
	Args    []string      // program and arguments; the program is looked up in PATH inside
	Dir     string        // working folder inside. Defaults to the workspace.
	Env     []string      // added to the sandbox's environment
	Stdin   io.Reader     // nil: empty stdin
	Stdout  io.Writer     // optional: stream output here too (capped copies go in Result)
	Stderr  io.Writer     // optional
	Timeout time.Duration // wall-clock deadline. Defaults to Limits.Timeout.
}

// Outcome is the typed end of an Exec.
type Outcome string

const (
	OutcomeCompleted      Outcome = "completed"        // the program exited (any exit code)
	OutcomeTimeout        Outcome = "timeout"          // the deadline passed; the process tree was killed
	OutcomeResourceLimit  Outcome = "resource_limit"   // memory or pids limit hit, or a full disk (see Result.DiskFull)
	OutcomeSandboxCrash   Outcome = "sandbox_crash"    // the sandbox itself failed
	OutcomeEnvSetupFailed Outcome = "env_setup_failed" // the environment could not be built
	OutcomePatchInvalid   Outcome = "patch_invalid"    // the agent's diff was refused or did not apply (grading)
)

// Result is what an Exec produced.
type Result struct {
	Outcome         Outcome
	ExitCode        int    // -1 when killed by a signal
	Signal          string // e.g. "killed"; empty when the program exited
	Duration        time.Duration
	Stdout, Stderr  []byte // capped at Limits.OutputBytes each
	StdoutTruncated bool
	StderrTruncated bool
	// DiskFull: the workspace or /tmp had no space (or no file) left when
	// the command ended. The Outcome is then resource_limit if the command
	// failed (nonzero exit or a signal; a timeout or OOM kill is reported
	// first), and completed if it exited 0 (it coped, or claims to): as
	// with the pids limit, a program that handles the error is not overruled.
	DiskFull bool
	Detail   string // why, for anything but a clean completion
}

// Sentinel errors.
var (
	ErrSetup       = errors.New("sandbox: setup failed")
	ErrClosed      = errors.New("sandbox: closed")
	ErrUnsupported = errors.New("sandbox: not supported on this machine")
)
