package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
)

func hostOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// viaFaults opens bucket on srv through the fault proxy, with 5 MiB parts
// and retries tries per request (0: the default).
func viaFaults(t *testing.T, srv *s3test.Server, px *tcpFaults, bucket string, retries int, create bool) *storage.S3Store {
	t.Helper()
	opts := srv.Options(create)
	opts.S3Endpoint = px.URL
	opts.S3Retries = retries
	st, err := storage.OpenS3(context.Background(), bucket, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	st.PartSize = 5 << 20
	return st
}

// wantOneLine checks that err is a one-line error naming key.
func wantOneLine(t *testing.T, err error, key string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), key) {
		t.Errorf("error %q is not one line naming %s", err, key)
	}
}

// TestS3PutFaults puts objects through a TCP proxy that breaks connections,
// throttles, loses answers and slows every byte, and checks, from the server
// directly, that each put either stored exactly its object once (and
// write-once still holds) or failed with a one-line error leaving nothing.
func TestS3PutFaults(t *testing.T) {
	ctx := context.Background()
	const mib = 1 << 20
	tests := []struct {
		name    string
		size    int
		rules   []faultRule
		delay   time.Duration
		retries int
		wantErr bool
		// injected, when not 0, is how many faults must strike: each rule
		// of the case is needed.
		injected int64
		enospc   bool // the error wraps syscall.ENOSPC
	}{
		{name: "reset mid-upload of a single put", size: 3 * mib,
			rules: []faultRule{{match: isSinglePut, kind: resetUpload, after: mib, times: 1}}},
		{name: "reset mid-upload of part 2", size: 11 * mib,
			rules: []faultRule{{match: isPart(2), kind: resetUpload, after: mib, times: 1}}},
		{name: "reset before the body of every part 1, 2 and 3, once each", size: 11 * mib,
			rules: []faultRule{{match: isPart(1), kind: resetUpload, times: 1}, {match: isPart(2), kind: resetUpload, times: 1}, {match: isPart(3), kind: resetUpload, times: 1}}},
		{name: "503 SlowDown three times", size: mib,
			rules: []faultRule{{match: isSinglePut, kind: slowDown, times: 3}}},
		{name: "503 SlowDown on part 2 three times", size: 11 * mib,
			rules: []faultRule{{match: isPart(2), kind: slowDown, times: 3}}},
		{name: "answer to the put lost", size: mib,
			rules: []faultRule{{match: isSinglePut, kind: lostAck, times: 1}}},
		{name: "answer to every try of the put lost", size: mib, retries: 3,
			rules: []faultRule{{match: isSinglePut, kind: lostAck, times: -1}}},
		{name: "answer to the completion lost", size: 11 * mib,
			rules: []faultRule{{match: isComplete, kind: lostAck, times: 1}}},
		// The retried completion gets NoSuchUpload, as S3 answers it: only
		// the token check can tell that the upload completed as this put's.
		{name: "answer to the completion lost, its retry answered NoSuchUpload", size: 11 * mib, injected: 2,
			rules: []faultRule{{match: isComplete, kind: lostAck, times: 1}, {match: isComplete, kind: noSuchUpload, times: -1}}},
		// A server out of space: not retried, the put fails wrapping ENOSPC
		// as on a full disk, nothing stored, the upload aborted.
		{name: "507 InsufficientStorage on a single put", size: mib, wantErr: true, enospc: true, injected: 1,
			rules: []faultRule{{match: isSinglePut, kind: insufficientStorage, times: -1}}},
		{name: "507 InsufficientStorage on part 2", size: 11 * mib, wantErr: true, enospc: true, injected: 1,
			rules: []faultRule{{match: isPart(2), kind: insufficientStorage, times: -1}}},
		{name: "latency on every chunk", size: 11 * mib, delay: time.Millisecond},
		{name: "reset mid-upload on every try", size: 3 * mib, retries: 3, wantErr: true,
			rules: []faultRule{{match: isSinglePut, kind: resetUpload, after: mib, times: -1}}},
		{name: "503 SlowDown on every try of part 2", size: 11 * mib, retries: 3, wantErr: true,
			rules: []faultRule{{match: isPart(2), kind: slowDown, times: -1}}},
	}
	srv := s3test.Endpoint(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct := s3test.Store(t)
			px := newTCPFaults(t, hostOf(t, srv.URL))
			st := viaFaults(t, srv, px, bucketOf(direct), tt.retries, false)
			for _, r := range tt.rules {
				px.add(r)
			}
			px.setDelay(tt.delay)
			data := randomBytes(uint64(100+i), tt.size)
			key := "faults/obj.parquet"
			// A body that cannot rewind: the store must make retries possible.
			err := st.Put(ctx, key, io.MultiReader(bytes.NewReader(data)), int64(len(data)))
			if len(tt.rules) > 0 && px.injected.Load() == 0 {
				t.Fatal("no fault was injected")
			}
			if n := px.injected.Load(); tt.injected != 0 && n != tt.injected {
				t.Fatalf("%d faults injected, want %d", n, tt.injected)
			}
			if n := pendingUploads(t, bucketOf(direct), key); n != 0 {
				t.Errorf("%d multipart uploads left unfinished", n)
			}
			px.clear()
			if tt.enospc != errors.Is(err, syscall.ENOSPC) {
				t.Errorf("put: %v; wraps ENOSPC %v, want %v", err, !tt.enospc, tt.enospc)
			}
			if tt.wantErr {
				wantOneLine(t, err, key)
				t.Logf("put failed: %v", err)
				wantAbsent(t, direct, key)
				return
			}
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if got := mustList(t, direct, ""); !slices.Equal(got, []string{key}) {
				t.Fatalf("bucket holds %q, want exactly the key", got)
			}
			if got := mustGet(t, direct, key); !bytes.Equal(got, data) {
				t.Fatalf("stored %d bytes differ from the %d put", len(got), len(data))
			}
			err = st.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
			if !errors.Is(err, storage.ErrExists) {
				t.Fatalf("second put: got %v, want ErrExists", err)
			}
		})
	}
}

