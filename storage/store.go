// Package storage keeps legorl's datasets on object storage: a small
// write-once object store over file:// and s3:// URIs, Parquet files written
// with parquet-go and read as Arrow record batches, and per-stage manifests
// that commit a set of files atomically.
//
// The protocol that makes retried or killed writers harmless:
//
//  1. A data file is written to a local temporary file, hashed, and put
//     under a fresh key with a write-once put. A writer that dies before the
//     put leaves nothing in the store; a put never replaces an object.
//  2. The file's key, size, row count and sha256 go into a manifest, and the
//     manifest is committed as the next version of a write-once versioned key
//     (runs/RUN/manifests/STAGE/iter-NNNNNN/vNNNNNN.json). Two writers racing
//     for the same version: one wins, the other re-reads and retries.
//  3. Readers only read files named by the newest manifest version, and check
//     each file's sha256 before decoding it. A file that no manifest names is
//     invisible, whatever is in the bucket.
package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Sentinel errors. Errors returned by this package wrap one of them, or a
// context error, and name the key involved.
var (
	ErrExists     = errors.New("storage: object already exists")
	ErrNotFound   = errors.New("storage: object not found")
	ErrInvalidKey = errors.New("storage: invalid object key")
	ErrInvalidURI = errors.New("storage: invalid store URI")
	ErrChecksum   = errors.New("storage: checksum mismatch")
	ErrCorrupt    = errors.New("storage: corrupt file")
	ErrManifest   = errors.New("storage: bad manifest")
	ErrConflict   = errors.New("storage: manifest commit kept conflicting")
	ErrNoData     = errors.New("storage: no committed data")
)

// Putter stores objects that are never overwritten.
type Putter interface {
	// Put stores size bytes from body under key, only if no object has that
	// key (ErrExists otherwise). Readers see the whole object or nothing.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
}

// Getter reads objects.
type Getter interface {
	// Get opens the object at key; ErrNotFound when there is none.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
}

// Lister lists objects.
type Lister interface {
	// List returns the keys under prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// Store is an object store with write-once puts: file:// (a local folder,
// the embedded default) or s3:// (MinIO, S3 or any S3-compatible server).
type Store interface {
	Putter
	Getter
	Lister
	// URI returns the store's URI, for messages.
	URI() string
}

// CheckKey reports whether key is a clean relative object key: non-empty
// segments separated by '/', no '.' or '..' segment, no backslash or NUL.
// Keys are built from run ids and table names that may come from users, so
// every backend checks them before touching the disk or the network.
func CheckKey(key string) error {
	if key == "" || len(key) > 1024 {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w: %q contains a backslash or NUL", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q has an empty, '.' or '..' segment", ErrInvalidKey, key)
		}
	}
	return nil
}

// Options configure Open. Only S3 stores use them.
type Options struct {
	// S3Endpoint is the S3 server, as http://host:port or https://host:port.
	// Defaults to https://s3.amazonaws.com.
	S3Endpoint string
	// AccessKey, SecretKey and SessionToken are the S3 credentials.
	// Defaults to anonymous access.
	AccessKey, SecretKey, SessionToken string
	// Region is the S3 region. Defaults to us-east-1.
	Region string
	// S3Retries is how many times one S3 request is tried before it fails:
	// connection errors, 5xx answers and throttling (503 SlowDown) are
	// retried with exponential backoff and jitter (200 ms doubling up to
	// 1 s). Defaults to 10.
	S3Retries int
	// CreateBucket makes Open create a missing bucket instead of failing.
	// Defaults to false.
	CreateBucket bool
}

// Open opens the store a URI names: file:///abs/path, file://./rel/path or
// s3://bucket/prefix. It checks that an S3 endpoint answers and the bucket
// exists, so a bad endpoint fails here with a one-line error, not later.
func Open(ctx context.Context, uri string, opts Options) (Store, error) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return nil, fmt.Errorf("%w: %q: want file:///abs/path or s3://bucket/prefix", ErrInvalidURI, uri)
	}
	switch scheme {
	case "file":
		if rest == "" {
			return nil, fmt.Errorf("%w: %q has no path", ErrInvalidURI, uri)
		}
		return NewFileStore(rest)
	case "s3":
		bucket, prefix, _ := strings.Cut(rest, "/")
		return OpenS3(ctx, bucket, strings.Trim(prefix, "/"), opts)
	default:
		return nil, fmt.Errorf("%w: %q: unknown scheme %q (want file or s3)", ErrInvalidURI, uri, scheme)
	}
}

// HashObject returns the hex sha256 of the object at key, the digest
// manifests record: a reader checks a stored file against its entry with it.
func HashObject(ctx context.Context, st Getter, key string) (string, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return "", fmt.Errorf("storage: read %s: %w", key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
