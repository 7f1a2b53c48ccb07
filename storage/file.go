package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// FileStore is a Store over a local folder. Puts write a hidden temporary
// file in the destination folder, fsync it, then hard-link it to its final
// name, which fails if the name exists: the object appears whole or not at
// all, and never replaces another.
type FileStore struct {
	root string
}

// tmpPrefix marks in-progress files; List never returns them.
const tmpPrefix = ".tmp-"

// NewFileStore opens (creating if needed) the folder at root.
func NewFileStore(root string) (*FileStore, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("storage: file store %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("storage: file store: %w", err)
	}
	return &FileStore{root: abs}, nil
}

// URI implements Store.
func (s *FileStore) URI() string { return "file://" + s.root }

func (s *FileStore) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if strings.HasPrefix(filepath.Base(key), tmpPrefix) {
		return "", fmt.Errorf("%w: %q uses the reserved prefix %s", ErrInvalidKey, key, tmpPrefix)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put implements Putter.
func (s *FileStore) Put(ctx context.Context, key string, body io.Reader, size int64) (err error) {
	dst, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("storage: put %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("storage: put %s: %w", key, err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // the hard link, if made, keeps the data
	}()
	n, err := io.Copy(tmp, ctxReader{ctx, body})
	if err != nil {
		return fmt.Errorf("storage: put %s: %w", key, err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("storage: put %s: wrote %d bytes, expected %d", key, n, size)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("storage: put %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("storage: put %s: %w", key, err)
	}
	if err := os.Link(tmp.Name(), dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, key)
		}
		return fmt.Errorf("storage: put %s: %w", key, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("storage: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("storage: sync %s: %w", dir, err)
	}
	return nil
}

// Get implements Getter.
func (s *FileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	// ENOTDIR: a parent of the key is an object ("a" when asked for "a/b").
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get %s: %w", key, err)
	}
	// A folder is a key prefix, not an object (as on S3).
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("storage: get %s: %w", key, err)
		}
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return f, nil
}

// List implements Lister. The prefix is matched on whole keys, as S3 does.
func (s *FileStore) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// Skip folders that cannot hold a key with the prefix.
			if rel != "." && !strings.HasPrefix(rel+"/", prefix) && !strings.HasPrefix(prefix, rel+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) || !d.Type().IsRegular() {
			return nil
		}
		if strings.HasPrefix(rel, prefix) {
			keys = append(keys, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: list %q: %w", prefix, err)
	}
	sort.Strings(keys)
	return keys, nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
