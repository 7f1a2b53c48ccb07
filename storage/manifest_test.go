package storage_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/legorl/legorl/storage"
)

// entry makes a file entry of table named name under ref; its sha256 is
// derived from content, so two entries with the same content agree.
func entry(ref storage.ManifestRef, table, name, content string) storage.FileEntry {
	sum := sha256.Sum256([]byte(content))
	return storage.FileEntry{
		Table: table, Key: ref.DataKey(table, name),
		Size: int64(len(content)), Rows: 1, SHA256: hex.EncodeToString(sum[:]),
	}
}

func mustCommit(t testing.TB, st storage.Store, ref storage.ManifestRef, files ...storage.FileEntry) storage.Manifest {
	t.Helper()
	m, err := storage.Commit(context.Background(), st, ref, files)
	if err != nil {
		t.Fatalf("commit %v: %v", ref, err)
	}
	return m
}

func fileKeys(files []storage.FileEntry) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Key)
	}
	return out
}

// versionKeys returns the manifest version keys stored for ref.
func versionKeys(t testing.TB, st storage.Store, ref storage.ManifestRef) []string {
	t.Helper()
	return mustList(t, st, ref.Prefix())
}

func wantVersions(t testing.TB, st storage.Store, ref storage.ManifestRef, n int) {
	t.Helper()
	var want []string
	for v := 1; v <= n; v++ {
		want = append(want, ref.Key(v))
	}
	if got := versionKeys(t, st, ref); !slices.Equal(got, want) {
		t.Fatalf("versions stored: %q, want v1..v%d", got, n)
	}
}

func TestCommitVersions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		ref := storage.ManifestRef{RunID: "run-1", Iteration: 3, Stage: "rollout"}
		if _, err := storage.Latest(ctx, st, ref); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("latest before any commit: got %v, want ErrNotFound", err)
		}
		e1 := entry(ref, "segments", "a", "1")
		e2 := entry(ref, "segments", "b", "2")
		e3 := entry(ref, "rollouts", "a", "3")
		steps := []struct {
			add  []storage.FileEntry
			want []storage.FileEntry
		}{
			{[]storage.FileEntry{e1}, []storage.FileEntry{e1}},
			{[]storage.FileEntry{e2, e3}, []storage.FileEntry{e1, e2, e3}},
			{nil, []storage.FileEntry{e1, e2, e3}},
		}
		for i, s := range steps {
			m := mustCommit(t, st, ref, s.add...)
			wantV := min(i+1, 2) // committing nothing new writes no version
			if m.Version != wantV || !slices.Equal(m.Files, s.want) {
				t.Fatalf("commit %d: v%d %q, want v%d %q", i, m.Version, fileKeys(m.Files), wantV, fileKeys(s.want))
			}
			if m.RunID != ref.RunID || m.Iteration != ref.Iteration || m.Stage != ref.Stage || m.CommittedAt.IsZero() {
				t.Fatalf("commit %d: manifest header %+v", i, m)
			}
			latest, err := storage.Latest(ctx, st, ref)
			if err != nil {
				t.Fatal(err)
			}
			if latest.Version != wantV || !slices.Equal(latest.Files, s.want) || !latest.CommittedAt.Equal(m.CommittedAt) {
				t.Fatalf("latest after commit %d: v%d %q", i, latest.Version, fileKeys(latest.Files))
			}
		}
		wantVersions(t, st, ref, 2)
		// Earlier versions stay as they were.
		v1 := mustGet(t, st, ref.Key(1))
		if !strings.Contains(string(v1), e1.Key) || strings.Contains(string(v1), e2.Key) {
			t.Fatalf("v1 changed: %s", v1)
		}
	})
}

