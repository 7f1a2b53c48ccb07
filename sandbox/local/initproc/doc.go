// Package initproc is the code that runs inside the local sandbox backend's
// helper processes (package sandbox/local): the spawner, which starts every
// sandbox's init, and that init (the holder), pid 1 of the sandbox, which
// builds its root file system, drops privileges and runs the host's
// commands. It also holds the protocol the host speaks with both.
//
// It is a package of its own, which imports no more than the standard
// library and golang.org/x/sys/unix, so that cmd/legorl-sandbox-init, which
// links only it, starts quickly: every init the backend starts runs the
// package initialization of every package its binary links, and
// sandbox/local's dependencies (the Prometheus client, protobuf, net/http)
// cost about as much CPU as the rest of the init's start. Linking
// sandbox/local links this package, so any binary that links the backend
// can still serve as the init (the backend re-executes itself when there is
// no legorl-sandbox-init).
package initproc
