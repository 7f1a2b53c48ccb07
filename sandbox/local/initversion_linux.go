//go:build linux

package local

import "github.com/legorl/legorl/sandbox/local/initproc"

// initName is the small static init binary that make build puts beside
// bin/legorl (cmd/legorl-sandbox-init). A holder started from it skips the
// package initialization of a large binary (hundreds of packages, tens of
// milliseconds of CPU per sandbox for bin/legorl) and the dynamic loader.
const initName = "legorl-sandbox-init"

// The spawner's and the holders' code, and the protocol, live in package
// initproc; these names are the host's.
const (
	initVersion = initproc.Version
	initEnv     = initproc.Env
	initHolder  = initproc.ModeHolder
	initSpawner = initproc.ModeSpawner
)

type (
	message     = initproc.Message
	setupConfig = initproc.SetupConfig
	mountEntry  = initproc.MountEntry
)

var (
	send          = initproc.Send
	recv          = initproc.Recv
	closeAll      = initproc.CloseAll
	errPeerClosed = initproc.ErrPeerClosed
	errTooBig     = initproc.ErrTooBig
)

func init() { Init() }

// Init turns the process into a sandbox init when the local backend started
// it as one, and never returns then; otherwise it returns at once. Package
// initproc, which this package links, calls it from its own init function,
// so linking the package is enough; calling it first thing in main (or
// TestMain) as well is harmless and documents the re-exec.
func Init() { initproc.Init() }
