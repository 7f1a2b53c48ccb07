package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
)

// TestMain stops the shared versitygw server (started on first use) when
// the package's tests end.
func TestMain(m *testing.M) { s3test.Main(m) }

// backend opens a fresh, empty store.
type backend struct {
	name string
	open func(t *testing.T) storage.Store
}

// backends are the stores every conformance test runs against: a local
// folder, an S3 bucket, and an S3 bucket under a key prefix (which List and
// Get must hide from callers).
var backends = []backend{
	{"file", func(t *testing.T) storage.Store { return newFileStore(t) }},
	{"s3", func(t *testing.T) storage.Store { return s3test.Store(t) }},
	{"s3-prefix", func(t *testing.T) storage.Store {
		srv := s3test.Endpoint(t)
		bucket := s3test.NewBucketName()
		st, err := storage.Open(context.Background(), "s3://"+bucket+"/some/prefix/", srv.Options(true))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// forEachBackend runs fn as a subtest per backend, each on a fresh store.
func forEachBackend(t *testing.T, fn func(t *testing.T, st storage.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) })
	}
}

func newFileStore(t testing.TB) *storage.FileStore {
	t.Helper()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fileRoot returns the folder of a FileStore, from its URI.
func fileRoot(st *storage.FileStore) string { return strings.TrimPrefix(st.URI(), "file://") }

func mustPut(t testing.TB, st storage.Putter, key string, data []byte) {
	t.Helper()
	if err := st.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// getBytes reads the object at key.
func getBytes(st storage.Getter, key string) ([]byte, error) {
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func mustGet(t testing.TB, st storage.Getter, key string) []byte {
	t.Helper()
	b, err := getBytes(st, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return b
}

func mustList(t testing.TB, st storage.Lister, prefix string) []string {
	t.Helper()
	keys, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return keys
}

// wantAbsent checks that nothing is visible at key: Get says ErrNotFound
// and List of the whole store does not name it.
func wantAbsent(t testing.TB, st storage.Store, key string) {
	t.Helper()
	if _, err := getBytes(st, key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("get %s: got %v, want ErrNotFound", key, err)
	}
	if keys := mustList(t, st, ""); slices.Contains(keys, key) {
		t.Errorf("list shows %s: %q", key, keys)
	}
}

// failingReader yields n bytes of data and then fails with err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

// cancellingReader yields first, then cancels its context and fails with
// the context's error, as a body producer that honours ctx does.
type cancellingReader struct {
	first  []byte
	cancel context.CancelFunc
	ctx    context.Context
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	if len(r.first) > 0 {
		n := copy(p, r.first)
		r.first = r.first[n:]
		return n, nil
	}
	r.cancel()
	return 0, r.ctx.Err()
}

var errBoom = errors.New("boom")

func TestStorePutGet(t *testing.T) {
	binary := make([]byte, 70_000)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	tests := []struct {
		name, key string
		data      []byte
	}{
		{"text", "a.txt", []byte("hello")},
		{"nested key", "runs/r1/data/segments/iter-000000/rollout-shard-0.parquet", []byte("PAR1...PAR1")},
		{"binary with NUL bytes", "bin/blob", binary},
		{"empty object", "empty/obj", []byte{}},
		{"unicode key", "runs/é/ü.json", []byte(`{"a":1}`)},
	}
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				mustPut(t, st, tt.key, tt.data)
				if got := mustGet(t, st, tt.key); !bytes.Equal(got, tt.data) {
					t.Fatalf("get %s: %d bytes, want %d bytes as put", tt.key, len(got), len(tt.data))
				}
				sum := sha256.Sum256(tt.data)
				if got, err := storage.HashObject(context.Background(), st, tt.key); err != nil || got != hex.EncodeToString(sum[:]) {
					t.Fatalf("HashObject %s = %s, %v; want %x", tt.key, got, err, sum)
				}
			})
		}
	})
}

func TestStoreWriteOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		mustPut(t, st, "k/obj", []byte("first"))
		for _, second := range []string{"second", "first", ""} {
			err := st.Put(ctx, "k/obj", strings.NewReader(second), int64(len(second)))
			if !errors.Is(err, storage.ErrExists) {
				t.Fatalf("second put (%q): got %v, want ErrExists", second, err)
			}
			if !strings.Contains(err.Error(), "k/obj") {
				t.Errorf("error %q does not name the key", err)
			}
		}
		if got := mustGet(t, st, "k/obj"); string(got) != "first" {
			t.Fatalf("object changed to %q", got)
		}
	})
}

