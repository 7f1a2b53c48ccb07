package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/lease"
)

// TestRunRefusesHeldLease: a `legorl run` of a run whose lease another
// machine holds stops before it writes anything, with one line naming the
// holder. (storage/lease TestTwoProcesses covers renewal and takeover
// with two processes, on the file store and on S3.)
func TestRunRefusesHeldLease(t *testing.T) {
	dir := t.TempDir()
	cfg := loopTestConfig(t, dir)
	st, err := storage.NewFileStore(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"run": "loop-test", "owner": "gpu-7 pid 4242", "host": "gpu-7", "pid": 4242, "expires": %q, "seq": 1}`,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if err := st.Put(context.Background(), lease.Prefix("loop-test")+"000001.json", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	code, _, stderr := runCLI(t, testEnv(nil), "run", "--config", cfg, "--agent", self)
	if code == 0 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "run loop-test: lease: run is held by gpu-7 pid 4242 until ") {
		t.Fatalf("exit %d, stderr %q; want one line naming the holder", code, stderr)
	}
	if keys, _ := st.List(context.Background(), "runs/loop-test/"); len(keys) != 1 {
		t.Errorf("the refused run wrote %v", keys)
	}
}
