package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
)

// faultRef is the manifest the fault tests write to.
var faultRef = storage.ManifestRef{RunID: "fault", Iteration: 0, Stage: "rollout"}

func segmentsFooter(run string) schemas.Footer {
	return schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableSegments, RunID: run, CodeVersion: "test"}
}

// smallSegments are a few KiB of Parquet.
var smallSegments = sync.OnceValue(func() []schemas.Segment {
	return synth.Run(synth.Config{RunID: "fault", Iterations: 1, Tasks: 2, GroupSize: 2, PromptTokens: 32, TurnTokens: 16, ObsTokens: 8, MoELayers: 2, TopK: 2})[0].Segments
})

// bigSegments make a Parquet file of about 6 MiB: over one 5 MiB part.
// Expert ids spread over 30000 experts compress poorly, so few rows do.
var bigSegments = sync.OnceValue(func() []schemas.Segment {
	return synth.Run(synth.Config{RunID: "fault", Iterations: 1, Tasks: 4, GroupSize: 4, MoELayers: 16, TopK: 8, Experts: 30000})[0].Segments
})

const (
	childModeEnv = "LEGORL_STORAGE_TEST_CHILD"
	childDirEnv  = "LEGORL_STORAGE_TEST_DIR"
)

// killSelf ends the process with SIGKILL: no deferred call, no cleanup.
func killSelf() {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		p.Kill()
	}
	time.Sleep(time.Minute) // the signal lands first
	os.Exit(3)
}

// killingReader kills the process after n bytes of r were read.
type killingReader struct {
	r io.Reader
	n int64
}

func (k *killingReader) Read(p []byte) (int, error) {
	if k.n <= 0 {
		killSelf()
	}
	if int64(len(p)) > k.n {
		p = p[:k.n]
	}
	n, err := k.r.Read(p)
	k.n -= int64(n)
	return n, err
}

// killingPutter dies halfway through reading the body of a put.
type killingPutter struct{ st storage.Putter }

func (k killingPutter) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	return k.st.Put(ctx, key, &killingReader{r: body, n: size / 2}, size)
}

// faultChild is the child process of TestWriterKilled: it writes into the
// store in dir and kills itself.
func faultChild(mode, dir string) {
	ctx := context.Background()
	st, err := storage.NewFileStore(filepath.Join(dir, "store"))
	if err != nil {
		panic(err)
	}
	opts := storage.WriterOptions{TempDir: filepath.Join(dir, "tmp")}
	segs := smallSegments()
	switch mode {
	case "mid-file":
		w, err := storage.NewWriter[schemas.Segment](st, faultRef.DataKey("segments", "shard-0"), segmentsFooter("fault"), opts)
		if err != nil {
			panic(err)
		}
		if err := w.Write(segs); err != nil {
			panic(err)
		}
		killSelf()
	case "mid-put":
		// One file is committed; the second dies while it is put.
		e, err := storage.WriteFile(ctx, st, faultRef.DataKey("segments", "shard-0"), segmentsFooter("fault"), segs)
		if err != nil {
			panic(err)
		}
		if _, err := storage.Commit(ctx, st, faultRef, []storage.FileEntry{e}); err != nil {
			panic(err)
		}
		w, err := storage.NewWriter[schemas.Segment](killingPutter{st}, faultRef.DataKey("segments", "shard-1"), segmentsFooter("fault"), opts)
		if err != nil {
			panic(err)
		}
		if err := w.Write(segs); err != nil {
			panic(err)
		}
		w.Close(ctx)
	}
	panic("child was not killed")
}

