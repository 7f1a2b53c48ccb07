// Package local is the sandbox backend built on Linux namespaces: the
// embedded default, which starts a sandbox in milliseconds.
//
// Each sandbox is a process (the holder: forked by the small static C
// program legorl-sandbox-init, the sandbox init, which make build puts
// beside bin/legorl; see package initproc and Options.InitPath) that is pid
// 1 of new user, mount, pid, network, uts and ipc namespaces. Its root is
// mapped to a random unprivileged host uid that owns nothing on the host
// but the sandbox's workspace copy. It builds a root file
// system from read-only binds of the host's system folders (/usr, /bin, /lib,
// /etc with secrets masked), the workspace (a tmpfs of Limits.DiskBytes
// mounted on a host folder, which the host reads), a private size-capped
// /tmp, its own /proc and a minimal /dev; joins memory, pids and cpu cgroups; drops
// every capability; and then runs the host's commands one at a time, each in
// a new session without a controlling terminal. When a command ends, times
// out or is canceled, every process of the sandbox is killed. The network
// namespace has only lo; Listen opens host-served listeners inside it.
package local

import (
	"errors"
	"sync"

	"github.com/legorl/legorl/sandbox"
)

// Options configure the backend. The zero value is the default.
type Options struct {
	// Dir is where the backend makes the folder that holds its sandboxes'
	// folders (the workspace copies): a small tmpfs mounted once, at the
	// first Create. Defaults to os.TempDir().
	Dir string
	// NoCgroups runs without memory, pids and cpu cgroups (the pids limit
	// still holds through RLIMIT_NPROC). Defaults to false: Create fails
	// when the cgroups cannot be made.
	NoCgroups bool
	// NoSeccomp runs without the seccomp filter. Defaults to false.
	NoSeccomp bool
	// Prestart keeps this many sandbox inits started, their namespaces and
	// root file system built, their workspace mount and cgroups made with
	// the default limits, so that Create only copies the workspace in and
	// seals the sandbox. The first Create starts them; each one waiting is
	// an idle process, an empty tmpfs and three empty cgroups. Defaults to
	// 2 when 0; see NoPrestart.
	Prestart int
	// NoPrestart starts each sandbox's init in Create, and none ahead
	// (as does a negative Prestart). Defaults to false.
	NoPrestart bool
	// InitPath is the sandbox init the backend starts (the C program of
	// package initproc, built from the same source as this binary: it
	// must greet the host with initproc.Version). Defaults to
	// legorl-sandbox-init beside the running executable, which make build
	// puts beside bin/legorl; without one no sandbox starts (see FindInit).
	InitPath string
	// Metrics, when not nil, counts sandboxes and commands in Prometheus
	// metrics (sandbox.NewMetrics), labelled backend="local". Defaults to
	// nil: no metrics.
	Metrics *sandbox.Metrics
}

// Backend is the local backend, safe for concurrent use. At its first
// Create it starts a small helper process that starts every sandbox's init
// (see spawner_linux.go); Close ends it.
type Backend struct {
	opts Options

	mu sync.Mutex // guards sp, and serializes spawn requests
	sp *spawner

	home *home // holds the sandboxes' folders

	gcOnce       sync.Once // removes what dead host processes left
	prestartOnce sync.Once
	prestarting  sync.WaitGroup // the prestart goroutine, which Close waits for
	stopOnce     sync.Once
	stop         chan struct{}    // closed by Close: prestarting ends
	pool         chan *holderProc // prestarted holders
	// refill holds one token per holder the pool lacks that the prestart
	// goroutine has not begun to make (see takeHolder).
	refill   chan struct{}
	refillMu sync.Mutex    // guards starting and claimed
	starting chan struct{} // while the prestart goroutine starts a holder: closed when it is done
	claimed  bool          // a Create waits for starting
}

var _ sandbox.Backend = (*Backend)(nil)

// defaultPrestart is Options.Prestart's default: one init for the next
// Create and one for the Create after it, which covers sandboxes that
// arrive a few milliseconds apart without holding many idle processes.
const defaultPrestart = 2

// New returns a local backend.
func New(opts Options) *Backend {
	switch {
	case opts.NoPrestart || opts.Prestart < 0:
		opts.Prestart = 0
	case opts.Prestart == 0:
		opts.Prestart = defaultPrestart
	}
	b := &Backend{opts: opts, stop: make(chan struct{}), home: &home{parent: opts.Dir},
		pool: make(chan *holderProc, opts.Prestart), refill: make(chan struct{}, opts.Prestart)}
	for range opts.Prestart {
		b.refill <- struct{}{}
	}
	return b
}

// ErrNoInit: the sandbox init is not where the backend looks for it.
var ErrNoInit = errors.New("no sandbox init")

// Open is New for a caller that wants a missing init reported now rather
// than at the first Create: it fails with ErrNoInit, naming make build,
// when FindInit finds no init.
func Open(opts Options) (*Backend, error) {
	if _, err := FindInit(opts.InitPath); err != nil {
		return nil, err
	}
	return New(opts), nil
}

// Name returns "local".
func (b *Backend) Name() string { return "local" }
