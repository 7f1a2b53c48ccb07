package s3test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/legorl/legorl/storage"
)

func TestMain(m *testing.M) { Main(m) }

// TestServerHonoursIfNoneMatch proves the property the commit protocol
// relies on: a second put of an existing key gets 412, not an overwrite.
func TestServerHonoursIfNoneMatch(t *testing.T) {
	st := Store(t)
	ctx := context.Background()
	if err := st.ProbeWriteOnce(ctx, "probe/write-once"); err != nil {
		t.Fatalf("server does not honour If-None-Match: %v", err)
	}
	err := st.Put(ctx, "probe/write-once", strings.NewReader("other"), 5)
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second put: got %v, want ErrExists", err)
	}
	rc, err := st.Get(ctx, "probe/write-once")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "probe" {
		t.Fatalf("object was overwritten: %q", b)
	}
}

// TestServerIfNoneMatch records, request by request, what the server does
// with If-None-Match: * on a single PUT, on CreateMultipartUpload and on
// CompleteMultipartUpload, through a plain client (no retries by legorl, no
// token check). It asserts what legorl's write-once promise needs: a 412 on
// a PUT or a completion whose key exists, whether the key existed before the
// upload began or appeared during it, and the object left as it was. Where
// servers may differ (a precondition on CreateMultipartUpload) it logs the
// answer; the storage tests prove legorl correct either way.
func TestServerIfNoneMatch(t *testing.T) {
	srv := Endpoint(t)
	st := Store(t)
	bucket := strings.TrimPrefix(st.URI(), "s3://")
	ctx := context.Background()
	u, _ := url.Parse(srv.URL)
	c, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Region: srv.Region,
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	core := minio.Core{Client: c}
	ifNoneMatch := func() minio.PutObjectOptions {
		var o minio.PutObjectOptions
		o.SetMatchETagExcept("*")
		return o
	}
	answer := func(err error) string {
		if err == nil {
			return "200 OK"
		}
		r := minio.ToErrorResponse(err)
		return fmt.Sprintf("%d %s", r.StatusCode, r.Code)
	}
	put := func(key, body string, opts minio.PutObjectOptions) error {
		_, err := core.PutObject(ctx, bucket, key, strings.NewReader(body), int64(len(body)), "", "", opts)
		return err
	}
	content := func(key string) string {
		o, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		b, err := io.ReadAll(o)
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		return string(b)
	}
	// upload runs a one-part multipart upload of body: created with opts,
	// completed with copts; between runs after the part is uploaded.
	upload := func(key, body string, opts, copts minio.PutObjectOptions, between func()) (create, complete error) {
		id, err := core.NewMultipartUpload(ctx, bucket, key, opts)
		if err != nil {
			return err, nil
		}
		p, err := core.PutObjectPart(ctx, bucket, key, id, 1, strings.NewReader(body), int64(len(body)), minio.PutObjectPartOptions{})
		if err != nil {
			t.Fatalf("upload part: %v", err)
		}
		if between != nil {
			between()
		}
		_, err = core.CompleteMultipartUpload(ctx, bucket, key, id, []minio.CompletePart{{PartNumber: 1, ETag: p.ETag}}, copts)
		if err != nil {
			// Refused: the upload is legorl's to abort.
			if aerr := core.AbortMultipartUpload(ctx, bucket, key, id); aerr != nil {
				t.Logf("%s: abort after a refused completion: %s", srv.Kind, answer(aerr))
			}
		}
		return nil, err
	}
	is412 := func(t *testing.T, what string, err error) {
		t.Helper()
		t.Logf("%s: %s: %s", srv.Kind, what, answer(err))
		if r := minio.ToErrorResponse(err); r.StatusCode != http.StatusPreconditionFailed {
			t.Errorf("%s: got %s, want 412 PreconditionFailed", what, answer(err))
		}
	}

	t.Run("single PUT", func(t *testing.T) {
		err := put("put", "first", ifNoneMatch())
		t.Logf("%s: PUT of an absent key: %s", srv.Kind, answer(err))
		if err != nil {
			t.Fatal(err)
		}
		is412(t, "PUT of an existing key", put("put", "second", ifNoneMatch()))
		if got := content("put"); got != "first" {
			t.Errorf("object is %q, want %q", got, "first")
		}
	})
	t.Run("multipart, key exists before the upload", func(t *testing.T) {
		if err := put("mp-before", "first", minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		create, _ := upload("mp-before", "second", ifNoneMatch(), ifNoneMatch(), nil)
		t.Logf("%s: CreateMultipartUpload of an existing key: %s", srv.Kind, answer(create))
		_, complete := upload("mp-before", "second", minio.PutObjectOptions{}, ifNoneMatch(), nil)
		is412(t, "CompleteMultipartUpload of an existing key (created without the header)", complete)
		if got := content("mp-before"); got != "first" {
			t.Errorf("object is %q, want %q", got, "first")
		}
	})
	t.Run("multipart, key appears during the upload", func(t *testing.T) {
		create, complete := upload("mp-during", "second", ifNoneMatch(), ifNoneMatch(), func() {
			if err := put("mp-during", "first", ifNoneMatch()); err != nil {
				t.Fatalf("PUT during the upload: %v", err)
			}
		})
		if create != nil {
			t.Fatalf("CreateMultipartUpload of an absent key: %s", answer(create))
		}
		is412(t, "CompleteMultipartUpload of a key put during the upload", complete)
		if got := content("mp-during"); got != "first" {
			t.Errorf("object is %q, want %q", got, "first")
		}
	})
	t.Run("multipart without the header overwrites", func(t *testing.T) {
		// The control: without the precondition the server replaces the
		// object, so the 412s above are the header's doing.
		if err := put("mp-plain", "first", minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		_, complete := upload("mp-plain", "second", minio.PutObjectOptions{}, minio.PutObjectOptions{}, nil)
		t.Logf("%s: CompleteMultipartUpload of an existing key, no header: %s", srv.Kind, answer(complete))
		if complete != nil {
			t.Fatal(complete)
		}
		if got := content("mp-plain"); got != "second" {
			t.Errorf("object is %q, want %q", got, "second")
		}
	})
}
