//go:build linux

package local

import "github.com/legorl/legorl/sandbox/local/initproc"

// initName is the init binary that make build puts beside bin/legorl: the
// C program of package initproc (initproc/c/init.c), static, the only
// implementation of the sandbox's init.
const initName = "legorl-sandbox-init"

// The protocol, its tables and the init's version live in package
// initproc; these names are the host's.
type (
	message     = initproc.Message
	setupConfig = initproc.SetupConfig
	mountEntry  = initproc.MountEntry
)

var (
	send          = initproc.Send
	recv          = initproc.Recv
	want          = initproc.Want
	closeAll      = initproc.CloseAll
	errPeerClosed = initproc.ErrPeerClosed
	errTooBig     = initproc.ErrTooBig
)
