//go:build linux

package initproc

// Version names the source of the code that runs in the spawner and the
// holders: the SHA-256 (first 16 hex digits) of init_linux.go,
// proto_linux.go, seccomp_linux.go and spawner_linux.go of this package and
// of the C init, cmd/legorl-sandbox-init/init.c, in that order. The host
// uses an init binary only when its spawner greets it with this version,
// so that a stale legorl-sandbox-init is never used with a newer host.
// sandbox/local's TestInitVersion fails, naming the new value, when the
// files change and this does not.
const Version = "e7a831fc030c4549"