func TestStoreGetMissing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		mustPut(t, st, "dir/present", []byte("x"))
		for _, key := range []string{"missing", "dir/absent", "dir/present/below", "dir", "runs/r/x.parquet"} {
			_, err := getBytes(st, key)
			if !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("get %s: got %v, want ErrNotFound", key, err)
			}
			if !strings.Contains(err.Error(), key) {
				t.Errorf("error %q does not name the key", err)
			}
			if _, err := storage.HashObject(context.Background(), st, key); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("HashObject %s: got %v, want ErrNotFound", key, err)
			}
		}
	})
}

func TestStoreList(t *testing.T) {
	keys := []string{"runs/a/2", "other", "runs/b/1", "runs/a/10", "runs/ab/x", "runs/a/1", "runs/a/sub/z"}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"runs/a/", []string{"runs/a/1", "runs/a/10", "runs/a/2", "runs/a/sub/z"}},
		{"runs/a", []string{"runs/a/1", "runs/a/10", "runs/a/2", "runs/a/sub/z", "runs/ab/x"}}, // S3 prefix semantics
		{"runs/a/1", []string{"runs/a/1", "runs/a/10"}},
		{"runs/", []string{"runs/a/1", "runs/a/10", "runs/a/2", "runs/a/sub/z", "runs/ab/x", "runs/b/1"}},
		{"", []string{"other", "runs/a/1", "runs/a/10", "runs/a/2", "runs/a/sub/z", "runs/ab/x", "runs/b/1"}},
		{"none/", nil},
		{"runs/c", nil},
	}
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		for _, k := range keys {
			mustPut(t, st, k, []byte(k))
		}
		for _, tt := range tests {
			t.Run("prefix="+tt.prefix, func(t *testing.T) {
				got := mustList(t, st, tt.prefix)
				if len(got) != len(tt.want) || (len(got) > 0 && !slices.Equal(got, tt.want)) {
					t.Fatalf("list %q = %q, want %q", tt.prefix, got, tt.want)
				}
			})
		}
	})
}

// TestStoreListHidesPutInProgress stops a put halfway through its body and
// checks that neither List nor Get sees the object until the put returns.
func TestStoreListHidesPutInProgress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		mustPut(t, st, "runs/p/done", []byte("done"))
		const key = "runs/p/in-progress"
		data := bytes.Repeat([]byte("0123456789abcdef"), 8192) // 128 KiB
		pr, pw := io.Pipe()
		errc := make(chan error, 1)
		go func() { errc <- st.Put(ctx, key, pr, int64(len(data))) }()
		// A pipe write returns once the put has read it: the put is under way.
		if _, err := pw.Write(data[:1000]); err != nil {
			t.Fatal(err)
		}
		if got := mustList(t, st, "runs/"); !slices.Equal(got, []string{"runs/p/done"}) {
			t.Errorf("list during put = %q, want only runs/p/done", got)
		}
		if _, err := getBytes(st, key); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("get during put: got %v, want ErrNotFound", err)
		}
		if fst, ok := st.(*storage.FileStore); ok {
			if tmps := tempFiles(t, fileRoot(fst)); len(tmps) != 1 {
				t.Errorf("want one in-progress temporary file on disk, found %q", tmps)
			}
		}
		if _, err := pw.Write(data[1000:]); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		if err := <-errc; err != nil {
			t.Fatalf("put: %v", err)
		}
		if got := mustList(t, st, "runs/"); !slices.Equal(got, []string{"runs/p/done", key}) {
			t.Errorf("list after put = %q", got)
		}
		if got := mustGet(t, st, key); !bytes.Equal(got, data) {
			t.Errorf("get after put: %d bytes, want %d", len(got), len(data))
		}
	})
}

// tempFiles returns the FileStore temporary files under root.
func tempFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), ".tmp-") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStoreInvalidKeys(t *testing.T) {
	bad := []string{"", "../x", "x/..", "a//b", "a/./b", "./a", "/abs", "a/", `a\b`, "a\x00b", strings.Repeat("k", 1025)}
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		ctx := context.Background()
		for _, key := range bad {
			t.Run(fmt.Sprintf("%.20q", key), func(t *testing.T) {
				err := st.Put(ctx, key, strings.NewReader("x"), 1)
				if !errors.Is(err, storage.ErrInvalidKey) {
					t.Errorf("put: got %v, want ErrInvalidKey", err)
				}
				if _, err := st.Get(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
					t.Errorf("get: got %v, want ErrInvalidKey", err)
				}
			})
		}
		if keys := mustList(t, st, ""); len(keys) != 0 {
			t.Fatalf("store holds %q after invalid puts", keys)
		}
	})
}

