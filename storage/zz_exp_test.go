package storage_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
)


func TestExpMultipart(t *testing.T) {
	srv := s3test.Endpoint(t)
	u, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Logf("%s %s INM=%q", r.Method, r.URL.RequestURI(), r.Header.Get("If-None-Match"))
		rp.ServeHTTP(w, r)
	}))
	defer px.Close()
	opts := srv.Options(true)
	opts.S3Endpoint = px.URL
	st, err := storage.OpenS3(context.Background(), s3test.NewBucketName(), "", opts)
	if err != nil { t.Fatal(err) }
	st.PartSize = 5 << 20
	ctx := context.Background()
	a := make([]byte, 6<<20)
	rand.Read(a)
	b := make([]byte, 6<<20)
	rand.Read(b)
	err = st.Put(ctx, "big", bytes.NewReader(a), int64(len(a)))
	t.Logf("first: %v", err)
	err = st.Put(ctx, "big", bytes.NewReader(b), int64(len(b)))
	t.Logf("second: %v", err)
	rc, err := st.Get(ctx, "big")
	if err != nil { t.Fatal(err) }
	got, _ := io.ReadAll(rc)
	t.Logf("equal a: %v equal b: %v", bytes.Equal(got, a), bytes.Equal(got, b))
}
