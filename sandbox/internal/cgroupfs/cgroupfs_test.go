package cgroupfs

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestReadKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(path, []byte("low 0\nhigh 0\nmax 4\noom 2\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		want uint64
	}{{"oom_kill", 3}, {"oom", 2}, {"max", 4}, {"absent", 0}} {
		if got := ReadKey(path, c.key); got != c.want {
			t.Errorf("ReadKey(%q) = %d, want %d", c.key, got, c.want)
		}
	}
	if got := ReadKey(filepath.Join(t.TempDir(), "none"), "max"); got != 0 {
		t.Errorf("missing file: %d, want 0", got)
	}
}

// TestOf: this process is in some group, and its own pid reads the same
// as self.
func TestOf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/cgroup is Linux's")
	}
	self, err := Of(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(self) == 0 {
		t.Fatal("no groups in /proc/self/cgroup")
	}
	byPid, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for ctl, path := range self {
		if byPid[ctl] != path {
			t.Errorf("controller %q: self %q, pid %q", ctl, path, byPid[ctl])
		}
	}
	if _, err := Of(-1); err == nil {
		t.Error("Of(-1) read a file")
	}
}

// TestFile: a File kept open reads the counters as they are at each read,
// not as they were when it was opened.
func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pids.events")
	if err := os.WriteFile(path, []byte("max 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		content string // written in place (the same file) before the read
		key     string
		want    uint64
	}{
		{"max 0\n", "max", 0},
		{"max 7\n", "max", 7},
		{"oom 1\noom_kill 12\n", "oom_kill", 12},
		{"oom 1\noom_kill 12\n", "max", 0},
		{"", "max", 0},
		{"max 3", "max", 3},
	} {
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := f.ReadKey(c.key); got != c.want {
			t.Errorf("after writing %q: ReadKey(%q) = %d, want %d", c.content, c.key, got, c.want)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("Open of a missing file: no error")
	}
}
