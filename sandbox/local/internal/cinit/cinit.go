// Package cinit builds the C sandbox init (cmd/legorl-sandbox-init/init.c)
// for tests, with the script make build uses (scripts/lib/build-init.sh):
// the tests of sandbox/local run the backend's whole suite with it, and
// compare its seccomp filter with package initproc's.
package cinit

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// root is the checkout this file is in.
func root() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..", "..")
}

// Source is the path of init.c in this checkout.
func Source() string {
	return filepath.Join(root(), "cmd", "legorl-sandbox-init", "init.c")
}

// BuildTo builds the init to dir/legorl-sandbox-init and returns its path.
func BuildTo(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "legorl-sandbox-init")
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(root(), "scripts", "lib", "build-init.sh"), root(), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the C sandbox init: %w\n%s", err, b)
	}
	return out, nil
}

// Build builds the init into a temporary folder of t.
func Build(t testing.TB) string {
	t.Helper()
	p, err := BuildTo(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}