func TestFileStoreReservedTempPrefix(t *testing.T) {
	st := newFileStore(t)
	for _, key := range []string{".tmp-x", "a/.tmp-123"} {
		if err := st.Put(context.Background(), key, strings.NewReader("x"), 1); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("put %s: got %v, want ErrInvalidKey", key, err)
		}
	}
	// A temporary file left by a killed writer is never listed.
	if err := os.MkdirAll(filepath.Join(fileRoot(st), "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fileRoot(st), "a", ".tmp-left"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if keys := mustList(t, st, ""); len(keys) != 0 {
		t.Fatalf("list shows %q", keys)
	}
}

func TestStoreFailedPutLeavesNothing(t *testing.T) {
	tests := []struct {
		name string
		put  func(st storage.Store, key string) error
		want error // nil: any error
	}{
		{"body fails midway", func(st storage.Store, key string) error {
			return st.Put(context.Background(), key, &failingReader{n: 40_000, err: errBoom}, 100_000)
		}, nil},
		{"body shorter than size", func(st storage.Store, key string) error {
			return st.Put(context.Background(), key, io.MultiReader(strings.NewReader("short")), 10)
		}, nil},
		{"context cancelled before put", func(st storage.Store, key string) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return st.Put(ctx, key, strings.NewReader("data"), 4)
		}, context.Canceled},
		{"context cancelled midway", func(st storage.Store, key string) error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &cancellingReader{first: bytes.Repeat([]byte("y"), 50_000), cancel: cancel, ctx: ctx}
			return st.Put(ctx, key, r, 100_000)
		}, context.Canceled},
	}
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				key := fmt.Sprintf("runs/r/failed-%d", i)
				err := tt.put(st, key)
				if err == nil {
					t.Fatal("put succeeded")
				}
				if tt.want != nil && !errors.Is(err, tt.want) {
					t.Errorf("put: got %v, want %v", err, tt.want)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				wantAbsent(t, st, key)
				// The failed put left nothing that blocks a retry.
				mustPut(t, st, key, []byte("retried"))
				if got := mustGet(t, st, key); string(got) != "retried" {
					t.Fatalf("get after retry: %q", got)
				}
			})
		}
		if fst, ok := st.(*storage.FileStore); ok {
			if tmps := tempFiles(t, fileRoot(fst)); len(tmps) != 0 {
				t.Errorf("failed puts left temporary files: %q", tmps)
			}
		}
	})
}

func TestStoreConcurrentPuts(t *testing.T) {
	const n = 8
	forEachBackend(t, func(t *testing.T, st storage.Store) {
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10)
		}
		winner := racePuts(t, st, "race/obj", bodies)
		want := bytes.Repeat([]byte{byte('a' + winner)}, 64<<10)
		if got := mustGet(t, st, "race/obj"); !bytes.Equal(got, want) {
			t.Fatalf("object is not the winner's (%d) body", winner)
		}
	})
}

// racePuts puts each of bodies at key at once, from a goroutine each, and
// returns the index of the one put that succeeded: the others must fail
// with ErrExists.
func racePuts(t *testing.T, st storage.Store, key string, bodies [][]byte) (winner int) {
	t.Helper()
	ctx := context.Background()
	start := make(chan struct{})
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			<-start
			errs[i] = st.Put(ctx, key, bytes.NewReader(body), int64(len(body)))
		})
	}
	close(start)
	wg.Wait()
	winner = -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("puts %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, storage.ErrExists):
			t.Errorf("put %d: got %v, want ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no put succeeded")
	}
	return winner
}

func TestOpenFile(t *testing.T) {
	ctx := context.Background()
	t.Run("absolute", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		st, err := storage.Open(ctx, "file://"+dir, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if st.URI() != "file://"+dir {
			t.Errorf("URI = %q", st.URI())
		}
		mustPut(t, st, "a/b", []byte("abs"))
		if b, err := os.ReadFile(filepath.Join(dir, "a", "b")); err != nil || string(b) != "abs" {
			t.Fatalf("file on disk: %q, %v", b, err)
		}
	})
	t.Run("relative", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		st, err := storage.Open(ctx, "file://./rel/store", storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, st, "k", []byte("rel"))
		if b, err := os.ReadFile(filepath.Join(dir, "rel", "store", "k")); err != nil || string(b) != "rel" {
			t.Fatalf("file on disk: %q, %v", b, err)
		}
		// The store keeps its absolute folder when the process moves.
		t.Chdir(t.TempDir())
		if got := mustGet(t, st, "k"); string(got) != "rel" {
			t.Fatalf("get after chdir: %q", got)
		}
	})
}

