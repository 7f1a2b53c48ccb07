// Command legorl-sandbox-init is the local sandbox backend's helper and
// sandbox init (package sandbox/local), and nothing else: a host binary that
// links the backend starts its sandboxes from the legorl-sandbox-init beside
// it, when that greets it with the same init version, instead of
// re-executing itself. Small and static, it starts in a fraction of the
// time of bin/legorl (no dynamic loader; it links only package initproc,
// the init's side of the backend, and so initializes none of the backend's
// own dependencies). Build it beside bin/legorl:
//
//	CGO_ENABLED=0 go build -o bin/legorl-sandbox-init ./cmd/legorl-sandbox-init
//
// Run by hand, it says so and exits 2.
package main

import (
	"fmt"
	"os"

	"github.com/legorl/legorl/sandbox/local/initproc"
)

func main() {
	initproc.Init() // does not return when the backend started this process
	fmt.Fprintln(os.Stderr, "legorl-sandbox-init: started only by the local sandbox backend (package sandbox/local)")
	os.Exit(2)
}
