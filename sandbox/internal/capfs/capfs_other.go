//go:build !linux

package capfs

import "os"

// Mount fails: capped workspaces need Linux.
func Mount(dir string, size int64, uid, gid int) error { return ErrUnsupported }

// Resize fails: capped workspaces need Linux.
func Resize(dir string, size int64) error { return ErrUnsupported }

// Unmount does nothing.
func Unmount(dir string) error { return nil }

// RemoveAll removes dir.
func RemoveAll(dir string) error { return os.RemoveAll(dir) }

// Full reports false.
func Full(path string) bool { return false }

// Under returns nothing.
func Under(dir string) ([]string, error) { return nil, nil }
