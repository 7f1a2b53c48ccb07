//go:build linux

package local_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/internal/cinit"
)

// TestInitVersion: initVersion is the hash of the code the spawner and the
// holders run, so that a legorl-sandbox-init built from older code is
// never used. When this fails, set initVersion to the value it names.
func TestInitVersion(t *testing.T) {
	h := sha256.New()
	for _, f := range []string{"init_linux.go", "proto_linux.go", "seccomp_linux.go", "spawner_linux.go", cinit.Source()} {
		if !filepath.IsAbs(f) {
			f = filepath.Join("initproc", f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	if got := hex.EncodeToString(h.Sum(nil))[:16]; got != local.InitVersion {
		t.Fatalf("the init's source changed: set Version in initproc/version_linux.go to %q (is %q)", got, local.InitVersion)
	}
}

// TestInitCandidates: an explicit InitPath is the only candidate; else the
// running executable, after a legorl-sandbox-init beside it when there is one.
func TestInitCandidates(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sibling := filepath.Join(filepath.Dir(exe), "legorl-sandbox-init")
	_, statErr := os.Stat(sibling)
	tests := []struct {
		name     string
		explicit string
		want     []string
	}{
		{"explicit", "/opt/init", []string{"/opt/init"}},
		{"default", "", []string{"/proc/self/exe"}},
	}
	if statErr == nil {
		tests[1].want = []string{sibling, "/proc/self/exe"}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := local.InitCandidates(tt.explicit); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("candidates %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStaticInit: a copy of this test binary with a legorl-sandbox-init
// beside it starts its sandboxes from that init when the init greets it
// with the same version, and from itself when the init is not one (here
// a script that exits) or is missing.
func TestStaticInit(t *testing.T) {
	if mode := os.Getenv("LEGORL_TEST_STATIC_INIT"); mode != "" {
		// The child: run a command in a sandbox and print the spawner's binary.
		b := local.New(local.Options{NoPrestart: true})
		defer b.Close()
		sb, err := b.Create(context.Background(), sandbox.Spec{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		defer sb.Close()
		res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"echo", "ran"}})
		if err != nil || string(res.Stdout) != "ran\n" {
			fmt.Println("error", err, res)
			os.Exit(1)
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", parentOf(fmt.Sprint(local.HolderPid(sb)))))
		fmt.Println("spawner", exe)
		return
	}
	dir := t.TempDir()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(dir, "host.test")
	if err := os.WriteFile(host, self, 0o755); err != nil {
		t.Fatal(err)
	}
	init, err := cinit.BuildTo(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T) string {
		t.Helper()
		cmd := exec.Command(host, "-test.run=^TestStaticInit$")
		cmd.Env = append(os.Environ(), "LEGORL_TEST_STATIC_INIT=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "spawner" {
				return f[1]
			}
		}
		t.Fatalf("child output %q", out)
		return ""
	}
	tests := []struct {
		name  string
		setup func(t *testing.T)
		want  string
	}{
		{"static init", func(t *testing.T) {}, init},
		{"not an init", func(t *testing.T) {
			if err := os.Rename(init, init+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(init, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, host},
		{"missing", func(t *testing.T) {
			if err := os.Remove(init); err != nil {
				t.Fatal(err)
			}
		}, host},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup(t)
			if got := run(t); got != tt.want {
				t.Fatalf("spawner ran %s, want %s", got, tt.want)
			}
		})
	}
}