// TestWriterKilled runs a writer in a child process that is killed with
// SIGKILL mid-write, and checks that readers see nothing of its file.
func TestWriterKilled(t *testing.T) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		faultChild(mode, os.Getenv(childDirEnv))
		return
	}
	ctx := context.Background()
	shard0, shard1 := faultRef.DataKey("segments", "shard-0"), faultRef.DataKey("segments", "shard-1")
	tests := []struct {
		mode  string
		check func(t *testing.T, st *storage.FileStore)
	}{
		{"mid-file", func(t *testing.T, st *storage.FileStore) {
			if keys := mustList(t, st, ""); len(keys) != 0 {
				t.Fatalf("store holds %q", keys)
			}
			if _, err := storage.TableFiles(ctx, st, faultRef.RunID, "segments"); !errors.Is(err, storage.ErrNoData) {
				t.Fatalf("table files: got %v, want ErrNoData", err)
			}
		}},
		{"mid-put", func(t *testing.T, st *storage.FileStore) {
			// The killed put left its temporary file behind...
			if tmps := tempFiles(t, fileRoot(st)); len(tmps) != 1 {
				t.Fatalf("want the killed put's temporary file on disk, found %q", tmps)
			}
			// ...which no reader sees.
			if got, want := mustList(t, st, "runs/"), []string{shard0, faultRef.Key(1)}; !slices.Equal(got, want) {
				t.Fatalf("list: %q, want %q", got, want)
			}
			files, err := storage.TableFiles(ctx, st, faultRef.RunID, "segments")
			if err != nil || !slices.Equal(fileKeys(files), []string{shard0}) {
				t.Fatalf("table files: %q, %v", fileKeys(files), err)
			}
			readRows(t, st, files[0])
			// A retried writer puts and commits the file it lost.
			e, err := storage.WriteFile(ctx, st, shard1, segmentsFooter("fault"), smallSegments())
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			mustCommit(t, st, faultRef, e)
			files, err = storage.TableFiles(ctx, st, faultRef.RunID, "segments")
			if err != nil || !slices.Equal(fileKeys(files), []string{shard0, shard1}) {
				t.Fatalf("table files after retry: %q, %v", fileKeys(files), err)
			}
			readRows(t, st, files[1])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestWriterKilled$", "-test.count=1")
			cmd.Env = append(os.Environ(), childModeEnv+"="+tt.mode, childDirEnv+"="+dir)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
				t.Fatalf("child: %v, want it killed by SIGKILL; output:\n%s", err, out)
			}
			// The writer's temporary file was unlinked when it was made.
			if ents, err := os.ReadDir(filepath.Join(dir, "tmp")); err != nil || len(ents) != 0 {
				t.Errorf("writer temp dir holds %v (%v)", ents, err)
			}
			st, err := storage.NewFileStore(filepath.Join(dir, "store"))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, st)
		})
	}
}

