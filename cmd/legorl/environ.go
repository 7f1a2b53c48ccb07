package main

import (
	"context"
	"fmt"

	"github.com/legorl/legorl/storage"
)

// environ holds every setting legorl reads from the environment; this file
// is the only place that reads it.
type environ struct {
	Store      string // LEGORL_STORE: default store URI
	S3Endpoint string // LEGORL_S3_ENDPOINT
	AccessKey  string // AWS_ACCESS_KEY_ID
	SecretKey  string // AWS_SECRET_ACCESS_KEY
	Session    string // AWS_SESSION_TOKEN
	Region     string // AWS_REGION, else AWS_DEFAULT_REGION
}

// defaultStore is the embedded default: a folder in the working directory.
const defaultStore = "file://./legorl-data"

func readEnviron(getenv func(string) string) *environ {
	e := &environ{
		Store:      getenv("LEGORL_STORE"),
		S3Endpoint: getenv("LEGORL_S3_ENDPOINT"),
		AccessKey:  getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:  getenv("AWS_SECRET_ACCESS_KEY"),
		Session:    getenv("AWS_SESSION_TOKEN"),
		Region:     getenv("AWS_REGION"),
	}
	if e.Region == "" {
		e.Region = getenv("AWS_DEFAULT_REGION")
	}
	if e.Store == "" {
		e.Store = defaultStore
	}
	return e
}

// storeFlags are the flags every command that touches a store takes.
type storeFlags struct {
	uri      string
	endpoint string
}

func (f *storeFlags) register(fs interface {
	StringVar(*string, string, string, string)
}, env *environ) {
	fs.StringVar(&f.uri, "store", env.Store, "store URI: file:///abs/path, file://./rel/path or s3://bucket/prefix (env LEGORL_STORE)")
	fs.StringVar(&f.endpoint, "s3-endpoint", env.S3Endpoint, "S3 endpoint for s3:// stores, http(s)://host:port (env LEGORL_S3_ENDPOINT; default AWS)")
}

func (f *storeFlags) open(ctx context.Context, env *environ, create bool) (storage.Store, error) {
	st, err := storage.Open(ctx, f.uri, storage.Options{
		S3Endpoint: f.endpoint, AccessKey: env.AccessKey, SecretKey: env.SecretKey,
		SessionToken: env.Session, Region: env.Region, CreateBucket: create,
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}
