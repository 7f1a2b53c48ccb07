package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// ErrDamaged: a file of a checkpoint folder is missing, or its sha256 is
// not the one its lineage.json records (a flipped byte, a truncated
// write, a file from another checkpoint).
var ErrDamaged = errors.New("checkpoint: damaged")

// Verify checks the checkpoint folder dir against its lineage.json: every
// file the header's Files lists must be there with that sha256. It returns
// the header (nil for a folder without lineage.json, an initial checkpoint
// with nothing recorded to check), ErrHeader when lineage.json is
// unreadable, or ErrDamaged naming the first bad file, in name order.
// Every loader of a checkpoint calls it before trusting a byte of the
// folder: model.Load (serving, rollouts, evals, the trainer, audits) and
// the loop when it resumes past a finished update.
func Verify(dir string) (*Header, error) {
	h, err := Read(dir)
	if err != nil || h == nil {
		return h, err
	}
	names := make([]string, 0, len(h.Files))
	for n := range h.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if n != filepath.Base(n) || n == "." || n == ".." {
			return nil, fmt.Errorf("%w: %s lists %q, not a file of the folder", ErrHeader, filepath.Join(dir, File), n)
		}
		path := filepath.Join(dir, n)
		got, err := hashFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is missing (%s lists it)", ErrDamaged, path, File)
		}
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrDamaged, path, err)
		}
		if got != h.Files[n] {
			return nil, fmt.Errorf("%w: %s has sha256 %.12s, %s records %.12s", ErrDamaged, path, got, File, h.Files[n])
		}
	}
	return h, nil
}

// hashFile returns the hex sha256 of the regular file at path.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", err
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// VerifiedVersion is Version of a folder that Verify passes: what a
// command that launches workers on a checkpoint calls, so a damaged one
// stops it with one line before a worker starts.
func VerifiedVersion(dir string) (int64, error) {
	h, err := Verify(dir)
	if err != nil || h == nil {
		return 0, err
	}
	return h.Version, nil
}
