package storage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// smallDisk mounts a tmpfs of size bytes on a new folder and unmounts it
// when the test ends. It needs root (CAP_SYS_ADMIN); without it the test
// fails, it does not skip.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("mount a %d-byte tmpfs on %s: %v (the disk-full tests need root)", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a ballast file into dir until the disk is full, or n bytes
// when n > 0, and returns its path.
func fill(t *testing.T, dir string, n int) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for written := 0; n <= 0 || written < n; written += len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			if n <= 0 && errors.Is(err, syscall.ENOSPC) {
				return p
			}
			t.Fatal(err)
		}
	}
	return p
}

// wantDiskFull checks that err is a one-line ENOSPC error naming key.
func wantDiskFull(t *testing.T, err error, key string) {
	t.Helper()
	wantOneLine(t, err, key)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("error %q does not wrap ENOSPC", err)
	}
}

// TestDiskFull runs writers on a file store on a 16 MiB tmpfs that fills
// during the write: each fails with a one-line ENOSPC error naming the key,
// commits nothing and leaves no temporary file, and the same write
// completes once the space is freed.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	ref := storage.ManifestRef{RunID: "diskfull", Stage: "rollout"}
	key := ref.DataKey("segments", "big")
	rows := bigSegments() // about 6 MiB of Parquet
	tests := []struct {
		name string
		// run writes into the store on disk (a file store at disk/store)
		// and returns the error of the step that met the full disk.
		run func(t *testing.T, st *storage.FileStore, disk string) error
	}{
		{"data file put fills the disk", func(t *testing.T, st *storage.FileStore, disk string) error {
			_, err := storage.WriteFile(ctx, st, key, segmentsFooter("diskfull"), rows)
			return err
		}},
		{"writer's temporary file fills the disk", func(t *testing.T, st *storage.FileStore, disk string) error {
			w, err := storage.NewWriter[schemas.Segment](st, key, segmentsFooter("diskfull"), storage.WriterOptions{TempDir: disk})
			if err != nil {
				return err
			}
			if err := w.Write(rows); err != nil {
				w.Abort()
				return err
			}
			_, err = w.Close(ctx)
			return err
		}},
		{"manifest commit fills the disk", func(t *testing.T, st *storage.FileStore, disk string) error {
			e, err := storage.WriteFile(ctx, st, ref.DataKey("segments", "small"), segmentsFooter("diskfull"), smallSegments())
			if err != nil {
				t.Fatalf("the small file should fit: %v", err)
			}
			fill(t, disk, 0) // what is left
			_, err = storage.Commit(ctx, st, ref, []storage.FileEntry{e})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk := smallDisk(t, 16<<20)
			ballast := fill(t, disk, 12<<20) // 4 MiB left: less than the file
			st, err := storage.NewFileStore(filepath.Join(disk, "store"))
			if err != nil {
				t.Fatal(err)
			}
			err = tt.run(t, st, disk)
			if err == nil {
				t.Fatal("the write succeeded on a full disk")
			}
			wantKey := key
			if strings.Contains(tt.name, "manifest") {
				wantKey = ref.Key(1)
			}
			wantDiskFull(t, err, wantKey)
			t.Logf("full disk: %v", err)
			if _, err := storage.TableFiles(ctx, st, ref.RunID, "segments"); !errors.Is(err, storage.ErrNoData) {
				t.Fatalf("table files on the full disk: got %v, want ErrNoData", err)
			}
			if tmps := tempFiles(t, fileRoot(st)); len(tmps) != 0 {
				t.Errorf("temporary files left: %q", tmps)
			}

			// Space freed: the next run writes and commits the same file.
			os.Remove(ballast)
			os.Remove(filepath.Join(disk, "ballast"))
			e, err := storage.WriteFile(ctx, st, key, segmentsFooter("diskfull"), rows)
			if err != nil {
				t.Fatalf("write after freeing space: %v", err)
			}
			mustCommit(t, st, ref, e)
			files, err := storage.TableFiles(ctx, st, ref.RunID, "segments")
			if err != nil || len(files) != 1 || files[0] != e {
				t.Fatalf("table files: %+v, %v; want the one file", files, err)
			}
			readRows(t, st, files[0])
		})
	}
}
