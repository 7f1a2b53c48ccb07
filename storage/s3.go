package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/legorl/legorl/text"
)

// S3Store is a Store over an S3 bucket and key prefix, through minio-go.
// Puts carry If-None-Match: * (on the single PUT, or on
// CompleteMultipartUpload for large objects), so the server refuses to
// replace an existing key with 412 Precondition Failed. ProbeWriteOnce checks
// that a server honours it.
type S3Store struct {
	client   *minio.Client
	bucket   string
	prefix   string // "" or "a/b"
	endpoint string
	// PartSize is the multipart part size; objects larger than it are
	// uploaded in parts. Sizes under 5 MiB, the S3 minimum, count as 5 MiB.
	// Defaults to 64 MiB.
	PartSize uint64
}

// OpenS3 connects to bucket on the endpoint in opts and checks that it exists.
func OpenS3(ctx context.Context, bucket, prefix string, opts Options) (*S3Store, error) {
	if bucket == "" {
		return nil, fmt.Errorf("%w: s3 URI has no bucket", ErrInvalidURI)
	}
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("%w: s3 prefix: %v", ErrInvalidURI, err)
		}
	}
	endpoint := opts.S3Endpoint
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: s3 endpoint %q: want http://host:port or https://host:port", ErrInvalidURI, endpoint)
	}
	region := opts.Region
	if region == "" {
		region = "us-east-1"
	}
	retries := opts.S3Retries
	if retries <= 0 {
		retries = 10
	}
	var creds *credentials.Credentials
	if opts.AccessKey != "" {
		creds = credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, opts.SessionToken)
	} else {
		creds = credentials.New(&credentials.Static{}) // anonymous
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:        creds,
		Secure:       u.Scheme == "https",
		Region:       region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   retries,
	})
	if err != nil {
		return nil, fmt.Errorf("storage: s3 endpoint %s: %w", endpoint, err)
	}
	s := &S3Store{client: client, bucket: bucket, prefix: prefix, endpoint: endpoint, PartSize: 64 << 20}

	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ok, err := client.BucketExists(pctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("storage: s3 endpoint %s: %s", endpoint, text.OneLine(err.Error(), 0))
	}
	if !ok {
		if !opts.CreateBucket {
			return nil, fmt.Errorf("%w: s3 bucket %q does not exist at %s", ErrNotFound, bucket, endpoint)
		}
		if err := client.MakeBucket(pctx, bucket, minio.MakeBucketOptions{Region: region}); err != nil {
			return nil, fmt.Errorf("storage: create bucket %q at %s: %s", bucket, endpoint, text.OneLine(err.Error(), 0))
		}
	}
	return s, nil
}

// URI implements Store.
func (s *S3Store) URI() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + s.prefix
}

func (s *S3Store) object(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if s.prefix == "" {
		return key, nil
	}
	return path.Join(s.prefix, key), nil
}

// Put implements Putter. Objects up to PartSize go in one PUT; larger ones
// (and bodies of unknown size over one part) in a multipart upload whose
// CompleteMultipartUpload carries the precondition, so parts already
// uploaded never become visible when completion fails, and a failed upload
// is aborted.
//
// The multipart upload is driven here, part by part, rather than by
// minio-go's PutObject: minio-go v7.4.1 drops custom headers, If-None-Match
// included, from the CompleteMultipartUpload request (completeUploadOpts),
// so a large put silently replaced an existing object.
func (s *S3Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	token := newPutToken()
	ps := s.partSize()
	if size < 0 {
		// Unknown size: buffer one part to choose between one PUT and parts.
		buf := make([]byte, ps)
		n, rerr := io.ReadFull(body, buf)
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			body, size = bytes.NewReader(buf[:n]), int64(n)
		case rerr != nil:
			return s.putErr(ctx, key, obj, token, fmt.Errorf("read body: %w", rerr))
		default:
			body = io.MultiReader(bytes.NewReader(buf), body)
		}
	}
	if size >= 0 && size <= ps {
		if _, ok := body.(interface {
			io.ReaderAt
			io.Seeker
		}); !ok {
			// minio-go retries a request only when it can rewind the
			// body: hold a body that cannot rewind in memory (one part
			// at most).
			buf := make([]byte, size)
			if _, err := io.ReadFull(body, buf); err != nil {
				return s.putErr(ctx, key, obj, token, fmt.Errorf("read body: %w", err))
			}
			body = bytes.NewReader(buf)
		}
		opts := s.putOptions(key, token)
		opts.DisableMultipart = true // size <= ps: one PUT
		_, err = s.client.PutObject(ctx, s.bucket, obj, body, size, opts)
	} else {
		err = s.putMultipart(ctx, key, obj, token, body, size, ps)
	}
	if err != nil {
		return s.putErr(ctx, key, obj, token, err)
	}
	return nil
}

