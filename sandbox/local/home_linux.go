//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// home is the folder that holds a backend's sandbox folders: a small tmpfs
// mounted once per backend on Options.Dir/legorl-sandbox-HOSTPID-RANDOM.
// Making and removing a sandbox's folder there touches no disk, and a
// sandbox's teardown unmounts its workspace by name and removes two empty
// folders, instead of reading the mount table and walking the folder.
// A killed host leaves the home with the workspaces mounted in it;
// collectOrphans unmounts and removes it by its name.
type home struct {
	parent string // Options.Dir

	mu     sync.Mutex
	dir    string // "" until made, and once removed
	closed bool   // the backend is closed: the last folder out removes dir
}

// Sizes of the home tmpfs: folders only, two inodes per sandbox.
const (
	homeBytes  = 1 << 20
	homeInodes = 1 << 16
)

// newFolder makes a sandbox's folder, making the home first if need be,
// and mounts its workspace, dir/workspace: a tmpfs of size bytes owned by
// uid (capfs.Mount). Every folder in the home has its workspace mounted,
// which keeps the home from being unmounted (see remove). The folder's
// name, legorl-sandbox-HOSTPID-RANDOM-RANDOM, names its cgroups too.
func (h *home) newFolder(size int64, uid int) (dir string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return "", errors.New("the backend is closed")
	}
	if h.dir == "" {
		if h.dir, err = makeHome(h.parent); err != nil {
			return "", err
		}
	}
	dir, err = os.MkdirTemp(h.dir, filepath.Base(h.dir)+"-")
	if err != nil {
		return "", fmt.Errorf("folder: %w", err)
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("folder: %w", err)
	}
	if err := capfs.Mount(ws, size, uid, uid); err != nil {
		os.Remove(ws)
		os.Remove(dir)
		return "", fmt.Errorf("workspace: %w", err)
	}
	return dir, nil
}

// makeHome makes the home folder in parent (os.TempDir() when "") and
// mounts its tmpfs.
func makeHome(parent string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, namePrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("folder: %w", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", homeBytes, homeInodes)
	if err := unix.Mount("legorl-sandboxes", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("folder: mount a tmpfs on %s: %w", dir, err)
	}
	return dir, nil
}

// removeFolder unmounts a sandbox's workspace (with whatever was mounted
// below it) and removes its two folders, which are then empty: nothing is
// ever removed through a workspace that is still mounted. Once the backend
// is closed, the last folder out removes the home.
func (h *home) removeFolder(dir string) error {
	ws := filepath.Join(dir, "workspace")
	if err := capfs.Unmount(ws); err != nil {
		return err
	}
	for _, p := range []string{ws, dir} {
		if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.remove()
	}
	return nil
}

// close removes the home unless sandboxes still have folders in it; the
// last of them removes it then (removeFolder). newFolder fails afterwards.
func (h *home) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return h.remove()
}

// remove unmounts and removes the home, unless a sandbox's workspace is
// still mounted in it (EBUSY). h.mu is held.
func (h *home) remove() error {
	if h.dir == "" {
		return nil
	}
	switch err := unix.Unmount(h.dir, 0); {
	case errors.Is(err, unix.EBUSY):
		return nil
	case err != nil && !errors.Is(err, unix.EINVAL):
		return fmt.Errorf("unmount %s: %w", h.dir, err)
	}
	if err := os.Remove(h.dir); err != nil {
		return err
	}
	h.dir = ""
	return nil
}
