//go:build linux

package local

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// copyTree copies the folder src into the empty folder dst (a fresh
// workspace mount), owned by uid:gid. Regular files, folders and symlinks (as links, never followed)
// are copied with their modes and modification times; sockets, fifos and
// devices are skipped.
func copyTree(src, dst string, uid, gid int) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		t := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			if rel != "." { // dst itself exists
				if err := os.Mkdir(t, 0o700); err != nil {
					return err
				}
			}
			if err := os.Lchown(t, uid, gid); err != nil {
				return err
			}
			// Mode and times are set on the way down; times of folders
			// change as entries are added, which git does not look at.
			return os.Chmod(t, mode.Perm()|mode&(os.ModeSticky|os.ModeSetgid))
		case mode&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, t); err != nil {
				return err
			}
			return os.Lchown(t, uid, gid)
		case mode.IsRegular():
			return copyFile(p, t, mode.Perm(), fi.ModTime(), uid, gid)
		default:
			return nil
		}
	})
}

func copyFile(src, dst string, perm os.FileMode, mtime time.Time, uid, gid int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Chown(uid, gid); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst, mtime, mtime)
}
