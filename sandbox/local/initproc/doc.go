// Package initproc is the local sandbox backend's init (package
// sandbox/local) as the host sees it: the C program's source (c/init.c,
// which make build compiles, static, to bin/legorl-sandbox-init), the
// tables the program and the host share, the protocol they speak and the
// version that ties a host to the init built from the same source.
//
// The init is the sandbox's security boundary and exists once, in C: the
// host starts it as the spawner, which forks every sandbox's holder (pid 1
// of the sandbox: it builds the root file system, drops privileges,
// installs the seccomp filter and runs the host's commands) with no exec
// and no language runtime to start. What both sides must agree on (the
// message numbers, the size limits) and the sandbox's fixed shape (system
// folders, masked files, devices, its own mounts, the denied system calls)
// is declared once, in tables_linux.go; go generate writes it as
// c/tables.h. Version hashes c/init.c and c/tables.h.
package initproc