// TestS3GetFaults reads objects through a proxy that breaks the download:
// a reader gets the whole object, resumed where the connection broke, or an
// error; never part of an object as if it were the whole.
func TestS3GetFaults(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Endpoint(t)
	direct := s3test.Store(t)
	data := randomBytes(200, 11<<20)
	mustPut(t, direct, "get/obj", data)
	tests := []struct {
		name    string
		rule    faultRule
		wantErr bool
	}{
		{"reset after 1 MiB of the answer, twice", faultRule{match: isObjectGet, kind: resetDownload, after: 1 << 20, times: 2}, false},
		{"reset after the head of the answer, five times", faultRule{match: isObjectGet, kind: resetDownload, after: 300, times: 5}, false},
		{"answer lost once", faultRule{match: isObjectGet, kind: lostAck, times: 1}, false},
		{"503 SlowDown three times", faultRule{match: isObjectGet, kind: slowDown, times: 3}, false},
		{"reset after 1 MiB of every answer: resumed to the end", faultRule{match: isObjectGet, kind: resetDownload, after: 1 << 20, times: -1}, false},
		{"reset after the head of every answer", faultRule{match: isObjectGet, kind: resetDownload, after: 300, times: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := newTCPFaults(t, hostOf(t, srv.URL))
			st := viaFaults(t, srv, px, bucketOf(direct), 3, false)
			px.add(tt.rule)
			got, err := getBytes(st, "get/obj")
			if px.injected.Load() == 0 {
				t.Fatal("no fault was injected")
			}
			if tt.wantErr {
				wantOneLine(t, err, "get/obj")
				t.Logf("get failed: %v", err)
				if len(got) >= len(data) {
					t.Fatalf("a failed read returned %d bytes", len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes that differ from the %d stored", len(got), len(data))
			}
		})
	}
	t.Run("committed Parquet file through resets", func(t *testing.T) {
		ref := storage.ManifestRef{RunID: "getfaults", Stage: "rollout"}
		e, err := storage.WriteFile(ctx, direct, ref.DataKey("segments", "big"), segmentsFooter("getfaults"), bigSegments())
		if err != nil {
			t.Fatal(err)
		}
		mustCommit(t, direct, ref, e)
		px := newTCPFaults(t, hostOf(t, srv.URL))
		st := viaFaults(t, srv, px, bucketOf(direct), 0, false)
		px.add(faultRule{match: isObjectGet, kind: resetDownload, after: 256 << 10, times: 4})
		files, err := storage.TableFiles(ctx, st, ref.RunID, "segments")
		if err != nil || len(files) != 1 {
			t.Fatalf("table files: %v, %v", files, err)
		}
		readRows(t, st, files[0])
		if px.injected.Load() < 2 {
			t.Fatalf("%d faults injected, want the manifest's and the file's reads broken", px.injected.Load())
		}
	})
}

// TestS3ServerRestartMidMultipart kills the S3 server (SIGKILL) while part
// 2 of a data file is being uploaded, starts it again on the same folder,
// and checks that the writer's file and commit land exactly once.
func TestS3ServerRestartMidMultipart(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Private(t)
	px := newTCPFaults(t, hostOf(t, srv.URL))
	bucket := s3test.NewBucketName()
	st := viaFaults(t, srv, px, bucket, 0, true)
	restarts := 0
	px.add(faultRule{name: "restart", match: isPart(2), kind: restart, after: 16 << 10, times: 1, hook: func() error {
		restarts++
		return srv.Restart()
	}})
	ref := storage.ManifestRef{RunID: "restart", Stage: "rollout"}
	key := ref.DataKey("segments", "big")
	e, err := storage.WriteFile(ctx, st, key, segmentsFooter("restart"), bigSegments())
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if e.Size <= 5<<20 {
		t.Fatalf("file of %d bytes: want a multipart upload", e.Size)
	}
	if restarts != 1 {
		t.Fatalf("server restarted %d times, want 1", restarts)
	}
	t.Logf("%d-byte file, %d requests through the proxy, server restarted after 16 KiB of part 2", e.Size, px.requests.Load())
	mustCommit(t, st, ref, e)

	direct, err := storage.OpenS3(ctx, bucket, "", srv.Options(false))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustList(t, direct, "runs/"); !slices.Equal(got, []string{key, ref.Key(1)}) {
		t.Fatalf("bucket holds %q", got)
	}
	if n := pendingUploadsOn(t, srv, bucket, key, ref.Key(1)); n != 0 {
		t.Errorf("%d multipart uploads left unfinished", n)
	}
	files, err := storage.TableFiles(ctx, direct, ref.RunID, "segments")
	if err != nil || len(files) != 1 {
		t.Fatalf("table files: %v, %v", files, err)
	}
	readRows(t, direct, files[0])
}

// TestS3ManifestRaceUnderFaults races two writers through a slow,
// throttling proxy, round after round. Writers of the same data key: one
// wins, the other gets ErrExists naming the key. Commits of the same key
// with different contents: one wins, the other gets ErrManifest naming the
// key. In both, the manifest names the winner's file once and readers read
// the winner's rows.
func TestS3ManifestRaceUnderFaults(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Endpoint(t)
	direct := s3test.Store(t)
	px := newTCPFaults(t, hostOf(t, srv.URL))
	stores := [2]*storage.S3Store{
		viaFaults(t, srv, px, bucketOf(direct), 0, false),
		viaFaults(t, srv, px, bucketOf(direct), 0, false),
	}
	px.setDelay(200 * time.Microsecond)
	rows := [2][]schemas.Segment{smallSegments(), synth.Run(synth.Config{RunID: "fault", Iterations: 1, Tasks: 1, GroupSize: 2, PromptTokens: 8, TurnTokens: 4, ObsTokens: 4})[0].Segments}
	const rounds = 6
	race := func(fn func(i int) error) [2]error {
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				errs[i] = fn(i)
			})
		}
		close(start)
		wg.Wait()
		return errs
	}
	winnerOf := func(t *testing.T, errs [2]error, want error, key string) int {
		t.Helper()
		switch {
		case errs[0] == nil && errs[1] == nil:
			t.Fatal("both writers won")
		case errs[0] != nil && errs[1] != nil:
			t.Fatalf("no writer won: %v; %v", errs[0], errs[1])
		}
		w := 0
		if errs[0] != nil {
			w = 1
		}
		if !errors.Is(errs[1-w], want) {
			t.Fatalf("loser: got %v, want %v", errs[1-w], want)
		}
		wantOneLine(t, errs[1-w], key)
		return w
	}
	check := func(t *testing.T, ref storage.ManifestRef, winner storage.FileEntry) {
		t.Helper()
		m, err := storage.Latest(ctx, direct, ref)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Files) != 1 || m.Files[0] != winner {
			t.Fatalf("manifest v%d lists %+v, want the winner's %+v once", m.Version, m.Files, winner)
		}
		readRows(t, direct, m.Files[0])
	}
	t.Run("same data key", func(t *testing.T) {
		for round := range rounds {
			px.add(faultRule{match: isSinglePut, kind: slowDown, times: 2})
			ref := storage.ManifestRef{RunID: "race", Iteration: round, Stage: "rollout"}
			key := ref.DataKey("segments", "shard-0")
			var entries [2]storage.FileEntry
			errs := race(func(i int) error {
				e, err := storage.WriteFile(ctx, stores[i], key, segmentsFooter("race"), rows[i])
				if err != nil {
					return err
				}
				entries[i] = e
				_, err = storage.Commit(ctx, stores[i], ref, []storage.FileEntry{e})
				return err
			})
			w := winnerOf(t, errs, storage.ErrExists, key)
			check(t, ref, entries[w])
		}
	})
	t.Run("same key committed with different contents", func(t *testing.T) {
		for round := range rounds {
			px.add(faultRule{match: isSinglePut, kind: slowDown, times: 2})
			ref := storage.ManifestRef{RunID: "race-commit", Iteration: round, Stage: "rollout"}
			var entries [2]storage.FileEntry
			for i := range 2 {
				// Each writer's file sits under its own key; both claim the
				// shared name in the manifest through a copy of the entry.
				e, err := storage.WriteFile(ctx, direct, ref.DataKey("segments", fmt.Sprintf("w%d", i)), segmentsFooter("race-commit"), rows[i])
				if err != nil {
					t.Fatal(err)
				}
				entries[i] = e
			}
			shared := ref.DataKey("segments", "shard-0")
			for i := range 2 {
				e := entries[i]
				e.Key = shared
				entries[i] = e
			}
			// The winner's object must exist for the readers: put the
			// first writer's bytes there only after the race decides.
			errs := race(func(i int) error {
				_, err := storage.Commit(ctx, stores[i], ref, []storage.FileEntry{entries[i]})
				return err
			})
			w := winnerOf(t, errs, storage.ErrManifest, shared)
			src := ref.DataKey("segments", fmt.Sprintf("w%d", w))
			mustPut(t, direct, shared, mustGet(t, direct, src))
			check(t, ref, entries[w])
		}
	})
}
