// Package harnesstest holds what the tests of the npm harnesses share: the
// gate that `make test-harnesses` sets and where the pinned packages are.
package harnesstest

import (
	"os"
	"path/filepath"
	"testing"
)

// Gate is the variable `make test-harnesses` sets to 1 after installing
// the pinned npm harnesses (pi, Codex, ...) into tools/harnesses. With it
// set, a harness that cannot be installed or run fails its test; without it
// the tests that need one are skipped (plain `go test` needs no Node.js).
const Gate = "LEGORL_HARNESSES"

// Cache returns where the npm harnesses are installed (or installed by the
// test): $LEGORL_HARNESS_CACHE, else tools/harnesses, as an absolute path.
// It skips t unless Gate is set.
func Cache(t testing.TB) string {
	t.Helper()
	if os.Getenv(Gate) == "" {
		t.Skipf("set %s=1 (make test-harnesses) to run the npm harnesses", Gate)
	}
	dir := os.Getenv("LEGORL_HARNESS_CACHE")
	if dir == "" {
		dir = filepath.Join(moduleRoot(t), "tools", "harnesses")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// moduleRoot is the folder of go.mod above the test's working directory.
func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}
