package grade

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/legorl/legorl/tasks"
)

// DiffLimits bound what TakeDiff reads and returns.
type DiffLimits struct {
	tasks.PatchLimits       // the diff itself
	MaxFileBytes      int64 // one file in the workspace. Defaults to 1 MiB.
	MaxEntries        int   // files and folders walked. Defaults to 100000.
}

func (l DiffLimits) withDefaults() DiffLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = tasks.DefaultPatchLimits.MaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = tasks.DefaultPatchLimits.MaxFiles
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 1 << 20
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 100000
	}
	return l
}

// ErrSpecialFile refuses a FIFO, socket or device in the workspace.
var ErrSpecialFile = fmt.Errorf("%w: special file", tasks.ErrPatch)

// ignored reports whether a workspace entry is left out of the diff: git's
// folder, and caches that test runs leave behind.
func ignored(name string, dir bool) bool {
	if dir {
		return name == ".git" || name == "__pycache__" || name == ".pytest_cache" || name == ".mypy_cache"
	}
	return strings.HasSuffix(name, ".pyc") || strings.HasSuffix(name, ".pyo") || name == ".git"
}

// ReadWorkspace reads the files of a workspace into a Tree without running
// anything and without following any symlink: it walks through os.Root (no
// path resolves outside dir), records symlinks as symlinks (their target is
// data), opens regular files with O_NOFOLLOW|O_NONBLOCK and checks the
// opened file is still regular (a FIFO swapped in cannot block it), and
// refuses special files and files over the limit, with typed reasons
// wrapping tasks.ErrPatch.
func ReadWorkspace(dir string, limits DiffLimits) (tasks.Tree, error) {
	limits = limits.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("grade: workspace: %w", err)
	}
	defer root.Close()
	t := tasks.Tree{}
	entries := 0
	var walk func(rel string) error
	walk = func(rel string) error {
		d, err := root.Open(rel)
		if err != nil {
			return fmt.Errorf("grade: workspace %s: %w", rel, err)
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return fmt.Errorf("grade: workspace %s: %w", rel, err)
		}
		for _, name := range names {
			entries++
			if entries > limits.MaxEntries {
				return fmt.Errorf("%w: more than %d workspace entries", tasks.ErrPatchTooLarge, limits.MaxEntries)
			}
			p := name
			if rel != "." {
				p = rel + "/" + name
			}
			fi, err := root.Lstat(p)
			if err != nil {
				return fmt.Errorf("grade: workspace %s: %w", p, err)
			}
			switch m := fi.Mode(); {
			case m.IsDir():
				if ignored(name, true) {
					continue
				}
				if err := walk(p); err != nil {
					return err
				}
			case m&fs.ModeSymlink != 0:
				target, err := root.Readlink(p)
				if err != nil {
					return fmt.Errorf("grade: workspace %s: %w", p, err)
				}
				if err := tasks.CheckSymlink(p, target); err != nil {
					return err
				}
				t[p] = tasks.File{Data: []byte(target), Mode: tasks.ModeSymlink}
			case m.IsRegular():
				if ignored(name, false) {
					continue
				}
				data, mode, err := readRegular(root, p, limits.MaxFileBytes)
				if err != nil {
					return err
				}
				t[p] = tasks.File{Data: data, Mode: mode}
			default:
				return fmt.Errorf("%w: %s (%s)", ErrSpecialFile, p, m.Type())
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return nil, err
	}
	return t, nil
}

func readRegular(root *os.Root, p string, max int64) ([]byte, uint32, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrSpecialFile, p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("grade: workspace %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%w: %s (%s)", ErrSpecialFile, p, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, 0, fmt.Errorf("%w: %s is %d bytes > %d", tasks.ErrPatchTooLarge, p, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, 0, fmt.Errorf("grade: workspace %s: %w", p, err)
	}
	if int64(len(data)) > max {
		return nil, 0, fmt.Errorf("%w: %s grew past %d bytes", tasks.ErrPatchTooLarge, p, max)
	}
	mode := tasks.ModeFile
	if fi.Mode()&0o111 != 0 {
		mode = tasks.ModeExec
	}
	return data, mode, nil
}

// TakeDiff returns the agent's changes to a workspace as a git-style diff
// against the pristine tree, computed in Go: nothing the agent controls
// runs (no git, no hooks, no filters), no link is followed, and binary,
// oversized or escaping changes are refused with typed reasons (errors
// wrapping tasks.ErrPatch; the grade outcome is patch_invalid).
func TakeDiff(pristine tasks.Tree, workspace string, limits DiffLimits) (string, error) {
	limits = limits.withDefaults()
	cur, err := ReadWorkspace(workspace, limits)
	if err != nil {
		return "", err
	}
	// Ignored names in the pristine tree are ignored on both sides.
	base := tasks.Tree{}
	for p, f := range pristine {
		skip := false
		parts := strings.Split(p, "/")
		for i, part := range parts {
			if ignored(part, i < len(parts)-1) {
				skip = true
			}
		}
		if !skip {
			base[p] = f
		}
	}
	d, err := tasks.Diff(base, cur)
	if err != nil {
		return "", err
	}
	if len(d) > limits.MaxBytes {
		return "", fmt.Errorf("%w: diff is %d bytes > %d", tasks.ErrPatchTooLarge, len(d), limits.MaxBytes)
	}
	if files, err := tasks.ParsePatch(d, limits.PatchLimits); err != nil {
		return "", err
	} else if len(files) > limits.MaxFiles {
		return "", fmt.Errorf("%w: %d files", tasks.ErrPatchTooLarge, len(files))
	}
	return d, nil
}

// writeNoFollow writes data at repository path p under root, replacing any
// symlink or non-folder on the way (so nothing planted redirects it).
func writeNoFollow(root *os.Root, p string, data []byte, perm os.FileMode) error {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case !fi.IsDir():
			if err := root.RemoveAll(dir); err != nil {
				return err
			}
		default:
			continue
		}
		if err := root.Mkdir(dir, 0o755); err != nil {
			return err
		}
	}
	if err := root.RemoveAll(p); err != nil {
		return err
	}
	return root.WriteFile(p, data, perm)
}

// removeNoFollow removes repository path p under root if it exists, never
// through a symlinked parent.
func removeNoFollow(root *os.Root, p string) error {
	dir := path.Dir(p)
	if dir != "." {
		fi, err := root.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return nil // nothing real there
		}
	}
	return root.RemoveAll(p)
}
