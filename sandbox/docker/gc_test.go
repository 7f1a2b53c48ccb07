package docker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// TestOrphansCollected: a workspace folder left by a dead host process,
// its tmpfs still mounted, is unmounted and removed; a live process's is
// kept. Needs no engine.
func TestOrphansCollected(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	orphan := filepath.Join(tmp, dirPrefix+strconv.Itoa(dead.Process.Pid)+"-1")
	mine := filepath.Join(tmp, dirPrefix+strconv.Itoa(os.Getpid())+"-2")
	for _, d := range []string{orphan, mine} {
		ws := filepath.Join(d, "workspace")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := capfs.Mount(ws, 1<<20, 1000, 1000); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { capfs.RemoveAll(mine) })
	collectOrphans(tmp)
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan %s left: %v", orphan, err)
	}
	if _, err := os.Stat(filepath.Join(mine, "workspace", "f")); err != nil {
		t.Errorf("a live process's workspace was collected: %v", err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), orphan) {
		t.Errorf("the orphan's mount is left")
	}
}
