//go:build linux

package local

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// A host process that dies without closing its sandboxes (killed, or a
// test binary stopped by its timeout) loses their processes (the parent-
// death signal) but leaves their folders, workspace mounts (tmpfs: memory
// held until unmounted) and cgroups behind. Sandbox folders and cgroups are
// named legorl-sandbox-HOSTPID-RANDOM, so the next backend on the machine
// unmounts and removes those whose host process is gone.

const namePrefix = "legorl-sandbox-"

// ownerPid returns the host pid a sandbox name carries, 0 if none.
func ownerPid(name string) int {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// orphaned says whether a sandbox name belongs to a host process that no
// longer exists.
func orphaned(name string) bool {
	pid := ownerPid(name)
	if pid == 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// collectOrphans unmounts and removes the folders under dir, and removes
// the cgroups next to
// this process's own, of sandboxes whose host process is gone. Best effort.
func collectOrphans(dir string) {
	if dir == "" {
		dir = os.TempDir()
	}
	entries, _ := filepath.Glob(filepath.Join(dir, namePrefix+"*"))
	for _, p := range entries {
		if orphaned(filepath.Base(p)) {
			capfs.RemoveAll(p) // unmounts the workspace first
		}
	}
	own, err := ownCgroups()
	if err != nil {
		return
	}
	var parents []string
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		parents = append(parents, filepath.Join(cgroupRoot, own[""]))
	} else {
		for _, ctl := range []string{"memory", "pids", "cpu"} {
			if path, ok := own[ctl]; ok {
				parents = append(parents, filepath.Join(cgroupRoot, ctl, path))
			}
		}
	}
	for _, parent := range parents {
		groups, _ := filepath.Glob(filepath.Join(parent, namePrefix+"*"))
		for _, g := range groups {
			if orphaned(filepath.Base(g)) {
				syscall.Rmdir(g) // fails, harmlessly, while anything is inside
			}
		}
	}
}
