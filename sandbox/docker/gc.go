package docker

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// A host process that dies without closing its sandboxes leaves their
// workspace folders behind, each with a tmpfs mounted on it (memory, held
// until unmounted). The folders are named legorl-docker-HOSTPID-RANDOM, so
// the next backend to create a sandbox unmounts and removes those whose
// host process is gone. (Containers are the engine's: they carry LabelKey.)

const dirPrefix = "legorl-docker-"

// orphaned says whether a workspace folder name belongs to a host process
// that no longer exists.
func orphaned(name string) bool {
	rest, ok := strings.CutPrefix(name, dirPrefix)
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

// collectOrphans unmounts and removes the orphaned folders under dir. Best effort.
func collectOrphans(dir string) {
	entries, _ := filepath.Glob(filepath.Join(dir, dirPrefix+"*"))
	for _, p := range entries {
		if orphaned(filepath.Base(p)) {
			capfs.RemoveAll(p)
		}
	}
}