// putTokenMeta is the user metadata under which every put stores a random
// token of its own (x-amz-meta-legorl-put). A request whose answer was lost
// (a connection reset after the server stored the object) is retried, and
// the retry meets the object its first try stored: 412, or NoSuchUpload for
// a completed multipart upload. The token tells that object from another
// writer's, so the put reports success exactly when the object at the key is
// its own.
const putTokenMeta = "Legorl-Put"

func newPutToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// landed reports whether the object at obj was stored by the put that
// carried token.
func (s *S3Store) landed(ctx context.Context, obj, token string) bool {
	info, err := s.client.StatObject(ctx, s.bucket, obj, minio.StatObjectOptions{})
	return err == nil && info.Metadata.Get("X-Amz-Meta-"+putTokenMeta) == token
}

// minPartSize is the smallest part S3 accepts (every part but the last).
const minPartSize = 5 << 20

// maxParts is the most parts an S3 multipart upload may have.
const maxParts = 10000

func (s *S3Store) partSize() int64 {
	switch {
	case s.PartSize == 0:
		return 64 << 20
	case s.PartSize < minPartSize:
		return minPartSize
	case s.PartSize > 5<<30:
		return 5 << 30
	}
	return int64(s.PartSize)
}

func (s *S3Store) putOptions(key, token string) minio.PutObjectOptions {
	opts := minio.PutObjectOptions{ContentType: contentType(key), UserMetadata: map[string]string{putTokenMeta: token}}
	opts.SetMatchETagExcept("*") // If-None-Match: *
	return opts
}

// putMultipart uploads body (size bytes, or up to EOF when size < 0) in
// parts of partSize bytes and completes the upload under If-None-Match: *.
func (s *S3Store) putMultipart(ctx context.Context, key, obj, token string, body io.Reader, size, partSize int64) (err error) {
	core := minio.Core{Client: s.client}
	opts := s.putOptions(key, token)
	id, err := core.NewMultipartUpload(ctx, s.bucket, obj, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Best effort: parts of an unfinished upload are never visible,
			// but they hold space until aborted.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			core.AbortMultipartUpload(actx, s.bucket, obj, id)
		}
	}()
	buf := make([]byte, partSize)
	var parts []minio.CompletePart
	var total int64
	for num := 1; size < 0 || total < size; num++ {
		if num > maxParts {
			return fmt.Errorf("object needs more than %d parts of %d bytes: raise PartSize", maxParts, partSize)
		}
		want := partSize
		if size >= 0 {
			want = min(partSize, size-total)
		}
		n, rerr := io.ReadFull(body, buf[:want])
		if rerr != nil {
			eof := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
			if !eof {
				return fmt.Errorf("read body: %w", rerr)
			}
			if size >= 0 {
				return fmt.Errorf("body ended after %d of %d bytes", total+int64(n), size)
			}
		}
		if n == 0 {
			break // size < 0 and the body ended on a part boundary
		}
		p, err := core.PutObjectPart(ctx, s.bucket, obj, id, num, bytes.NewReader(buf[:n]), int64(n), minio.PutObjectPartOptions{})
		if err != nil {
			return err
		}
		parts = append(parts, minio.CompletePart{PartNumber: num, ETag: p.ETag})
		total += int64(n)
		if rerr != nil {
			break // size < 0 and the body ended
		}
	}
	var copts minio.PutObjectOptions
	copts.SetMatchETagExcept("*")
	_, err = core.CompleteMultipartUpload(ctx, s.bucket, obj, id, parts, copts)
	return err
}

// putErr maps a put failure to success when the object at the key is the
// put's own (an earlier try landed and its answer was lost), to ErrExists
// (412 Precondition Failed), to the context's error, or to a one-line error
// naming the key.
func (s *S3Store) putErr(ctx context.Context, key, obj, token string, err error) error {
	if ctx.Err() == nil && s.landed(ctx, obj, token) {
		return nil
	}
	if isPreconditionFailed(err) {
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	if isInsufficientStorage(err) && ctx.Err() == nil { // as a full disk is on the file store
		return fmt.Errorf("storage: put %s/%s: %s: %w", s.URI(), key, text.OneLine(err.Error(), 0), syscall.ENOSPC)
	}
	return s.opErr(ctx, "put", key, err)
}

// isInsufficientStorage reports a server out of space: 507
// InsufficientStorage (not retried: space does not come back by itself).
func isInsufficientStorage(err error) bool {
	var r minio.ErrorResponse
	return errors.As(err, &r) && (r.StatusCode == http.StatusInsufficientStorage || r.Code == "InsufficientStorage")
}

// opErr names the operation and key of a failure in one line, wrapping the
// context's error when the context ended, as the package promises.
func (s *S3Store) opErr(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("storage: %s %s/%s: %w", op, s.URI(), key, cerr)
	}
	return fmt.Errorf("storage: %s %s/%s: %s", op, s.URI(), key, text.OneLine(err.Error(), 0))
}

