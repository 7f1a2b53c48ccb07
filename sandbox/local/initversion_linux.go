//go:build linux

package local

// initName is the small static init binary that make build puts beside
// bin/legorl (cmd/legorl-sandbox-init). A holder started from it skips the
// package initialization of a large binary (hundreds of packages, tens of
// milliseconds of CPU per sandbox for bin/legorl) and the dynamic loader.
const initName = "legorl-sandbox-init"

// initVersion names the source of the code that runs in the spawner and
// the holders: the SHA-256 (first 16 hex digits) of init_linux.go,
// proto_linux.go, seccomp_linux.go and spawner_linux.go, in that order. The
// host uses an init binary only when its spawner greets it with this
// version, so that a stale legorl-sandbox-init is never used with a newer
// host. TestInitVersion fails, naming the new value, when the files change
// and this does not.
const initVersion = "0b49c69c57a43e14"
