// Package initproc is the code that runs inside the local sandbox backend's
// helper processes (package sandbox/local): the spawner, which starts every
// sandbox's init, and that init (the holder), pid 1 of the sandbox, which
// builds its root file system, drops privileges and runs the host's
// commands. It also holds the protocol the host speaks with both.
//
// Linking sandbox/local links this package, so any binary that links the
// backend can serve as the init: the backend re-executes itself when there
// is no legorl-sandbox-init beside it. That one is the same program in C
// (cmd/legorl-sandbox-init/init.c), cheaper per sandbox: its spawner forks
// each holder without an exec or a Go runtime to start. This package is
// its specification: the same protocol, the same steps in the same order,
// the same seccomp filter (TestSeccompFilterSame); a change here is made
// there too, and both are in Version. The package imports no more than the
// standard library and golang.org/x/sys/unix: every init re-executed from
// a host binary runs the package initialization of what that binary links.
package initproc
