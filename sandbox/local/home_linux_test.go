//go:build linux

package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// TestHome: a backend's sandbox folders live in one tmpfs, each with its
// workspace mounted; removing a folder leaves no mount and no folder; the
// home goes at close, or with the last folder removed after close.
func TestHome(t *testing.T) {
	tests := []struct {
		name string
		// steps: "new" makes a folder, "rm" removes the oldest one left,
		// "close" closes the home.
		steps []string
	}{
		{"close empty", []string{"new", "rm", "close"}},
		{"close with one open", []string{"new", "close", "rm"}},
		{"close with two open", []string{"new", "new", "close", "rm", "rm"}},
		{"never used", []string{"close"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			h := &home{parent: parent}
			var open []string
			made := false // a folder was made, and with it the home
			for i, step := range tt.steps {
				switch step {
				case "new":
					dir, err := h.newFolder(1<<20, 1<<30)
					if err != nil {
						t.Fatal(err)
					}
					if m := mountsAt(t, filepath.Join(dir, "workspace")); m != 1 {
						t.Fatalf("%d mounts on the new folder's workspace, want 1", m)
					}
					if !strings.HasPrefix(filepath.Base(dir), namePrefix) || filepath.Dir(filepath.Dir(dir)) != parent {
						t.Fatalf("folder %s: want %s/%s*/%s*", dir, parent, namePrefix, namePrefix)
					}
					open, made = append(open, dir), true
				case "rm":
					if err := h.removeFolder(open[0]); err != nil {
						t.Fatal(err)
					}
					if _, err := os.Stat(open[0]); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("folder %s left: %v", open[0], err)
					}
					open = open[1:]
				case "close":
					if err := h.close(); err != nil {
						t.Fatal(err)
					}
					if _, err := h.newFolder(1<<20, 1<<30); err == nil {
						t.Fatal("newFolder after close made a folder")
					}
				}
				// The home stays while folders are open, until close.
				entries, _ := os.ReadDir(parent)
				if want := len(open) > 0 || (made && !h.closed); (len(entries) == 1) != want {
					t.Fatalf("after step %d (%s): %d entries in %s, want home: %v", i, step, len(entries), parent, want)
				}
			}
			if m, err := capfs.Under(parent); err != nil || len(m) > 0 {
				t.Fatalf("mounts left: %v %v", m, err)
			}
		})
	}
}

// mountsAt counts the mounts whose mount point is dir.
func mountsAt(t *testing.T, dir string) int {
	t.Helper()
	m, err := capfs.Under(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range m {
		if p == dir {
			n++
		}
	}
	return n
}
