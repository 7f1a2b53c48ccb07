//go:build unix

package capfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A host process that dies without closing its sandboxes leaves their
// folders behind, each with a tmpfs mounted on its workspace (memory, held
// until unmounted). Both backends name those folders PREFIX-HOSTPID-RANDOM,
// so the next backend to create a sandbox can tell, by the pid, which
// belong to a host process that is gone.

// Orphaned says whether name (a folder's or a cgroup's base name) is
// prefix followed by the pid of a host process that no longer exists. A
// name of this process is never orphaned.
func Orphaned(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// RemoveOrphans unmounts and removes (RemoveAll) the orphaned folders named
// prefix* under dir. Best effort: a folder that cannot be removed is left
// for the next try.
func RemoveOrphans(dir, prefix string) {
	entries, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
	for _, p := range entries {
		if Orphaned(filepath.Base(p), prefix) {
			RemoveAll(p) // unmounts the workspace first
		}
	}
}
