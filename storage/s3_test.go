package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
)

// s3Proxy is a reverse proxy in front of the test S3 server that counts
// the requests of a multipart upload and fails those that fail selects
// with 500 Internal Server Error.
type s3Proxy struct {
	URL                       string
	creates, parts, completes atomic.Int64
	failed                    atomic.Int64
}

func newS3Proxy(t *testing.T, fail func(*http.Request) bool) *s3Proxy {
	t.Helper()
	u, err := url.Parse(s3test.Endpoint(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &s3Proxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodPost && q.Has("uploads"):
			p.creates.Add(1)
		case r.Method == http.MethodPut && q.Has("uploadId"):
			p.parts.Add(1)
		case r.Method == http.MethodPost && q.Has("uploadId"):
			p.completes.Add(1)
		}
		if fail != nil && fail(r) {
			p.failed.Add(1)
			io.Copy(io.Discard, r.Body)
			http.Error(w, "injected failure", http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// s3Via opens bucket (which must exist) through endpoint, with the
// smallest part size S3 allows.
func s3Via(t *testing.T, endpoint, bucket string) *storage.S3Store {
	t.Helper()
	opts := s3test.Endpoint(t).Options(false)
	opts.S3Endpoint = endpoint
	st, err := storage.OpenS3(context.Background(), bucket, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	st.PartSize = 5 << 20
	return st
}

func bucketOf(st storage.Store) string { return strings.TrimPrefix(st.URI(), "s3://") }

// rawS3 is a plain minio-go client of the test server.
func rawS3(t *testing.T) minio.Core {
	t.Helper()
	return rawS3On(t, s3test.Endpoint(t))
}

// rawS3On is a plain minio-go client of srv.
func rawS3On(t *testing.T, srv *s3test.Server) minio.Core {
	t.Helper()
	u, _ := url.Parse(srv.URL)
	c, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Region: srv.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return minio.Core{Client: c}
}

// pendingUploads counts the multipart uploads of bucket that were neither
// completed nor aborted, listed over the whole bucket and under each of
// keys.
func pendingUploads(t *testing.T, bucket string, keys ...string) int {
	t.Helper()
	return pendingUploadsOn(t, s3test.Endpoint(t), bucket, keys...)
}

// pendingUploadsOn counts the unfinished multipart uploads of bucket on srv.
// MinIO lists a bucket's uploads without a prefix from a cache of its
// process (a restarted MinIO lists none) and with a prefix only those of
// the exact key; the keys the test wrote are listed one by one for that.
func pendingUploadsOn(t *testing.T, srv *s3test.Server, bucket string, keys ...string) int {
	t.Helper()
	seen := map[string]bool{}
	for _, prefix := range append([]string{""}, keys...) {
		for u := range rawS3On(t, srv).ListIncompleteUploads(context.Background(), bucket, prefix, true) {
			if u.Err != nil {
				t.Fatalf("list uploads: %v", u.Err)
			}
			seen[u.UploadID] = true
		}
	}
	return len(seen)
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestS3MultipartWriteOnce puts objects larger than one 5 MiB part, so they
// go up in a multipart upload, and checks that write-once still holds: the
// If-None-Match precondition must reach CompleteMultipartUpload.
func TestS3MultipartWriteOnce(t *testing.T) {
	ctx := context.Background()
	first := randomBytes(1, 11<<20) // three parts
	second := randomBytes(2, 6<<20)
	tests := []struct {
		name  string
		size  func(b []byte) int64
		parts int64 // parts of the first put
	}{
		{"known size", func(b []byte) int64 { return int64(len(b)) }, 3},
		{"unknown size", func([]byte) int64 { return -1 }, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := newS3Proxy(t, nil)
			st := s3Via(t, px.URL, bucketOf(s3test.Store(t)))
			// A non-seekable reader, so nothing can take a shortcut.
			if err := st.Put(ctx, "big/obj", io.MultiReader(bytes.NewReader(first)), tt.size(first)); err != nil {
				t.Fatal(err)
			}
			if px.creates.Load() != 1 || px.parts.Load() != tt.parts || px.completes.Load() != 1 {
				t.Fatalf("first put: %d creates, %d parts, %d completes: want a multipart upload of %d parts",
					px.creates.Load(), px.parts.Load(), px.completes.Load(), tt.parts)
			}
			for _, body := range [][]byte{second, first} {
				err := st.Put(ctx, "big/obj", bytes.NewReader(body), tt.size(body))
				if !errors.Is(err, storage.ErrExists) {
					t.Fatalf("second multipart put: got %v, want ErrExists", err)
				}
			}
			// versitygw refuses at the completion (3 completes), MinIO
			// already at CreateMultipartUpload (1 complete): both are
			// multipart puts refused.
			if px.creates.Load() != 3 || (px.completes.Load() != 3 && px.completes.Load() != 1) {
				t.Fatalf("%d creates, %d completes, want 3 creates: the later puts were not multipart", px.creates.Load(), px.completes.Load())
			}
			if got := mustGet(t, st, "big/obj"); !bytes.Equal(got, first) {
				t.Fatal("a second multipart put replaced the object")
			}
			if n := pendingUploads(t, bucketOf(st), "big/obj"); n != 0 {
				t.Errorf("%d refused uploads were not aborted", n)
			}
		})
	}
}

// TestS3MultipartKeyAppears puts the key while a multipart put of it is
// uploading its parts: the precondition on CompleteMultipartUpload is what
// refuses the put, on any server.
func TestS3MultipartKeyAppears(t *testing.T) {
	ctx := context.Background()
	bucket := bucketOf(s3test.Store(t))
	other := randomBytes(3, 1000)
	var once sync.Once
	px := newS3Proxy(t, func(r *http.Request) bool {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			once.Do(func() {
				if _, err := rawS3(t).PutObject(ctx, bucket, "big/obj", bytes.NewReader(other), int64(len(other)), "", "", minio.PutObjectOptions{}); err != nil {
					t.Errorf("put during the upload: %v", err)
				}
			})
		}
		return false
	})
	st := s3Via(t, px.URL, bucket)
	body := randomBytes(4, 11<<20)
	err := st.Put(ctx, "big/obj", bytes.NewReader(body), int64(len(body)))
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("put: got %v, want ErrExists", err)
	}
	if px.parts.Load() != 3 || px.completes.Load() != 1 {
		t.Fatalf("%d parts, %d completes: want the refusal at the completion of 3 parts", px.parts.Load(), px.completes.Load())
	}
	if got := mustGet(t, st, "big/obj"); !bytes.Equal(got, other) {
		t.Fatal("the multipart put replaced the object put during its upload")
	}
	if n := pendingUploads(t, bucket, "big/obj"); n != 0 {
		t.Errorf("%d refused uploads were not aborted", n)
	}
}

func TestS3PutSizes(t *testing.T) {
	ctx := context.Background()
	st := s3test.Store(t)
	st.PartSize = 5 << 20
	tests := []struct {
		name string
		n    int
		size int64 // -2: the length
	}{
		{"unknown size, one part", 1000, -1},
		{"unknown size, empty", 0, -1},
		{"unknown size, exactly one part", 5 << 20, -1},
		{"unknown size, exactly two parts", 10 << 20, -1},
		{"exactly one part", 5 << 20, -2},
		{"one byte over a part", 5<<20 + 1, -2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := randomBytes(uint64(i), tt.n)
			size := tt.size
			if size == -2 {
				size = int64(len(data))
			}
			key := "sizes/" + strings.ReplaceAll(tt.name, " ", "-")
			if err := st.Put(ctx, key, io.MultiReader(bytes.NewReader(data)), size); err != nil {
				t.Fatal(err)
			}
			if got := mustGet(t, st, key); !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, put %d", len(got), len(data))
			}
			if err := st.Put(ctx, key, bytes.NewReader(data), size); !errors.Is(err, storage.ErrExists) {
				t.Fatalf("second put: got %v, want ErrExists", err)
			}
		})
	}
}

func TestS3MultipartFailedBody(t *testing.T) {
	ctx := context.Background()
	st := s3test.Store(t)
	st.PartSize = 5 << 20
	tests := []struct {
		name string
		body io.Reader
		size int64
	}{
		{"fails in the second part", &failingReader{n: 7 << 20, err: errBoom}, 12 << 20},
		{"ends in the second part", bytes.NewReader(make([]byte, 7<<20)), 12 << 20},
		{"unknown size, fails in the second part", &failingReader{n: 7 << 20, err: errBoom}, -1},
	}
	t.Run("unfinished uploads are counted", func(t *testing.T) {
		c := rawS3(t)
		id, err := c.NewMultipartUpload(ctx, bucketOf(st), "pending", minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := pendingUploads(t, bucketOf(st), "pending"); n != 1 {
			t.Fatalf("%d pending uploads, want 1", n)
		}
		if err := c.AbortMultipartUpload(ctx, bucketOf(st), "pending", id); err != nil {
			t.Fatal(err)
		}
	})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "failed/" + string(rune('a'+i))
			if err := st.Put(ctx, key, tt.body, tt.size); err == nil {
				t.Fatal("put succeeded")
			}
			wantAbsent(t, st, key)
			if n := pendingUploads(t, bucketOf(st), key); n != 0 {
				t.Errorf("%d failed uploads were not aborted", n)
			}
		})
	}
	t.Run("context cancelled in the second part", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := &cancellingReader{first: make([]byte, 6<<20), cancel: cancel, ctx: cctx}
		err := st.Put(cctx, "failed/cancelled", r, 12<<20)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("put: got %v, want context.Canceled", err)
		}
		wantAbsent(t, st, "failed/cancelled")
		if n := pendingUploads(t, bucketOf(st), "failed/cancelled"); n != 0 {
			t.Errorf("%d cancelled uploads were not aborted", n)
		}
	})
}

func TestS3ConcurrentMultipartPuts(t *testing.T) {
	const n = 3
	st := s3test.Store(t)
	st.PartSize = 5 << 20
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = randomBytes(uint64(10+i), 6<<20)
	}
	winner := racePuts(t, st, "race/big", bodies)
	if got := mustGet(t, st, "race/big"); !bytes.Equal(got, bodies[winner]) {
		t.Fatalf("object is not the winner's (%d) body", winner)
	}
}