// Get implements Getter.
func (s *S3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	o, err := s.client.GetObject(ctx, s.bucket, obj, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.opErr(ctx, "get", key, err)
	}
	// GetObject is lazy: Stat forces the request so a missing key fails here.
	info, err := o.Stat()
	if err != nil {
		o.Close()
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, s.opErr(ctx, "get", key, err)
	}
	return &s3Reader{s: s, ctx: ctx, key: key, obj: obj, etag: info.ETag, size: info.Size, o: o}, nil
}

// maxResumes bounds how often an s3Reader reopens the object in a row
// without reading a byte.
const maxResumes = 5

// s3Reader reads an object and, when the connection breaks mid-body,
// reopens it at the offset reached (a Range request, If-Match the first
// answer's ETag), so a reset download costs a request, not the read. It
// returns io.EOF only after exactly the object's size was read: a reader
// never sees part of an object as if it were the whole.
type s3Reader struct {
	s         *S3Store
	ctx       context.Context
	key, obj  string
	etag      string
	size, off int64
	o         *minio.Object
	fails     int
	err       error // sticky
}

func (r *s3Reader) Read(p []byte) (int, error) {
	for r.err == nil {
		n, err := r.o.Read(p)
		r.off += int64(n)
		if n > 0 {
			r.fails = 0
		}
		switch {
		case err == io.EOF && r.off == r.size:
			return n, io.EOF
		case err == io.EOF:
			err = io.ErrUnexpectedEOF
		case err == nil:
			return n, nil
		}
		if r.off > r.size {
			r.err = fmt.Errorf("storage: get %s/%s: read %d bytes of a %d-byte object", r.s.URI(), r.key, r.off, r.size)
		} else if cerr := r.ctx.Err(); cerr != nil {
			r.err = r.s.opErr(r.ctx, "get", r.key, cerr)
		} else if r.fails++; r.fails > maxResumes {
			r.err = fmt.Errorf("storage: get %s/%s: broken at byte %d of %d %d times in a row: %s", r.s.URI(), r.key, r.off, r.size, maxResumes+1, text.OneLine(err.Error(), 0))
		} else {
			r.err = r.reopen()
		}
		if n > 0 {
			return n, nil // the error, if any, comes with the next read
		}
	}
	return 0, r.err
}

// reopen continues the object at r.off.
func (r *s3Reader) reopen() error {
	r.o.Close()
	var opts minio.GetObjectOptions
	opts.SetMatchETag(r.etag)
	if r.off > 0 {
		opts.SetRange(r.off, 0) // bytes=off-
	}
	o, err := r.s.client.GetObject(r.ctx, r.s.bucket, r.obj, opts)
	if err != nil {
		return r.s.opErr(r.ctx, "get", r.key, err)
	}
	r.o = o
	return nil
}

func (r *s3Reader) Close() error { return r.o.Close() }

// List implements Lister.
func (s *S3Store) List(ctx context.Context, prefix string) ([]string, error) {
	full := prefix
	if s.prefix != "" {
		full = s.prefix + "/" + prefix
	}
	var keys []string
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: full, Recursive: true}) {
		if o.Err != nil {
			return nil, s.opErr(ctx, "list", prefix, o.Err)
		}
		k := o.Key
		if s.prefix != "" {
			k = strings.TrimPrefix(k, s.prefix+"/")
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

// ProbeWriteOnce checks that the server refuses to overwrite an object under
// If-None-Match: * by putting the same probe key twice under prefix. Servers
// that ignore the header would let a retried writer replace committed data,
// so callers that rely on write-once should probe a new endpoint first.
func (s *S3Store) ProbeWriteOnce(ctx context.Context, probeKey string) error {
	if err := s.Put(ctx, probeKey, strings.NewReader("probe"), 5); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	err := s.Put(ctx, probeKey, strings.NewReader("probe"), 5)
	if errors.Is(err, ErrExists) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("storage: %s ignores If-None-Match: an existing object was overwritten", s.endpoint)
}

func isPreconditionFailed(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed"
}

func contentType(key string) string {
	switch path.Ext(key) {
	case ".json":
		return "application/json"
	case ".parquet":
		return "application/vnd.apache.parquet"
	default:
		return "application/octet-stream"
	}
}
