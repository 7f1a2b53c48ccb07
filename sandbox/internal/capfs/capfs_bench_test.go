//go:build linux

package capfs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkMountRemove is what the cap adds to a sandbox's life: mount a
// 1 GiB tmpfs on a fresh folder, then unmount it and remove the folder.
func BenchmarkMountRemove(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting a tmpfs needs root")
	}
	root := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		dir := filepath.Join(root, strconv.Itoa(i))
		ws := filepath.Join(dir, "workspace")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := Mount(ws, 1<<30, 1000, 1000); err != nil {
			b.Fatal(err)
		}
		if err := RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMkdirRemove is the anchor: the same folders without the mount.
func BenchmarkMkdirRemove(b *testing.B) {
	root := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
	}
}