func TestOpenS3(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Endpoint(t)
	plain := s3test.Store(t) // an existing bucket
	bucket := strings.TrimPrefix(plain.URI(), "s3://")
	tests := []struct {
		uri, wantURI, wantKey string
	}{
		{"s3://" + bucket, "s3://" + bucket, "k1"},
		{"s3://" + bucket + "/", "s3://" + bucket, "k2"},
		{"s3://" + bucket + "/pre/fix", "s3://" + bucket + "/pre/fix", "pre/fix/k3"},
		{"s3://" + bucket + "/pre/fix/", "s3://" + bucket + "/pre/fix", "pre/fix/k4"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			st, err := storage.Open(ctx, tt.uri, srv.Options(false))
			if err != nil {
				t.Fatal(err)
			}
			if st.URI() != tt.wantURI {
				t.Errorf("URI = %q, want %q", st.URI(), tt.wantURI)
			}
			key := tt.wantKey[strings.LastIndexByte(tt.wantKey, '/')+1:]
			mustPut(t, st, key, []byte(tt.uri))
			if got := mustGet(t, plain, tt.wantKey); string(got) != tt.uri {
				t.Fatalf("bucket holds %q at %s", got, tt.wantKey)
			}
			if got := mustList(t, st, key); !slices.Equal(got, []string{key}) {
				t.Fatalf("list through the prefixed store = %q, want [%s]", got, key)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Endpoint(t)
	withEndpoint := func(ep string) storage.Options {
		o := srv.Options(false)
		o.S3Endpoint = ep
		return o
	}
	badCreds := srv.Options(false)
	badCreds.SecretKey = "wrong-secret"
	existing := strings.TrimPrefix(s3test.Store(t).URI(), "s3://")
	missing := s3test.NewBucketName()
	tests := []struct {
		name, uri string
		opts      storage.Options
		want      error    // nil: any error
		wantIn    []string // the message names these
	}{
		{"no scheme", "runs/data", storage.Options{}, storage.ErrInvalidURI, []string{`"runs/data"`, "file:///"}},
		{"unknown scheme", "ftp://x", storage.Options{}, storage.ErrInvalidURI, []string{"ftp"}},
		{"empty file path", "file://", storage.Options{}, storage.ErrInvalidURI, []string{"no path"}},
		{"s3 without bucket", "s3://", srv.Options(false), storage.ErrInvalidURI, []string{"no bucket"}},
		{"s3 bad prefix", "s3://" + existing + "/a//b", srv.Options(false), storage.ErrInvalidURI, []string{"prefix", "a//b"}},
		{"endpoint without scheme", "s3://bucket-x", withEndpoint("localhost:9000"), storage.ErrInvalidURI, []string{"localhost:9000", "http://"}},
		{"endpoint with path", "s3://bucket-x", withEndpoint(srv.URL + "/sub"), storage.ErrInvalidURI, []string{"/sub"}},
		{"unreachable endpoint", "s3://bucket-x", withEndpoint("http://127.0.0.1:1"), nil, []string{"127.0.0.1:1", "refused"}},
		{"wrong secret", "s3://" + existing, badCreds, nil, []string{srv.URL}},
		{"missing bucket", "s3://" + missing, srv.Options(false), storage.ErrNotFound, []string{missing, "does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := storage.Open(ctx, tt.uri, tt.opts)
			if err == nil {
				t.Fatalf("Open(%q) = %s, want an error", tt.uri, st.URI())
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			if !strings.HasPrefix(msg, "storage: ") {
				t.Errorf("message %q does not start with the package name", msg)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not mention %q", msg, s)
				}
			}
		})
	}
	t.Run("missing bucket is created on request", func(t *testing.T) {
		name := s3test.NewBucketName()
		if _, err := storage.Open(ctx, "s3://"+name, srv.Options(true)); err != nil {
			t.Fatal(err)
		}
		if _, err := storage.Open(ctx, "s3://"+name, srv.Options(false)); err != nil {
			t.Fatalf("bucket was not created: %v", err)
		}
	})
}
