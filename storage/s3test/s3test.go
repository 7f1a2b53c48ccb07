// Package s3test gives tests a real S3 server on 127.0.0.1 with a temporary
// data folder, started once per test binary: versitygw (Apache-2.0) by
// default, MinIO when LEGORL_TEST_S3_SERVER=minio; or a user's endpoint
// (MinIO, S3) when LEGORL_TEST_S3_ENDPOINT is set.
//
// MinIO is AGPL-3.0: it is only ever run here as a separate server binary
// (make test-minio builds it into .cache/bin), never imported.
//
// Tests that need S3 call Endpoint; when no server can be had they fail,
// they do not skip. Packages call Main from TestMain so the server stops
// when the tests end.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/storage"
)

// Server is a running S3 endpoint and its root credentials.
type Server struct {
	URL       string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Region    string
	// Kind is the server s3test started, Versitygw or MinIO, or "" for an
	// external endpoint.
	Kind     string
	external bool

	cmd    *exec.Cmd
	exited chan error
	bin    string
	port   int
	dir    string
}

var (
	once   sync.Once
	shared *Server
	errS   error
)

// Main runs the tests and then stops the server if one was started.
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// Endpoint returns the shared server, starting it on first use. It fails
// the test when the server cannot start.
func Endpoint(tb testing.TB) *Server {
	tb.Helper()
	once.Do(func() { shared, errS = start() })
	if errS != nil {
		tb.Fatalf("s3test: no S3 server: %v", errS)
	}
	return shared
}

// Store opens a store on a new, empty bucket of the shared server.
func Store(tb testing.TB) *storage.S3Store {
	tb.Helper()
	srv := Endpoint(tb)
	st, err := storage.OpenS3(context.Background(), NewBucketName(), "", srv.Options(true))
	if err != nil {
		tb.Fatalf("s3test: open store: %v", err)
	}
	return st
}

// Options returns storage options for the server.
func (s *Server) Options(create bool) storage.Options {
	return storage.Options{S3Endpoint: s.URL, AccessKey: s.AccessKey, SecretKey: s.SecretKey, Region: s.Region, CreateBucket: create}
}

// NewBucketName returns a unique bucket name.
func NewBucketName() string {
	var b [6]byte
	rand.Read(b[:])
	return "legorl-test-" + hex.EncodeToString(b[:])
}

// The servers s3test can start.
const (
	Versitygw = "versitygw"
	MinIO     = "minio"
)

// serverKind is the server LEGORL_TEST_S3_SERVER names; versitygw when unset.
func serverKind() (string, error) {
	switch k := os.Getenv("LEGORL_TEST_S3_SERVER"); k {
	case "", Versitygw:
		return Versitygw, nil
	case MinIO:
		return MinIO, nil
	default:
		return "", fmt.Errorf("LEGORL_TEST_S3_SERVER=%q: want %s or %s", k, Versitygw, MinIO)
	}
}

func start() (*Server, error) {
	if ep := os.Getenv("LEGORL_TEST_S3_ENDPOINT"); ep != "" {
		return &Server{
			URL: ep, external: true,
			AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
			Region: firstNonEmpty(os.Getenv("AWS_REGION"), "us-east-1"),
		}, nil
	}
	return startLocal()
}

// Private starts a server of the test's own, of the kind
// LEGORL_TEST_S3_SERVER names, stopped when the test ends, for tests that
// stop and restart it (Restart). It fails the test when the server cannot
// start; an external endpoint cannot stand in.
func Private(tb testing.TB) *Server {
	tb.Helper()
	s, err := startLocal()
	if err != nil {
		tb.Fatalf("s3test: no S3 server: %v", err)
	}
	tb.Cleanup(s.stop)
	return s
}

func startLocal() (*Server, error) {
	kind, err := serverKind()
	if err != nil {
		return nil, err
	}
	bin, err := findBinary(kind)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "legorl-"+kind+"-*")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: fmt.Sprintf("http://127.0.0.1:%d", port), AccessKey: "legorltest", SecretKey: "legorltestsecret",
		Region: "us-east-1", Kind: kind, dir: dir, bin: bin, port: port,
	}
	if err := s.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// startTimeout bounds a server's start: MinIO formats its drive on first
// start, which takes seconds on a loaded machine.
const startTimeout = 60 * time.Second

// command returns the server's command line and readiness URL.
func (s *Server) command() (*exec.Cmd, string) {
	addr := fmt.Sprintf("127.0.0.1:%d", s.port)
	if s.Kind == MinIO {
		// One drive (MinIO's single-node single-drive mode), no console,
		// no update check, no root-drive refusal; ready once it can serve
		// S3 requests.
		cmd := exec.Command(s.bin, "server", "--address", addr, "--quiet", s.dir)
		cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
			"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on", "MINIO_REGION="+s.Region)
		return cmd, s.URL + "/minio/health/ready"
	}
	return exec.Command(s.bin, "--access", s.AccessKey, "--secret", s.SecretKey,
		"--port", addr, "--quiet", "posix", s.dir), s.URL + "/"
}

// launch starts the server process and waits until it answers.
func (s *Server) launch() error {
	cmd, ready := s.command()
	s.cmd = cmd
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	s.exited = exited
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if s.Kind != MinIO || resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			s.cmd = nil
			return fmt.Errorf("%s exited at start: %v", s.bin, err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("%s did not answer on %s within %v", s.bin, s.URL, startTimeout)
		}
	}
}

// Restart kills the server (SIGKILL: no clean shutdown) and starts it again
// on the same address and data folder.
func (s *Server) Restart() error {
	if s.external || s.bin == "" {
		return errors.New("s3test: only a server started by s3test can be restarted")
	}
	s.kill()
	return s.launch()
}

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

func (s *Server) stop() {
	if s.external {
		return
	}
	s.kill()
	os.RemoveAll(s.dir)
}

// findBinary finds the server binary of kind: $LEGORL_VERSITYGW or
// $LEGORL_MINIO, then .cache/bin in the module root (where make installs
// it), then $PATH.
func findBinary(kind string) (string, error) {
	env, target := "LEGORL_VERSITYGW", "make tools"
	if kind == MinIO {
		env, target = "LEGORL_MINIO", "make test-minio"
	}
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".cache", "bin", kind)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(kind); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found: run `%s` (installs it into .cache/bin) or set %s", kind, target, env)
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/legorl/legorl\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("module root not found")
		}
		dir = parent
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
