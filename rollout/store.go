package rollout

import (
	"context"
	"errors"
	"fmt"

	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// WriteRows writes one rollout's rows to the store, one file per table
// named after the rollout (write-once; segments and steps only when there
// are some), and commits them to the rollout stage's manifest of the
// row's iteration. codeVersion goes into every file's footer.
func WriteRows(ctx context.Context, st storage.Store, row schemas.Rollout, segs []schemas.Segment, steps []schemas.Step, codeVersion string) error {
	ref := storage.ManifestRef{RunID: row.RunID, Iteration: int(row.Iteration), Stage: schemas.StageRollout}
	foot := func(t schemas.Table) schemas.Footer {
		return schemas.Footer{SchemaVersion: schemas.Version, Table: t, RunID: row.RunID, ConfigHash: "legorl-rollout",
			PolicyVersion: row.PolicyVersion, CodeVersion: codeVersion}
	}
	var files []storage.FileEntry
	add := func(e storage.FileEntry, err error) error {
		if err == nil {
			files = append(files, e)
		}
		return err
	}
	if err := add(storage.WriteFile(ctx, st, ref.DataKey(string(schemas.TableRollouts), row.RolloutID), foot(schemas.TableRollouts), []schemas.Rollout{row})); err != nil {
		return err
	}
	if len(segs) > 0 {
		if err := add(storage.WriteFile(ctx, st, ref.DataKey(string(schemas.TableSegments), row.RolloutID), foot(schemas.TableSegments), segs)); err != nil {
			return err
		}
	}
	if len(steps) > 0 {
		if err := add(storage.WriteFile(ctx, st, ref.DataKey(string(schemas.TableSteps), row.RolloutID), foot(schemas.TableSteps), steps)); err != nil {
			return err
		}
	}
	_, err := storage.Commit(ctx, st, ref, files)
	return err
}

// Rotator hands over what a proxy rollout recorded so far and starts it
// afresh, with no call lost between (*proxy.Proxy is one).
type Rotator interface {
	Rotate(id string) (proxy.Record, error)
}

// Recorder writes what a served rollout (`legorl serve`'s default one)
// recorded: each Flush rotates it and writes its segments as one file
// under stage serve, iteration 0 of the run, with the rollout id
// "serve-NNNNNN" of the flush, so that ids never repeat; the number
// continues after what earlier sessions committed. A nil Store records
// nothing.
type Recorder struct {
	Store       storage.Store
	RunID       string
	CodeVersion string

	n, files, segments int
}

// Flush writes what the proxy rollout id recorded since the last flush; it
// writes nothing when no segment was recorded.
func (r *Recorder) Flush(ctx context.Context, p Rotator, id string) error {
	if r.Store == nil {
		return nil
	}
	rec, err := p.Rotate(id)
	if err != nil {
		return err
	}
	if len(rec.Segments) == 0 {
		return nil
	}
	ref := storage.ManifestRef{RunID: r.RunID, Iteration: 0, Stage: schemas.StageServe}
	if r.n == 0 {
		if m, err := storage.Latest(ctx, r.Store, ref); err == nil {
			r.n = len(m.Files)
		} else if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	name := fmt.Sprintf("serve-%06d", r.n)
	for i := range rec.Segments {
		rec.Segments[i].RolloutID = name
	}
	foot := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableSegments, RunID: r.RunID,
		ConfigHash: "legorl-serve", PolicyVersion: rec.Segments[0].PolicyVersion, CodeVersion: r.CodeVersion}
	e, err := storage.WriteFile(ctx, r.Store, ref.DataKey(string(schemas.TableSegments), name), foot, rec.Segments)
	if err != nil {
		return err
	}
	if _, err := storage.Commit(ctx, r.Store, ref, []storage.FileEntry{e}); err != nil {
		return err
	}
	r.n++
	r.files++
	r.segments += len(rec.Segments)
	return nil
}

// Files returns the number of files this Recorder wrote.
func (r *Recorder) Files() int { return r.files }

// Segments returns the number of segments this Recorder wrote.
func (r *Recorder) Segments() int { return r.segments }