func TestCommitRetriedEntries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		ref := storage.ManifestRef{RunID: "r", Iteration: 0, Stage: "rollout"}
		e1 := entry(ref, "segments", "a", "1")
		e2 := entry(ref, "segments", "b", "2")
		mustCommit(t, st, ref, e1)

		// A retried bundle re-commits the same entry: a no-op.
		if m := mustCommit(t, st, ref, e1); m.Version != 1 || !slices.Equal(m.Files, []storage.FileEntry{e1}) {
			t.Fatalf("re-commit: v%d %q, want v1 [a]", m.Version, fileKeys(m.Files))
		}
		wantVersions(t, st, ref, 1)
		// Re-committed and new entries together, with a duplicate in the call.
		if m := mustCommit(t, st, ref, e1, e2, e2); m.Version != 2 || !slices.Equal(m.Files, []storage.FileEntry{e1, e2}) {
			t.Fatalf("commit: v%d %q, want v2 [a b]", m.Version, fileKeys(m.Files))
		}

		// The same key with another sha256 is refused, in any position.
		other := entry(ref, "segments", "a", "changed")
		for _, files := range [][]storage.FileEntry{{other}, {e2, other}, {entry(ref, "segments", "c", "x"), entry(ref, "segments", "c", "y")}} {
			_, err := storage.Commit(ctx, st, ref, files)
			if !errors.Is(err, storage.ErrManifest) {
				t.Fatalf("conflicting entry: got %v, want ErrManifest", err)
			}
			if !strings.Contains(err.Error(), files[len(files)-1].Key) {
				t.Errorf("error %q does not name the key", err)
			}
		}
		wantVersions(t, st, ref, 2)
		latest, err := storage.Latest(ctx, st, ref)
		if err != nil || !slices.Equal(latest.Files, []storage.FileEntry{e1, e2}) {
			t.Fatalf("latest: %q, %v", fileKeys(latest.Files), err)
		}
	})
}

func TestCommitInvalidInput(t *testing.T) {
	ctx := context.Background()
	st := newFileStore(t)
	good := storage.ManifestRef{RunID: "r", Iteration: 0, Stage: "rollout"}
	e := entry(good, "segments", "a", "1")
	refs := []struct {
		name string
		ref  storage.ManifestRef
	}{
		{"empty run id", storage.ManifestRef{Stage: "s"}},
		{"run id with slash", storage.ManifestRef{RunID: "a/b", Stage: "s"}},
		{"run id ..", storage.ManifestRef{RunID: "..", Stage: "s"}},
		{"hidden run id", storage.ManifestRef{RunID: ".r", Stage: "s"}},
		{"run id with space", storage.ManifestRef{RunID: "a b", Stage: "s"}},
		{"run id with backslash", storage.ManifestRef{RunID: `a\b`, Stage: "s"}},
		{"run id too long", storage.ManifestRef{RunID: strings.Repeat("r", 129), Stage: "s"}},
		{"empty stage", storage.ManifestRef{RunID: "r"}},
		{"stage with slash", storage.ManifestRef{RunID: "r", Stage: "../s"}},
		{"negative iteration", storage.ManifestRef{RunID: "r", Stage: "s", Iteration: -1}},
		{"iteration too large", storage.ManifestRef{RunID: "r", Stage: "s", Iteration: 1_000_000}},
	}
	for _, tt := range refs {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := storage.Commit(ctx, st, tt.ref, []storage.FileEntry{e}); !errors.Is(err, storage.ErrInvalidKey) {
				t.Errorf("commit: got %v, want ErrInvalidKey", err)
			}
			if _, err := storage.Latest(ctx, st, tt.ref); !errors.Is(err, storage.ErrInvalidKey) {
				t.Errorf("latest: got %v, want ErrInvalidKey", err)
			}
			if tt.ref.RunID != "r" {
				if _, err := storage.Manifests(ctx, st, tt.ref.RunID); !errors.Is(err, storage.ErrInvalidKey) {
					t.Errorf("manifests: got %v, want ErrInvalidKey", err)
				}
				if _, err := storage.TableFiles(ctx, st, tt.ref.RunID, "segments"); !errors.Is(err, storage.ErrInvalidKey) {
					t.Errorf("table files: got %v, want ErrInvalidKey", err)
				}
			}
		})
	}
	entries := []struct {
		name string
		f    storage.FileEntry
		want error
	}{
		{"bad key", storage.FileEntry{Table: "segments", Key: "../x", SHA256: e.SHA256}, storage.ErrInvalidKey},
		{"no sha256", storage.FileEntry{Table: "segments", Key: "runs/r/x"}, storage.ErrManifest},
		{"short sha256", storage.FileEntry{Table: "segments", Key: "runs/r/x", SHA256: "abc"}, storage.ErrManifest},
	}
	for _, tt := range entries {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := storage.Commit(ctx, st, good, []storage.FileEntry{e, tt.f}); !errors.Is(err, tt.want) {
				t.Errorf("commit: got %v, want %v", err, tt.want)
			}
		})
	}
	if keys := mustList(t, st, ""); len(keys) != 0 {
		t.Fatalf("refused commits wrote %q", keys)
	}
}

func TestManifestsAndTableFiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		ref := func(it int, stage string) storage.ManifestRef {
			return storage.ManifestRef{RunID: "r1", Iteration: it, Stage: stage}
		}
		// Committed out of order, some stages over several versions.
		r2, r0, t0, r1, t1 := ref(2, "rollout"), ref(0, "rollout"), ref(0, "train"), ref(1, "rollout"), ref(1, "train")
		mustCommit(t, st, r2, entry(r2, "segments", "s0", "a"), entry(r2, "rollouts", "s0", "b"))
		mustCommit(t, st, r0, entry(r0, "segments", "s0", "c"))
		mustCommit(t, st, t0, entry(t0, "train_steps", "s0", "d"))
		mustCommit(t, st, r0, entry(r0, "segments", "s1", "e"), entry(r0, "rollouts", "s0", "f"))
		mustCommit(t, st, r1, entry(r1, "rollouts", "s0", "g"))
		mustCommit(t, st, t1, entry(t1, "train_steps", "s0", "h"))
		mustCommit(t, st, r2, entry(r2, "segments", "s1", "i"))
		// A run whose id extends r1's must not leak into it.
		r10 := storage.ManifestRef{RunID: "r10", Iteration: 0, Stage: "rollout"}
		mustCommit(t, st, r10, entry(r10, "segments", "s0", "j"))
		// Neither must a stray object that is not a manifest version.
		mustPut(t, st, r0.Prefix()+"notes.txt", []byte("not a manifest"))

		ms, err := storage.Manifests(ctx, st, "r1")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, fmt.Sprintf("%d/%s/v%d/%d", m.Iteration, m.Stage, m.Version, len(m.Files)))
		}
		want := []string{"0/rollout/v2/3", "0/train/v1/1", "1/rollout/v1/1", "1/train/v1/1", "2/rollout/v2/3"}
		if !slices.Equal(got, want) {
			t.Fatalf("manifests: %q, want %q", got, want)
		}

		tables := []struct {
			table string
			want  []string
		}{
			{"segments", []string{r0.DataKey("segments", "s0"), r0.DataKey("segments", "s1"), r2.DataKey("segments", "s0"), r2.DataKey("segments", "s1")}},
			{"rollouts", []string{r0.DataKey("rollouts", "s0"), r1.DataKey("rollouts", "s0"), r2.DataKey("rollouts", "s0")}},
			{"train_steps", []string{t0.DataKey("train_steps", "s0"), t1.DataKey("train_steps", "s0")}},
		}
		for _, tt := range tables {
			files, err := storage.TableFiles(ctx, st, "r1", tt.table)
			if err != nil {
				t.Fatal(err)
			}
			if got := fileKeys(files); !slices.Equal(got, tt.want) {
				t.Errorf("table files of %s: %q, want %q", tt.table, got, tt.want)
			}
		}
		for _, q := range []struct{ run, table string }{{"r1", "steps"}, {"r2", "segments"}, {"r", "segments"}} {
			_, err := storage.TableFiles(ctx, st, q.run, q.table)
			if !errors.Is(err, storage.ErrNoData) {
				t.Errorf("table files of %s/%s: got %v, want ErrNoData", q.run, q.table, err)
			} else if !strings.Contains(err.Error(), q.table) || !strings.Contains(err.Error(), q.run) {
				t.Errorf("error %q does not name the run and table", err)
			}
		}
		if ms, err := storage.Manifests(ctx, st, "r2"); err != nil || len(ms) != 0 {
			t.Errorf("manifests of an empty run: %d, %v", len(ms), err)
		}
	})
}

