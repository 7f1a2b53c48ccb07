package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxExec runs commands through `legorl sandbox exec`: the output
// streams, and the last line is the outcome as JSON.
func TestSandboxExec(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("from the workspace"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		stdout  string // prefix of the streamed output
		outcome string
		exit    int
	}{
		{"echo", []string{"--workspace", ws, "--", "sh", "-c", "cat f.txt; echo; exit 3"}, "from the workspace\n", "completed", 3},
		{"no newline", []string{"--", "printf", "x"}, "x\n", "completed", 0},
		{"timeout", []string{"--timeout", "200ms", "--", "sleep", "100"}, "", "timeout", -1},
		{"memory", []string{"--memory", "33554432", "--", "tail", "/dev/zero"}, "", "resource_limit", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, testEnv(nil), append([]string{"sandbox", "exec"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			var got execOutcome
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
				t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
			}
			if string(got.Outcome) != tt.outcome || got.ExitCode != tt.exit {
				t.Errorf("outcome %s exit %d, want %s %d (%s)", got.Outcome, got.ExitCode, tt.outcome, tt.exit, got.Detail)
			}
			if !strings.HasPrefix(stdout, tt.stdout) {
				t.Errorf("stdout %q, want prefix %q", stdout, tt.stdout)
			}
		})
	}
	// The workspace given is never modified.
	code, _, stderr := runCLI(t, testEnv(nil), "sandbox", "exec", "--workspace", ws, "--", "sh", "-c", "rm f.txt; echo x > new")
	if code != 0 {
		t.Fatal(stderr)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 1 || entries[0].Name() != "f.txt" {
		t.Errorf("workspace changed: %v", entries)
	}
}

func TestSandboxBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"sandbox"}, "missing subcommand"},
		{"unknown subcommand", []string{"sandbox", "frob"}, `unknown subcommand "frob"`},
		{"no command", []string{"sandbox", "exec"}, "no command"},
		{"unknown backend", []string{"sandbox", "exec", "--backend", "vm", "--", "true"}, `unknown backend "vm"`},
		{"bad timeout", []string{"sandbox", "exec", "--timeout", "-1s", "--", "true"}, "must be positive"},
		{"bad flag", []string{"sandbox", "exec", "--bogus", "--", "true"}, "-bogus"},
		{"missing workspace", []string{"sandbox", "exec", "--workspace", "/nonexistent/ws", "--", "true"}, "/nonexistent/ws"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, testEnv(nil), tt.args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and one line naming %q", code, stderr, tt.want)
			}
		})
	}
}
