package grade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// layerCache makes dst a writable Go build cache that starts as the seed:
// every folder of the seed made anew (writable by the sandbox's user),
// every file hard-linked (copied when the grader is not root, or dst is
// on another file system). The go command writes new entries as new
// files, so what a grade compiles lands in dst; the seed's files stay
// read-only and owned by the grader's user, so neither the go command nor
// the tests (a different, unprivileged user) can change them through the
// links. trim.txt is written fresh so that the go command never trims the
// layer (its entries' times are the seed's).
func layerCache(seed, dst string) error {
	link := os.Geteuid() == 0
	err := filepath.WalkDir(seed, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(seed, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.Mkdir(out, 0o777); err != nil {
				return err
			}
			return os.Chmod(out, 0o777) // past the umask: the sandbox's user writes here
		case !d.Type().IsRegular() || rel == "trim.txt":
			return nil
		}
		if link {
			if err := os.Link(p, out); err == nil {
				return nil
			} else if !errors.Is(err, unix.EXDEV) {
				return err
			}
			link = false
		}
		return copyFile(p, out)
	})
	if err == nil {
		err = os.WriteFile(filepath.Join(dst, "trim.txt"), []byte(strconv.FormatInt(time.Now().Unix(), 10)), 0o644)
	}
	if err != nil {
		return fmt.Errorf("grade: layer over the go build cache: %w", err)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// lockFile takes an exclusive flock on path (created if missing), waiting
// until it is free or ctx ends, and returns its release.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
