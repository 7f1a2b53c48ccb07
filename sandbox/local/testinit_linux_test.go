//go:build linux

package local

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/legorl/legorl/sandbox/local/internal/cinit"
)

// testInit is the C init built for this test process.
var testInit struct {
	once      sync.Once
	dir, path string
	err       error
}

// InitForTests is the Options.InitPath the package's tests run with: the
// C init (cmd/legorl-sandbox-init/init.c, what make build installs),
// built once per test process; or, with LEGORL_TEST_INIT=go, "": the Go
// init of this test binary itself (package initproc). make test runs the
// package both ways.
func InitForTests(t testing.TB) string {
	t.Helper()
	switch mode := os.Getenv("LEGORL_TEST_INIT"); mode {
	case "go":
		return ""
	case "", "c":
	default:
		t.Fatalf("LEGORL_TEST_INIT=%q: want c or go", mode)
	}
	testInit.once.Do(func() {
		testInit.dir, testInit.err = os.MkdirTemp("", "legorl-test-init-")
		if testInit.err == nil {
			testInit.path, testInit.err = cinit.BuildTo(context.Background(), testInit.dir)
		}
	})
	if testInit.err != nil {
		t.Fatal(testInit.err)
	}
	return testInit.path
}

// RemoveTestInit removes what InitForTests built.
func RemoveTestInit() {
	if testInit.dir != "" {
		os.RemoveAll(testInit.dir)
	}
}
