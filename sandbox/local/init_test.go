//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/initproc"
	"github.com/legorl/legorl/sandbox/local/localtest"
)

// TestInitVersion: the init make build ships greets with the version the
// host computes from the same source files.
func TestInitVersion(t *testing.T) {
	out, err := exec.Command(localtest.Init(t), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), initproc.Version(); got != want || len(want) != 16 {
		t.Fatalf("the init says version %q, the host %q", got, want)
	}
}

// TestFindInit: the init is the one InitPath names, else the one beside
// the running executable (localtest put it there, as make build puts it
// beside bin/legorl); nothing else, and a missing one is ErrNoInit naming
// make build.
func TestFindInit(t *testing.T) {
	init := localtest.Init(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, explicit, want string
		err                  bool
	}{
		{"explicit", init, init, false},
		{"default: beside the executable", "", filepath.Join(filepath.Dir(exe), "legorl-sandbox-init"), false},
		{"missing", filepath.Join(dir, "nothing"), "", true},
		{"a folder", dir, "", true},
		{"not executable", notExec, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := local.FindInit(tt.explicit)
			if tt.err {
				if !errors.Is(err, local.ErrNoInit) || !strings.Contains(err.Error(), "make build") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line: ErrNoInit naming make build", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FindInit(%q) = %q, %v; want %q", tt.explicit, got, err, tt.want)
			}
		})
	}
}

// TestNoInit: without the init the backend refuses to start: Open at once,
// Create (of New) at the first sandbox, each with one line that names make
// build; and it does not fall back to anything else.
func TestNoInit(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "legorl-sandbox-init")
	if _, err := local.Open(local.Options{InitPath: missing}); !errors.Is(err, local.ErrNoInit) {
		t.Fatalf("Open: %v, want ErrNoInit", err)
	}
	b := local.New(local.Options{InitPath: missing, NoPrestart: true})
	defer b.Close()
	_, err := b.Create(context.Background(), sandbox.Spec{})
	if !errors.Is(err, sandbox.ErrSetup) || !strings.Contains(err.Error(), "make build") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Create: %v, want one line: a setup error naming make build", err)
	}
}

// TestWrongInit: an init that is not one (a script that exits) or that was
// built from other source (another version) is refused, with one line.
func TestWrongInit(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	src := filepath.Join(localtest.Root(), "sandbox", "local", "initproc", "c", "init.c")
	if out, err := exec.Command("cc", "-static", "-O2", `-DLEGORL_INIT_VERSION="0123456789abcdef"`, "-o", other, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	tests := []struct{ name, path, want string }{
		{"not an init", script, "peer closed"},
		{"other version", other, `version "0123456789abcdef"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := local.New(local.Options{InitPath: tt.path, NoPrestart: true})
			defer b.Close()
			_, err := b.Create(context.Background(), sandbox.Spec{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Create: %v, want one line with %q", err, tt.want)
			}
		})
	}
}
