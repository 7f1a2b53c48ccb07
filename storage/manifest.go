package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/legorl/legorl/schemas"
)

// FileEntry describes one committed data file.
type FileEntry struct {
	Table  string `json:"table"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	Rows   int64  `json:"rows"`
	SHA256 string `json:"sha256"` // hex
}

// Manifest is one committed version of the file list of a run, iteration
// and stage. Versions are cumulative: version N holds every file of version
// N-1 plus the files its commit added.
type Manifest struct {
	RunID       string      `json:"run_id"`
	Iteration   int         `json:"iteration"`
	Stage       string      `json:"stage"`
	Version     int         `json:"version"`
	CommittedAt time.Time   `json:"committed_at"`
	Files       []FileEntry `json:"files"`
}

// ManifestRef names the manifest sequence of one run, iteration and stage
// (e.g. "rollout", "train").
type ManifestRef struct {
	RunID     string
	Iteration int
	Stage     string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckName reports whether s is usable as a run id, stage or table name in
// object keys: 1 to 128 of [A-Za-z0-9._-], starting with a letter or digit.
func CheckName(what, s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%w: %s %q: want 1-128 of [A-Za-z0-9._-], starting with a letter or digit", ErrInvalidKey, what, s)
	}
	return nil
}

func (r ManifestRef) check() error {
	if err := CheckName("run id", r.RunID); err != nil {
		return err
	}
	if err := CheckName("stage", r.Stage); err != nil {
		return err
	}
	if r.Iteration < 0 || r.Iteration > 999999 {
		return fmt.Errorf("%w: iteration %d not in [0, 999999]", ErrInvalidKey, r.Iteration)
	}
	return nil
}

// Prefix returns the key prefix under which the versions live.
func (r ManifestRef) Prefix() string {
	return schemas.ManifestPrefix(r.RunID, r.Stage, r.Iteration)
}

// Key returns the key of version v.
func (r ManifestRef) Key(v int) string { return fmt.Sprintf("%sv%06d.json", r.Prefix(), v) }

// DataKey returns a key for a new data file of table in this run, iteration
// and stage; name must be unique within them (a shard or writer id).
func (r ManifestRef) DataKey(table, name string) string {
	return schemas.DataKey(r.RunID, table, r.Iteration, r.Stage, name)
}

var versionRE = regexp.MustCompile(`v(\d{6})\.json$`)

// Latest returns the newest committed version of the manifest; ErrNotFound
// when none is committed.
func Latest(ctx context.Context, st Store, ref ManifestRef) (Manifest, error) {
	if err := ref.check(); err != nil {
		return Manifest{}, err
	}
	v, err := latestVersion(ctx, st, ref)
	if err != nil {
		return Manifest{}, err
	}
	if v == 0 {
		return Manifest{}, fmt.Errorf("%w: no manifest under %s", ErrNotFound, ref.Prefix())
	}
	return readManifest(ctx, st, ref.Key(v))
}

func latestVersion(ctx context.Context, st Lister, ref ManifestRef) (int, error) {
	keys, err := st.List(ctx, ref.Prefix())
	if err != nil {
		return 0, err
	}
	best := 0
	for _, k := range keys {
		if m := versionRE.FindStringSubmatch(k); m != nil {
			if v, _ := strconv.Atoi(m[1]); v > best {
				best = v
			}
		}
	}
	return best, nil
}

func readManifest(ctx context.Context, st Getter, key string) (Manifest, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return Manifest{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		return Manifest{}, fmt.Errorf("storage: read manifest %s: %w", key, err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %v", ErrManifest, key, err)
	}
	for _, f := range m.Files {
		if CheckKey(f.Key) != nil || len(f.SHA256) != 64 || f.Size < 0 {
			return Manifest{}, fmt.Errorf("%w: %s: bad entry for %q", ErrManifest, key, f.Key)
		}
	}
	return m, nil
}

// MaxCommitAttempts bounds how often Commit retries after losing a race.
const MaxCommitAttempts = 64

// Commit adds files to the manifest of ref by writing its next version,
// write-once. When another writer committed that version first, Commit
// re-reads the newest version, merges, and tries the next one, so nothing
// either writer added is lost. Adding a key already present with the same
// sha256 is a no-op (a retried bundle); with a different sha256 it fails.
// When every file is already committed, Commit writes no new version and
// returns the newest one.
func Commit(ctx context.Context, st Store, ref ManifestRef, files []FileEntry) (Manifest, error) {
	if err := ref.check(); err != nil {
		return Manifest{}, err
	}
	for _, f := range files {
		if err := CheckKey(f.Key); err != nil {
			return Manifest{}, err
		}
		if len(f.SHA256) != 64 {
			return Manifest{}, fmt.Errorf("%w: %s has no sha256", ErrManifest, f.Key)
		}
	}
	for attempt := 0; attempt < MaxCommitAttempts; attempt++ {
		v, err := latestVersion(ctx, st, ref)
		if err != nil {
			return Manifest{}, err
		}
		next := Manifest{RunID: ref.RunID, Iteration: ref.Iteration, Stage: ref.Stage, Version: v + 1}
		var prev Manifest
		if v > 0 {
			if prev, err = readManifest(ctx, st, ref.Key(v)); err != nil {
				return Manifest{}, err
			}
		}
		merged, err := mergeFiles(prev.Files, files)
		if err != nil {
			return Manifest{}, err
		}
		if v > 0 && len(merged) == len(prev.Files) {
			return prev, nil // every file is already committed: nothing to write
		}
		next.Files = merged
		next.CommittedAt = time.Now().UTC()
		body, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return Manifest{}, fmt.Errorf("storage: encode manifest: %w", err)
		}
		err = st.Put(ctx, ref.Key(next.Version), bytes.NewReader(body), int64(len(body)))
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, ErrExists) {
			return Manifest{}, fmt.Errorf("storage: commit %s: %w", ref.Key(next.Version), err)
		}
		// Lost the race for this version: re-read and try the next one.
	}
	return Manifest{}, fmt.Errorf("%w: %s after %d attempts", ErrConflict, ref.Prefix(), MaxCommitAttempts)
}

func mergeFiles(have, add []FileEntry) ([]FileEntry, error) {
	out := append([]FileEntry(nil), have...)
	idx := make(map[string]int, len(out))
	for i, f := range out {
		idx[f.Key] = i
	}
	for _, f := range add {
		if i, ok := idx[f.Key]; ok {
			if out[i].SHA256 != f.SHA256 {
				return nil, fmt.Errorf("%w: %s is already committed with another sha256", ErrManifest, f.Key)
			}
			continue
		}
		idx[f.Key] = len(out)
		out = append(out, f)
	}
	return out, nil
}

// Manifests returns the newest version of every manifest of a run, ordered
// by iteration then stage.
func Manifests(ctx context.Context, st Store, runID string) ([]Manifest, error) {
	if err := CheckName("run id", runID); err != nil {
		return nil, err
	}
	keys, err := st.List(ctx, schemas.ManifestsPrefix(runID))
	if err != nil {
		return nil, err
	}
	latest := map[string]string{} // prefix -> newest key
	for _, k := range keys {
		if !versionRE.MatchString(k) {
			continue
		}
		p := k[:strings.LastIndexByte(k, '/')+1]
		if k > latest[p] { // zero-padded versions sort as strings
			latest[p] = k
		}
	}
	var out []Manifest
	for _, k := range latest {
		m, err := readManifest(ctx, st, k)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Iteration != out[j].Iteration {
			return out[i].Iteration < out[j].Iteration
		}
		return out[i].Stage < out[j].Stage
	})
	return out, nil
}

// TableFiles returns every committed file of table in a run, in manifest
// order; ErrNoData when the run has none.
func TableFiles(ctx context.Context, st Store, runID, table string) ([]FileEntry, error) {
	ms, err := Manifests(ctx, st, runID)
	if err != nil {
		return nil, err
	}
	var out []FileEntry
	for _, m := range ms {
		for _, f := range m.Files {
			if f.Table == table {
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: run %q has no committed %s files in %s", ErrNoData, runID, table, st.URI())
	}
	return out, nil
}
