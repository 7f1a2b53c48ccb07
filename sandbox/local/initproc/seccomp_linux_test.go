//go:build linux

package initproc_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"testing"

	"github.com/legorl/legorl/sandbox/local/initproc"
	"github.com/legorl/legorl/sandbox/local/internal/cinit"
)

// TestSeccompFilterSame: the C init (cmd/legorl-sandbox-init) installs
// exactly the filter of the Go holder, instruction for instruction.
func TestSeccompFilterSame(t *testing.T) {
	prog, err := initproc.SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, in := range prog {
		fmt.Fprintf(&want, "%d %d %d %d\n", in.Code, in.Jt, in.Jf, in.K)
	}
	got, err := exec.Command(cinit.Build(t), "--seccomp-filter").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the C init's seccomp filter differs from the Go holder's:\nC:\n%s\nGo:\n%s", got, want.Bytes())
	}
	if len(prog) < 40 {
		t.Fatalf("%d instructions: the filter is not the one expected", len(prog))
	}
}
