//go:build linux

package capfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestMountCapsWrites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "d")
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 1 << 20
	if err := Mount(ws, size, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(ws) })
	var st syscall.Stat_t
	if err := syscall.Stat(ws, &st); err != nil || st.Uid != 4242 || st.Gid != 4343 {
		t.Fatalf("root owner %d:%d, %v", st.Uid, st.Gid, err)
	}
	if m, err := Under(dir); err != nil || len(m) != 1 || m[0] != ws {
		t.Fatalf("Under: %v %v, want [%s]", m, err, ws)
	}
	if Full(ws) {
		t.Fatal("empty workspace is full")
	}
	err := os.WriteFile(filepath.Join(ws, "big"), make([]byte, 2*size), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing twice the size: %v, want ENOSPC", err)
	}
	if !Full(ws) {
		t.Fatal("Full is false after ENOSPC")
	}
	if err := RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if m, _ := Under(dir); len(m) > 0 {
		t.Fatalf("mounts left: %v", m)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left: %v", dir, err)
	}
	if err := Unmount(ws); err != nil {
		t.Fatalf("unmount of a removed folder: %v", err)
	}
}

func TestInodes(t *testing.T) {
	for _, c := range []struct{ size, want int64 }{{1 << 20, 4096}, {1 << 30, 262144}} {
		if got := Inodes(c.size); got != c.want {
			t.Errorf("Inodes(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`: "/tmp/a b",
		`/plain`:      "/plain",
		`/x\134y`:     `/x\y`,
		`/end\04`:     `/end\04`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestResize: a tmpfs mounted with one size takes another, up or down, its
// owner kept; shrinking below what it holds fails.
func TestResize(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	tests := []struct {
		name      string
		from, to  int64
		holds     int // bytes written before the resize
		wantError bool
	}{
		{"grow", 1 << 20, 8 << 20, 0, false},
		{"shrink empty", 8 << 20, 1 << 20, 0, false},
		{"shrink below the files", 8 << 20, 1 << 20, 4 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "workspace")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := Mount(ws, tt.from, 4242, 4343); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { Unmount(ws) })
			if tt.holds > 0 {
				if err := os.WriteFile(filepath.Join(ws, "f"), make([]byte, tt.holds), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := Resize(ws, tt.to)
			if (err != nil) != tt.wantError {
				t.Fatalf("Resize: %v, want error %v", err, tt.wantError)
			}
			if tt.wantError {
				return
			}
			var fs syscall.Statfs_t
			if err := syscall.Statfs(ws, &fs); err != nil {
				t.Fatal(err)
			}
			if got := int64(fs.Blocks) * fs.Bsize; got != tt.to {
				t.Errorf("size %d, want %d", got, tt.to)
			}
			if fs.Files != uint64(Inodes(tt.to)) {
				t.Errorf("files %d, want %d", fs.Files, Inodes(tt.to))
			}
			var st syscall.Stat_t
			if err := syscall.Stat(ws, &st); err != nil || st.Uid != 4242 || st.Gid != 4343 {
				t.Errorf("root owner %d:%d, %v", st.Uid, st.Gid, err)
			}
			err = os.WriteFile(filepath.Join(ws, "big"), make([]byte, tt.to+1), 0o644)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("writing past the new size: %v, want ENOSPC", err)
			}
		})
	}
}