// readRows opens a committed file and checks it holds its rows.
func readRows(t *testing.T, st storage.Getter, e storage.FileEntry) {
	t.Helper()
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	f, err := storage.OpenFile(ctx, st, e, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for b, err := range f.Batches(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		n += b.NumRows()
	}
	if n != e.Rows {
		t.Fatalf("%s: read %d rows, manifest says %d", e.Key, n, e.Rows)
	}
}

func TestWriterAbort(t *testing.T) {
	ctx := context.Background()
	st := newFileStore(t)
	tmp := t.TempDir()
	w, err := storage.NewWriter[schemas.Segment](st, faultRef.DataKey("segments", "a"), segmentsFooter("fault"), storage.WriterOptions{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(smallSegments()); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	w.Abort() // idempotent
	if err := w.Write(smallSegments()); err == nil {
		t.Error("write after abort succeeded")
	}
	if _, err := w.Close(ctx); err == nil {
		t.Error("close after abort succeeded")
	}
	if keys := mustList(t, st, ""); len(keys) != 0 {
		t.Fatalf("store holds %q", keys)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("temp dir holds %v", ents)
	}
}

// failPutter fails every put, after reading n bytes of the body.
type failPutter struct {
	st storage.Putter
	n  int64
}

func (f failPutter) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if f.st == nil {
		io.CopyN(io.Discard, body, f.n)
		return fmt.Errorf("put %s: %w", key, errBoom)
	}
	return f.st.Put(ctx, key, io.MultiReader(io.LimitReader(body, f.n), &failingReader{err: errBoom}), size)
}

func TestWriterCloseFails(t *testing.T) {
	key := faultRef.DataKey("segments", "a")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		putter func(t *testing.T, st *storage.FileStore) storage.Putter
		ctx    context.Context
		want   error
	}{
		{"putter fails", func(*testing.T, *storage.FileStore) storage.Putter { return failPutter{n: 100} }, context.Background(), errBoom},
		{"body fails halfway through the put", func(_ *testing.T, st *storage.FileStore) storage.Putter { return failPutter{st: st, n: 1000} }, context.Background(), errBoom},
		{"context cancelled", func(_ *testing.T, st *storage.FileStore) storage.Putter { return st }, cancelled, context.Canceled},
		{"key taken", func(t *testing.T, st *storage.FileStore) storage.Putter {
			mustPut(t, st, key, []byte("first"))
			return st
		}, context.Background(), storage.ErrExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFileStore(t)
			w, err := storage.NewWriter[schemas.Segment](tt.putter(t, st), key, segmentsFooter("fault"), storage.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(smallSegments()); err != nil {
				t.Fatal(err)
			}
			before := mustList(t, st, "")
			e, err := w.Close(tt.ctx)
			if !errors.Is(err, tt.want) {
				t.Fatalf("close: got %v (entry %+v), want %v", err, e, tt.want)
			}
			if _, err := w.Close(context.Background()); err == nil {
				t.Error("second close succeeded")
			}
			if got := mustList(t, st, ""); !slices.Equal(got, before) {
				t.Errorf("store holds %q, had %q", got, before)
			}
			if tt.want == storage.ErrExists {
				if got := mustGet(t, st, key); string(got) != "first" {
					t.Errorf("existing object changed to %d bytes", len(got))
				}
			} else {
				wantAbsent(t, st, key)
			}
			if tmps := tempFiles(t, fileRoot(st)); len(tmps) != 0 {
				t.Errorf("temporary files left: %q", tmps)
			}
		})
	}
}

// TestS3CloseFails fails one request of a put between the writer and the
// S3 server and checks that, seen from the server directly, nothing was
// stored and nothing committed, and that a retry then succeeds.
func TestS3CloseFails(t *testing.T) {
	ctx := context.Background()
	completeMultipart := func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
	}
	uploadPart := func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Has("partNumber")
	}
	singlePut := func(r *http.Request) bool {
		return r.Method == http.MethodPut && !r.URL.Query().Has("uploadId")
	}
	tests := []struct {
		name      string
		fail      func(*http.Request) bool
		rows      func() []schemas.Segment
		multipart bool
	}{
		{"complete multipart upload fails", completeMultipart, bigSegments, true},
		{"upload part fails", uploadPart, bigSegments, true},
		{"single put fails", singlePut, smallSegments, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct := s3test.Store(t)
			px := newS3Proxy(t, tt.fail)
			viaProxy := s3Via(t, px.URL, bucketOf(direct))
			key := faultRef.DataKey("segments", "big")

			w, err := storage.NewWriter[schemas.Segment](viaProxy, key, segmentsFooter("fault"), storage.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(tt.rows()); err != nil {
				t.Fatal(err)
			}
			e, err := w.Close(ctx)
			if err == nil {
				t.Fatalf("close succeeded: %+v", e)
			}
			if !strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line naming the key", err)
			}
			if px.failed.Load() == 0 {
				t.Fatal("the proxy failed no request")
			}
			if tt.multipart && (px.creates.Load() != 1 || px.parts.Load() < 2) {
				t.Fatalf("%d creates, %d parts: want a multipart upload", px.creates.Load(), px.parts.Load())
			}

			wantAbsent(t, direct, key)
			if keys := mustList(t, direct, "runs/"); len(keys) != 0 {
				t.Fatalf("bucket holds %q", keys)
			}
			if _, err := storage.Latest(ctx, direct, faultRef); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("latest: got %v, want ErrNotFound", err)
			}
			if _, err := storage.TableFiles(ctx, direct, faultRef.RunID, "segments"); !errors.Is(err, storage.ErrNoData) {
				t.Fatalf("table files: got %v, want ErrNoData", err)
			}
			if n := pendingUploads(t, bucketOf(direct), key); n != 0 {
				t.Errorf("%d failed uploads were not aborted", n)
			}

			// The failure blocks nothing: a retried writer commits.
			e, err = storage.WriteFile(ctx, direct, key, segmentsFooter("fault"), smallSegments())
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			mustCommit(t, direct, faultRef, e)
			files, err := storage.TableFiles(ctx, direct, faultRef.RunID, "segments")
			if err != nil || len(files) != 1 {
				t.Fatalf("table files after retry: %v, %v", files, err)
			}
			readRows(t, direct, files[0])
		})
	}
}

