package transforms

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Sentinel errors.
var (
	// ErrConflict: a key already holds other bytes than a put meant to
	// write there (write-once, and not a retry of the same content).
	ErrConflict = errors.New("transforms: object exists with other content")
	// ErrAccounting: the commit found launched != completed + masked, a
	// rollout missing or ended twice, or a group listed twice.
	ErrAccounting = errors.New("transforms: rollout accounting failed")
	// ErrFault is what a Config.TestFault injects.
	ErrFault = errors.New("transforms: injected fault")
)

// putAttempts bounds the tries of one put (transient errors only).
const putAttempts = 4

// sameContent is a Putter over a store whose put of bytes that the key
// already holds succeeds: a put retried after its reply was lost, or a
// retried bundle writing the same bytes again, is not an error. The bytes
// are compared by sha256. A put that fails otherwise is retried a few
// times (the store's puts are atomic, so a failed try left nothing or the
// whole object).
type sameContent struct {
	st storage.Store
}

// Put implements storage.Putter.
func (p sameContent) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	rs, ok := body.(io.ReadSeeker)
	if !ok { // spool to an unlinked temp file, to hash it and to retry
		f, err := os.CreateTemp("", "legorl-put-*")
		if err != nil {
			return fmt.Errorf("transforms: put %s: %w", key, err)
		}
		os.Remove(f.Name())
		defer f.Close()
		if _, err := io.Copy(f, body); err != nil {
			return fmt.Errorf("transforms: put %s: %w", key, err)
		}
		rs = f
	}
	if _, err := rs.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("transforms: put %s: %w", key, err)
	}
	want, err := hashFrom(rs)
	if err != nil {
		return fmt.Errorf("transforms: put %s: %w", key, err)
	}
	var last error
	for try := range putAttempts {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try) * 200 * time.Millisecond):
			}
		}
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("transforms: put %s: %w", key, err)
		}
		err := p.st.Put(ctx, key, rs, size)
		if err == nil {
			return nil
		}
		if errors.Is(err, storage.ErrExists) {
			got, herr := storage.HashObject(ctx, p.st, key)
			if herr != nil {
				return fmt.Errorf("transforms: put %s: compare with the existing object: %w", key, herr)
			}
			if got == want {
				return nil
			}
			return fmt.Errorf("%w: %s has sha256 %s, the put %s", ErrConflict, key, got[:12], want[:12])
		}
		if ctx.Err() != nil || errors.Is(err, storage.ErrInvalidKey) {
			return err
		}
		last = err
	}
	return last
}

func hashFrom(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// claim is a group's commit point in the store (see the package doc).
type claim struct {
	GroupID  string              `json:"group_id"`
	TaskID   string              `json:"task_id"`
	Attempt  string              `json:"attempt"`
	Files    []storage.FileEntry `json:"files"`
	Rollouts []Outcome           `json:"rollouts"`
}

// ClaimKey is the key of a group's claim.
func ClaimKey(runID, stage string, iteration int32, groupID string) string {
	return fmt.Sprintf("%s%s.json", ClaimPrefix(runID, stage, iteration), groupID)
}

// ClaimPrefix is the key prefix of a stage's claims in an iteration
// (progress: one claim per finished group).
func ClaimPrefix(runID, stage string, iteration int32) string {
	return schemas.ClaimPrefix(runID, stage, iteration)
}

// ReadClaim returns the group result a claim holds; found is false when
// the group has none.
func ReadClaim(ctx context.Context, st storage.Getter, key string) (r GroupResult, found bool, err error) {
	rc, err := st.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return GroupResult{}, false, nil
	}
	if err != nil {
		return GroupResult{}, false, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 16<<20))
	if err != nil {
		return GroupResult{}, false, fmt.Errorf("transforms: read claim %s: %w", key, err)
	}
	var c claim
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return GroupResult{}, false, fmt.Errorf("%w: claim %s: %v", storage.ErrCorrupt, key, err)
	}
	return GroupResult{GroupID: c.GroupID, TaskID: c.TaskID, Attempt: c.Attempt, Files: c.Files, Rollouts: c.Rollouts}, true, nil
}

// putClaim puts a group's claim write-once and returns the claim that holds:
// this one, or the one an earlier attempt put first.
func putClaim(ctx context.Context, st storage.Store, key string, r GroupResult) (GroupResult, error) {
	body, err := json.MarshalIndent(claim{GroupID: r.GroupID, TaskID: r.TaskID, Attempt: r.Attempt, Files: r.Files, Rollouts: r.Rollouts}, "", "  ")
	if err != nil {
		return GroupResult{}, err
	}
	err = sameContent{st}.Put(ctx, key, bytes.NewReader(body), int64(len(body)))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, ErrConflict) {
		return GroupResult{}, err
	}
	won, found, rerr := ReadClaim(ctx, st, key)
	if rerr != nil || !found {
		return GroupResult{}, fmt.Errorf("transforms: claim %s: %w (then: %v)", key, err, rerr)
	}
	won.Reused = true
	return won, nil
}

// newAttempt returns a random attempt token.
func newAttempt() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shard is what one group attempt writes.
type shard struct {
	rollouts []schemas.Rollout
	segments []schemas.Segment
	steps    []schemas.Step
}

// writeShard writes a group attempt's rows, one file per table (steps and
// segments first, rollouts last), under keys that carry the attempt token.
func writeShard(ctx context.Context, st storage.Store, ref storage.ManifestRef, name string, foot func(schemas.Table) schemas.Footer, sh shard) ([]storage.FileEntry, error) {
	put := sameContent{st}
	var files []storage.FileEntry
	add := func(e storage.FileEntry, err error) error {
		if err == nil {
			files = append(files, e)
		}
		return err
	}
	if len(sh.steps) > 0 {
		if err := add(storage.WriteFile(ctx, put, ref.DataKey(string(schemas.TableSteps), name), foot(schemas.TableSteps), sh.steps)); err != nil {
			return nil, err
		}
	}
	if len(sh.segments) > 0 {
		if err := add(storage.WriteFile(ctx, put, ref.DataKey(string(schemas.TableSegments), name), foot(schemas.TableSegments), sh.segments)); err != nil {
			return nil, err
		}
	}
	if err := add(storage.WriteFile(ctx, put, ref.DataKey(string(schemas.TableRollouts), name), foot(schemas.TableRollouts), sh.rollouts)); err != nil {
		return nil, err
	}
	return files, nil
}

// PutSame puts body at key write-once, as the pipelines' own writes do: a
// key that already holds the same bytes (sha256) counts as put, other
// bytes are ErrConflict, and transient failures are retried. For writers
// outside the pipelines that must be safe to re-run (the loop's
// checkpoint publication).
func PutSame(ctx context.Context, st storage.Store, key string, body io.Reader, size int64) error {
	return sameContent{st}.Put(ctx, key, body, size)
}

// ReadJSON reads the JSON object a pipeline stored at key (a report, an
// eval table) into v; what names it in errors. Undecodable bytes are
// storage.ErrCorrupt.
func ReadJSON(ctx context.Context, st storage.Getter, key, what string, v any) error {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s %s: %v", storage.ErrCorrupt, what, key, err)
	}
	return nil
}
