//go:build linux

package local

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/legorl/legorl/sandbox/internal/capfs"
	"github.com/legorl/legorl/sandbox/internal/cgroupfs"
)

// A host process that dies without closing its sandboxes (killed, or a
// test binary stopped by its timeout) loses their processes (the parent-
// death signal) but leaves their folders, workspace mounts (tmpfs: memory
// held until unmounted) and cgroups behind. Sandbox folders and cgroups are
// named legorl-sandbox-HOSTPID-RANDOM, so the next backend on the machine
// unmounts and removes those whose host process is gone.

const namePrefix = "legorl-sandbox-"

// collectOrphans unmounts and removes the folders under dir, and removes
// the cgroups next to this process's own, of sandboxes whose host process
// is gone (capfs.Orphaned). Best effort.
func collectOrphans(dir string) {
	if dir == "" {
		dir = os.TempDir()
	}
	capfs.RemoveOrphans(dir, namePrefix)
	own, err := ownCgroups()
	if err != nil {
		return
	}
	var parents []string
	if _, err := os.Stat(filepath.Join(cgroupfs.Root, "cgroup.controllers")); err == nil {
		parents = append(parents, filepath.Join(cgroupfs.Root, own[""]))
	} else {
		for _, ctl := range []string{"memory", "pids", "cpu"} {
			if path, ok := own[ctl]; ok {
				parents = append(parents, filepath.Join(cgroupfs.Root, ctl, path))
			}
		}
	}
	for _, parent := range parents {
		groups, _ := filepath.Glob(filepath.Join(parent, namePrefix+"*"))
		for _, g := range groups {
			if capfs.Orphaned(filepath.Base(g), namePrefix) {
				syscall.Rmdir(g) // fails, harmlessly, while anything is inside
			}
		}
	}
}