// TestOpenFileDamaged alters a committed file on disk and checks that
// OpenFile refuses it with ErrChecksum naming the key, before decoding.
func TestOpenFileDamaged(t *testing.T) {
	tests := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"last byte cut", func(b []byte) []byte { return b[:len(b)-1] }},
		{"emptied", func([]byte) []byte { return nil }},
		{"byte appended", func(b []byte) []byte { return append(b, 0) }},
		{"bit flipped in the data", func(b []byte) []byte { b[len(b)/3] ^= 0x10; return b }},
		{"bit flipped in the footer", func(b []byte) []byte { b[len(b)-10] ^= 0x01; return b }},
		{"same size, other file", func(b []byte) []byte { return bytes.Repeat([]byte{'P'}, len(b)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st := newFileStore(t)
			e, err := storage.WriteFile(ctx, st, faultRef.DataKey("segments", "a"), segmentsFooter("fault"), smallSegments())
			if err != nil {
				t.Fatal(err)
			}
			mustCommit(t, st, faultRef, e)
			files, err := storage.TableFiles(ctx, st, faultRef.RunID, "segments")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(fileRoot(st), filepath.FromSlash(e.Key))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.damage(data), 0o644); err != nil {
				t.Fatal(err)
			}
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			f, err := storage.OpenFile(ctx, st, files[0], mem)
			if err == nil {
				f.Close()
				t.Fatal("OpenFile accepted a damaged file")
			}
			if !errors.Is(err, storage.ErrChecksum) || !strings.Contains(err.Error(), e.Key) {
				t.Fatalf("got %v, want ErrChecksum naming %s", err, e.Key)
			}
		})
	}
}

// TestDecodeFileCorrupt feeds DecodeFile bytes that are not a legorl
// Parquet file: it must fail with ErrCorrupt naming the file, not panic.
func TestDecodeFileCorrupt(t *testing.T) {
	valid := fileBytes(t, schemas.TableSegments, smallSegments())
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"magic only", []byte("PAR1")},
		{"two magics", []byte("PAR1PAR1")},
		{"garbage", randomBytes(7, 4096)},
		{"garbage between magics", append(append([]byte("PAR1"), randomBytes(8, 4096)...), []byte("PAR1")...)},
		{"truncated to half", valid[:len(valid)/2]},
		{"last byte cut", valid[:len(valid)-1]},
		{"last 8 bytes cut", valid[:len(valid)-8]},
		{"head cut", valid[len(valid)/2:]},
		{"footer length too large", withFooterLength(valid, 1<<30)},
		{"footer length zero", withFooterLength(valid, 0)},
		{"footer length negative", withFooterLength(valid, -5)},
		{"plain Parquet without a legorl footer", plainParquet(t, nil)},
		{"legorl footer over another table's rows", plainParquet(t, segmentsFooter("x").KeyValues())},
		{"newer schema version", plainParquet(t, withKV(segmentsFooter("x").KeyValues(), schemas.FooterSchemaVersion, "99"))},
		{"unknown table", plainParquet(t, withKV(segmentsFooter("x").KeyValues(), schemas.FooterTable, "nope"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			f, err := storage.DecodeFile("bad.parquet", tt.data, mem)
			if err == nil {
				f.Close()
				t.Fatal("DecodeFile accepted it")
			}
			if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "bad.parquet") {
				t.Fatalf("got %v, want ErrCorrupt naming bad.parquet", err)
			}
		})
	}
}

// withFooterLength returns a copy of a Parquet file whose footer length
// field says n.
func withFooterLength(b []byte, n int32) []byte {
	c := bytes.Clone(b)
	u := uint32(n)
	c[len(c)-8], c[len(c)-7], c[len(c)-6], c[len(c)-5] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	return c
}

func withKV(kv map[string]string, k, v string) map[string]string {
	kv[k] = v
	return kv
}

// TestBatchesDamagedPages flips bytes through a valid file's column data
// (as a damaged disk would, past the checksum OpenFile does) and decodes
// each: decoding may fail, with ErrCorrupt naming the file, but never
// panic nor leak memory.
func TestBatchesDamagedPages(t *testing.T) {
	ctx := context.Background()
	valid := fileBytes(t, schemas.TableSegments, smallSegments())
	failed := 0
	for off := 4; off < len(valid)-8; off += max(1, len(valid)/150) {
		data := bytes.Clone(valid)
		data[off] ^= 0x5a
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		err := decodeAll(ctx, "flipped.parquet", data, mem)
		if n := mem.CurrentAlloc(); n != 0 {
			t.Fatalf("offset %d: %d bytes not released (error %v)", off, n, err)
		}
		if err != nil {
			failed++
			if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "flipped.parquet") {
				t.Fatalf("offset %d: got %v, want ErrCorrupt naming the file", off, err)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no damaged file failed to decode")
	}
}

// decodeAll decodes data and reads every batch.
func decodeAll(ctx context.Context, name string, data []byte, mem memory.Allocator) error {
	f, err := storage.DecodeFile(name, data, mem)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, err := range f.Batches(ctx, 7) {
		if err != nil {
			return err
		}
	}
	return nil
}
