// Package capfs caps the disk use of a sandbox's workspace: the host folder
// that holds a sandbox's workspace copy gets a tmpfs of a fixed size mounted
// on it before the copy is made, so the host (HostWorkspace, diffs) and the
// sandbox (a bind mount of the folder) see the same files, writes past the
// size fail with ENOSPC, and nothing the sandbox writes reaches the host's
// disk.
//
// tmpfs pages are memory: the kernel charges each page to the memory cgroup
// of the process that wrote it, so what a sandbox writes into its workspace
// also counts against its memory limit, and the task's own files (copied in
// by the host) count against the host process's. The file count is capped
// too (Inodes), since empty files take kernel memory but no size.
//
// Linux only; elsewhere every function fails with ErrUnsupported or does
// nothing.
package capfs

import "errors"

// ErrUnsupported: capped workspaces need Linux (tmpfs and mount(2)).
var ErrUnsupported = errors.New("capfs: not supported on this system")

// Inodes is the file count a tmpfs of size bytes allows: one per 4 KiB, at
// least 4096.
func Inodes(size int64) int64 { return max(size/4096, 4096) }
