// Package localtest gives tests the sandbox init that ships: the C program
// of package initproc, built by the script make build uses
// (scripts/lib/build-init.sh), once per test process, and put beside the
// running test binary, where the local backend looks for it as it looks
// beside bin/legorl. So every test of the local backend, whether it names
// the init (Options.InitPath: Init's path) or not (local.Options{}, as
// package rollout and cmd/legorl make theirs), runs that init; there is no
// other.
//
// LEGORL_TEST_INIT=asan builds it with AddressSanitizer and
// UndefinedBehaviorSanitizer instead (make test-init-asan); any other
// value but "" fails the test.
package localtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Name is the init's file name, beside the test binary.
const Name = "legorl-sandbox-init"

var built struct {
	once sync.Once
	path string
	err  error
}

// Install builds the init beside the running test binary, once per
// process, and returns its path; for TestMain and examples, which have no
// testing.TB.
func Install() (string, error) {
	built.once.Do(func() { built.path, built.err = build(context.Background()) })
	return built.path, built.err
}

// MustInstall is Install for TestMain: when the init does not build it
// says why and exits 1.
func MustInstall() string {
	p, err := Install()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return p
}

// Init is Install for a test: it fails the test when the init does not
// build.
func Init(t testing.TB) string {
	t.Helper()
	p, err := Install()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Root is the checkout this file is in.
func Root() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..")
}

func build(ctx context.Context) (string, error) {
	var env []string
	switch mode := os.Getenv("LEGORL_TEST_INIT"); mode {
	case "":
	case "asan":
		env = append(env, "SANITIZE=1")
	default:
		return "", fmt.Errorf("localtest: LEGORL_TEST_INIT=%q: want asan or nothing", mode)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("localtest: %w", err)
	}
	out := filepath.Join(filepath.Dir(exe), Name)
	// Built aside and renamed: two copies of one test binary may start at once.
	tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(Root(), "scripts", "lib", "build-init.sh"), Root(), tmp)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("localtest: build the sandbox init: %w\n%s", err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("localtest: %w", err)
	}
	return out, nil
}
