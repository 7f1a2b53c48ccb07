package docker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// copyWorkspace fills the empty folder dst with a private copy of src
// (links, modes and times kept; nothing outside src followed).
func copyWorkspace(ctx context.Context, src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("workspace: %s is not a folder", src)
	}
	// cp -a copies symbolic links as links and never follows them;
	// --reflink=auto shares blocks where the file system can.
	out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", "--", src+"/.", dst+"/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("workspace: copy %s: %v: %s", src, err, out)
	}
	return nil
}

// chownTree gives everything under dst to uid:gid, the sandbox user, so
// programs inside can write it.
func chownTree(dst string, uid, gid int) error {
	return filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, uid, gid); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		return nil
	})
}
