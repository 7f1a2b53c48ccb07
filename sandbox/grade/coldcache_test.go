package grade_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// coldWorkerEnv makes the test binary a grading worker (see TestMain):
// it grades every Go instance of the suite in $LEGORL_COLD_SUITE with the
// gold patch, the Go build cache seeded under $LEGORL_COLD_CACHE, and
// prints one JSON grade per line.
const coldWorkerEnv = "LEGORL_COLD_WORKER"

// coldWorker is the worker's body; it returns the process's exit code.
func coldWorker() int {
	suite, err := tasks.Load(os.Getenv("LEGORL_COLD_SUITE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ins := suite.Instances
	if os.Getenv(coldWorkerEnv) == "reverse" {
		slices.Reverse(ins)
	}
	gr := grade.New(local.New(local.Options{}), grade.Options{CacheDir: os.Getenv("LEGORL_COLD_CACHE")})
	suiteDir := filepath.Dir(os.Getenv("LEGORL_COLD_SUITE"))
	enc := json.NewEncoder(os.Stdout)
	for i := range ins {
		if ins[i].Language != "go" {
			continue
		}
		g, err := gr.Grade(context.Background(), suiteDir, &ins[i], ins[i].Patch)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		enc.Encode(g)
	}
	return 0
}

// TestGoGradeColdCache: on a machine with no Go build cache (an empty
// CacheDir), the suite's Go tasks graded by two processes at once, each
// with its own Grader over the same CacheDir, all pass with the gold
// patch; and no grade changes the seed cache the next grades start from.
// Before the per-grade writable cache, go test failed here with "open
// /legorl/gocache/...: read-only file system" ([setup failed]) and the
// gold patch was scored 0.
func TestGoGradeColdCache(t *testing.T) {
	dir := t.TempDir()
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: 13, Seed: 11, Languages: []string{"go"}})
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cold")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	for w, mode := range []string{"forward", "reverse"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), coldWorkerEnv+"="+mode, "LEGORL_COLD_SUITE="+filepath.Join(dir, "tasks.jsonl"), "LEGORL_COLD_CACHE="+cache)
			cmd.Stdout = &outs[w]
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				errs[w] = fmt.Errorf("worker %s: %v: %s", mode, err, stderr.String())
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for w := range outs {
		sc := bufio.NewScanner(&outs[w])
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var g grade.Grade
			if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
				t.Fatal(err)
			}
			n++
			if g.Reward != 1 || g.Outcome != sandbox.OutcomeCompleted {
				t.Errorf("worker %d: %s: gold patch graded reward %v outcome %s: %s", w, g.InstanceID, g.Reward, g.Outcome, g.Detail)
			}
		}
	}
	if want := 2 * len(ins); n != want {
		t.Fatalf("%d grades, want %d", n, want)
	}

	// The seed is read-only to every grade: a further grade (one whose
	// package the seed does not hold) leaves it byte for byte as it was.
	before := treeDigest(t, cache)
	gr := grade.New(backend(), grade.Options{CacheDir: cache})
	if g, err := gr.Grade(context.Background(), dir, &ins[0], ins[0].Patch); err != nil || g.Reward != 1 {
		t.Fatalf("grade after the workers: %+v %v", g, err)
	}
	if after := treeDigest(t, cache); after != before {
		t.Fatalf("grading changed the seed cache:\nbefore %s\nafter  %s", before, after)
	}
}

// treeDigest hashes every path, mode and content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			line += " " + hex.EncodeToString(s[:8])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	s := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("%d entries, %x", len(lines), s[:8])
}