func TestManifestCorrupt(t *testing.T) {
	ref := storage.ManifestRef{RunID: "r", Iteration: 0, Stage: "rollout"}
	good := entry(ref, "segments", "a", "1")
	tests := []struct {
		name, body string
	}{
		{"not json", "{"},
		{"unknown field", `{"run_id":"r","version":1,"files":[],"extra":1}`},
		{"bad entry key", `{"run_id":"r","version":1,"files":[{"table":"segments","key":"../x","size":1,"rows":1,"sha256":"` + good.SHA256 + `"}]}`},
		{"short sha256", `{"run_id":"r","version":1,"files":[{"table":"segments","key":"a","size":1,"rows":1,"sha256":"ab"}]}`},
		{"negative size", `{"run_id":"r","version":1,"files":[{"table":"segments","key":"a","size":-1,"rows":1,"sha256":"` + good.SHA256 + `"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st := newFileStore(t)
			mustPut(t, st, ref.Key(1), []byte(tt.body))
			if _, err := storage.Latest(ctx, st, ref); !errors.Is(err, storage.ErrManifest) || !strings.Contains(err.Error(), ref.Key(1)) {
				t.Errorf("latest: got %v, want ErrManifest naming %s", err, ref.Key(1))
			}
			if _, err := storage.TableFiles(ctx, st, "r", "segments"); !errors.Is(err, storage.ErrManifest) {
				t.Errorf("table files: got %v, want ErrManifest", err)
			}
			if _, err := storage.Commit(ctx, st, ref, []storage.FileEntry{good}); !errors.Is(err, storage.ErrManifest) {
				t.Errorf("commit over a corrupt version: got %v, want ErrManifest", err)
			}
		})
	}
}

// TestCommitRace has K writers commit their own files to one manifest at
// once: every commit must succeed, and no file may be lost or doubled.
func TestCommitRace(t *testing.T) {
	const k = 8
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		ref := storage.ManifestRef{RunID: "race", Iteration: 1, Stage: "rollout"}
		start := make(chan struct{})
		results := make([]storage.Manifest, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for w := range k {
			wg.Go(func() {
				files := []storage.FileEntry{
					entry(ref, "segments", fmt.Sprintf("w%d", w), fmt.Sprint(w)),
					entry(ref, "rollouts", fmt.Sprintf("w%d", w), fmt.Sprint(w)),
				}
				<-start
				results[w], errs[w] = storage.Commit(ctx, st, ref, files)
			})
		}
		close(start)
		wg.Wait()
		seen := map[int]int{}
		for w, err := range errs {
			if err != nil {
				t.Fatalf("writer %d: %v", w, err)
			}
			v := results[w].Version
			if prev, dup := seen[v]; dup {
				t.Fatalf("writers %d and %d both committed v%d", prev, w, v)
			}
			seen[v] = w
		}
		wantVersions(t, st, ref, k)
		// Every version holds its predecessor plus one writer's two files.
		for v := 1; v <= k; v++ {
			m := readVersion(t, st, ref, v)
			if m.Version != v || len(m.Files) != 2*v {
				t.Fatalf("v%d holds %d files (version field %d), want %d", v, len(m.Files), m.Version, 2*v)
			}
			if v > 1 {
				prev := readVersion(t, st, ref, v-1)
				if !slices.Equal(m.Files[:len(prev.Files)], prev.Files) {
					t.Fatalf("v%d does not extend v%d", v, v-1)
				}
			}
		}
		latest, err := storage.Latest(ctx, st, ref)
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, f := range latest.Files {
			count[f.Key]++
		}
		for w := range k {
			for _, table := range []string{"segments", "rollouts"} {
				if key := ref.DataKey(table, fmt.Sprintf("w%d", w)); count[key] != 1 {
					t.Errorf("%s is in the final manifest %d times", key, count[key])
				}
			}
		}
	})
}

func readVersion(t testing.TB, st storage.Store, ref storage.ManifestRef, v int) storage.Manifest {
	t.Helper()
	// Latest reads the newest version only: read older ones through a
	// store whose List stops at v.
	m, err := storage.Latest(context.Background(), upTo{st, ref.Key(v)}, ref)
	if err != nil {
		t.Fatalf("read v%d: %v", v, err)
	}
	return m
}

// upTo lists only keys up to last.
type upTo struct {
	storage.Store
	last string
}

func (u upTo) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := u.Store.List(ctx, prefix)
	return slices.DeleteFunc(keys, func(k string) bool { return k > u.last }), err
}

// staleList is a store whose first List under prefix hides the newest key,
// as a listing does that races a commit of another writer; it records the
// keys Commit tries to put.
type staleList struct {
	storage.Store
	prefix string
	mu     sync.Mutex
	hidden bool
	puts   []string
}

func (s *staleList) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := s.Store.List(ctx, prefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && prefix == s.prefix && !s.hidden && len(keys) > 0 {
		s.hidden = true
		keys = keys[:len(keys)-1]
	}
	return keys, err
}

func (s *staleList) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	err := s.Store.Put(ctx, key, body, size)
	s.mu.Lock()
	s.puts = append(s.puts, fmt.Sprintf("%s:%v", key[strings.LastIndexByte(key, '/')+1:], errors.Is(err, storage.ErrExists)))
	s.mu.Unlock()
	return err
}

// TestCommitLosesRace makes Commit lose the race for a version
// deterministically: it tries v2, finds it taken, re-reads and commits v3
// holding both writers' files.
func TestCommitLosesRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ref := storage.ManifestRef{RunID: "r", Iteration: 0, Stage: "rollout"}
		e1, e2, e3 := entry(ref, "segments", "a", "1"), entry(ref, "segments", "b", "2"), entry(ref, "segments", "c", "3")
		mustCommit(t, st, ref, e1)
		mustCommit(t, st, ref, e2) // v2, which the next commit will not see at first
		stale := &staleList{Store: st, prefix: ref.Prefix()}
		m := mustCommit(t, stale, ref, e3)
		if want := []string{"v000002.json:true", "v000003.json:false"}; !slices.Equal(stale.puts, want) {
			t.Fatalf("puts: %q, want %q (lose v2, then commit v3)", stale.puts, want)
		}
		if m.Version != 3 || !slices.Equal(m.Files, []storage.FileEntry{e1, e2, e3}) {
			t.Fatalf("commit: v%d %q, want v3 [a b c]", m.Version, fileKeys(m.Files))
		}
		latest, err := storage.Latest(context.Background(), st, ref)
		if err != nil || latest.Version != 3 || !slices.Equal(latest.Files, m.Files) {
			t.Fatalf("latest: v%d %q, %v", latest.Version, fileKeys(latest.Files), err)
		}
	})
}

// alwaysTaken refuses every put as if another writer always won.
type alwaysTaken struct{ storage.Store }

func (alwaysTaken) Put(_ context.Context, key string, _ io.Reader, _ int64) error {
	return fmt.Errorf("%w: %s", storage.ErrExists, key)
}

func TestCommitGivesUp(t *testing.T) {
	ref := storage.ManifestRef{RunID: "r", Iteration: 0, Stage: "rollout"}
	_, err := storage.Commit(context.Background(), alwaysTaken{newFileStore(t)}, ref, []storage.FileEntry{entry(ref, "segments", "a", "1")})
	if !errors.Is(err, storage.ErrConflict) || !strings.Contains(err.Error(), ref.Prefix()) {
		t.Fatalf("got %v, want ErrConflict naming %s", err, ref.Prefix())
	}
}
