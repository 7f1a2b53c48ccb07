package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// verified checks the finished checkpoint dir (an update's, policy version
// v, so it must have a lineage.json) against the sha256 its lineage
// records, before a resumed run trusts it. A damaged folder is rebuilt
// from the copy the loop published to the store, when that copy verifies;
// otherwise the run stops with one line naming the damaged file.
func (l *looper) verified(ctx context.Context, dir string, v int64) error {
	err := verifyUpdate(dir)
	if err == nil {
		return nil
	}
	if !errors.Is(err, checkpoint.ErrDamaged) && !errors.Is(err, checkpoint.ErrHeader) {
		return err
	}
	if rerr := l.restore(ctx, dir, v); rerr != nil {
		return fmt.Errorf("%w; not rebuilt from the store: %v", err, rerr)
	}
	l.logf("%v: rebuilt from the store's copy (%s)", err, schemas.CheckpointKey(l.cfg.Run, v, ""))
	return nil
}

// verifyUpdate is checkpoint.Verify for a checkpoint an update wrote: one
// without a lineage.json is damaged, not an initial checkpoint.
func verifyUpdate(dir string) error {
	h, err := checkpoint.Verify(dir)
	if err == nil && h == nil {
		return fmt.Errorf("%w: %s is missing", checkpoint.ErrDamaged, filepath.Join(dir, checkpoint.File))
	}
	return err
}

// restore replaces dir with the store's copy of checkpoint version v,
// downloaded beside it and verified first, so dir is either the old
// folder or a whole verified copy.
func (l *looper) restore(ctx context.Context, dir string, v int64) error {
	prefix := schemas.CheckpointKey(l.cfg.Run, v, "")
	keys, err := l.st.List(ctx, prefix)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: nothing published under %s", storage.ErrNotFound, prefix)
	}
	tmp := dir + ".restore"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for _, k := range keys {
		if err := getFile(ctx, l.st, k, filepath.Join(tmp, path.Base(k))); err != nil {
			return err
		}
	}
	if err := verifyUpdate(tmp); err != nil {
		return fmt.Errorf("the store's copy: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// getFile copies the object at key to a new file at p.
func getFile(ctx context.Context, st storage.Getter, key, p string) error {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("get %s: %w", key, err)
	}
	return f.Close()
}
