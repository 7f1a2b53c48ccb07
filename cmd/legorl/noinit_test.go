package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxNoInit: a legorl with no legorl-sandbox-init beside it (this
// test binary, linked into an empty folder) refuses the local backend with
// one line that names make build, and runs nothing else in its place.
func TestSandboxNoInit(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "legorl")
	if err := os.Link(self, bare); err != nil {
		copyFile(t, self, bare)
	}
	cmd := exec.Command(bare)
	cmd.Env = append(os.Environ(), "LEGORL_TEST_RUN_MAIN=1", "LEGORL_TEST_ARGS=sandbox exec --backend local -- true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 2 || strings.Count(stderr.String(), "\n") != 1 ||
		!strings.Contains(stderr.String(), "make build") || stdout.Len() != 0 {
		t.Fatalf("exit %d (%v), stdout %q, stderr %q; want 2 and one line naming make build", code, err, stdout.String(), stderr.String())
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
