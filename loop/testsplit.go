package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// The test split. Every config is tuned on its validation yardstick, the
// held-out splits of its own suite (eval.splits of the built-in suite of
// builtin.seed); the number a results row reports comes from a test suite
// nobody tuned on: the built-in suite of the same size and languages,
// generated after the config is frozen, from a seed derived from the
// config's own hash (ConfigHash, TestSeed). A run evaluates its starting
// policy and its kept policy (the one the final eval measures) on it, in
// every mode of its evals, on as many tasks as the validation evals: rows
// whose split is SplitTest (the test suite's heldout split) or
// SplitTestFamily (its heldout_family split), beside the validation rows.
// A suite given as a file (Config.Tasks) has no test suite.

// The test rows' split names: a validation split's test counterpart.
const (
	SplitTest       = "test"
	SplitTestFamily = "test_family"
)

// testSplit is the test row name of a validation split.
func testSplit(split string) string {
	if split == tasks.SplitHeldoutFamily {
		return SplitTestFamily
	}
	return SplitTest
}

// TestSuite records a run's test suite, as the summary's test_suite.
type TestSuite struct {
	// ConfigHash is ConfigHash of the config when the suite was made (the
	// sha256 of its canonical JSON, in hex).
	ConfigHash string `json:"config_hash"`
	// Seed is the built-in generator's seed: TestSeed(ConfigHash).
	Seed uint64 `json:"seed"`
	// N and Languages are the config's builtin.n and builtin.languages.
	N         int      `json:"n"`
	Languages []string `json:"languages,omitempty"`
	// Generated is how many of the suite's N instances were generated: its
	// first ones, enough to hold the first eval.max_tasks tasks of every
	// eval split, the only tasks evaluated (N when eval.max_tasks is 0).
	// Each built-in instance is a function of the seed and its index
	// alone, so they are the whole suite's own first instances; making
	// only them spares minutes of generating large suites.
	Generated int `json:"generated"`
}

// hashExcluded are the config fields ConfigHash leaves out: where a run's
// files live, not what it does (a run moved to another store or work
// folder keeps its test suite).
var hashExcluded = []string{"store", "s3_endpoint", "work_dir"}

// CanonicalConfig is the text ConfigHash hashes: the config with its
// defaults applied (what `legorl run --print-config` prints), less store,
// s3_endpoint and work_dir, as JSON with every object's keys sorted, no
// whitespace, and every member whose value is zero (0, false, "", null,
// [] or {}) left out, at any depth (a zero field means its default, so a
// field added to Config later with a zero default leaves every hash as it
// was). The run id is in it: each replicate of a config (its own run id)
// gets its own test suite. Numbers keep their JSON text.
func CanonicalConfig(c Config) ([]byte, error) {
	b, err := json.Marshal(c.WithDefaults())
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	for _, k := range hashExcluded {
		delete(v, k)
	}
	return json.Marshal(pruneZero(v))
}

// ConfigHash is the sha256, in hex, of CanonicalConfig(c): the same for
// any field order and whitespace of the config file, different when any
// field CanonicalConfig keeps changes.
func ConfigHash(c Config) (string, error) {
	b, err := CanonicalConfig(c)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// TestSeed is the test suite's seed of a ConfigHash: its first 8 bytes,
// big-endian.
func TestSeed(configHash string) (uint64, error) {
	b, err := hex.DecodeString(configHash)
	if err != nil || len(b) < 8 {
		return 0, fmt.Errorf("%w: config hash %q is not a sha256 in hex", ErrConfig, configHash)
	}
	return binary.BigEndian.Uint64(b[:8]), nil
}

// pruneZero removes, depth first, every object member whose value is
// zero; array elements stay (their position means something).
func pruneZero(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			m = pruneZero(m)
			if isZero(m) {
				delete(x, k)
			} else {
				x[k] = m
			}
		}
		return x
	case []any:
		for i := range x {
			x[i] = pruneZero(x[i])
		}
		return x
	}
	return v
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// testSuiteRecord is the file that records the test suite a work folder
// holds, and testSuiteDir the suite.
func (l *looper) testSuiteRecord() string { return filepath.Join(l.cfg.WorkDir, "test-suite.json") }
func (l *looper) testSuiteDir() string    { return filepath.Join(l.cfg.WorkDir, "test-suite") }

// prepareTest makes (once) the run's test suite under WorkDir/test-suite
// and records it in WorkDir/test-suite.json; a run that finds them reuses
// them, whatever its config hashes to now (the suite of the config as it
// was first run stays: a run extended with more iterations is measured on
// the suite it started with, and says so). It logs the seed, and checks
// that the suite's gold patches pass here. A run of a suite file has none.
func (l *looper) prepareTest(ctx context.Context) error {
	if l.cfg.Tasks != "" {
		l.logf("no test suite: the tasks are a suite file (%s), not the built-in generator's", l.cfg.Tasks)
		return nil
	}
	hash, err := ConfigHash(l.cfg)
	if err != nil {
		return err
	}
	rec, err := readTestSuite(l.testSuiteRecord())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		seed, err := TestSeed(hash)
		if err != nil {
			return err
		}
		rec = &TestSuite{ConfigHash: hash, Seed: seed, N: l.cfg.Builtin.N, Languages: l.cfg.Builtin.Languages}
		dir := l.testSuiteDir()
		if err := os.RemoveAll(dir); err != nil { // a suite without its record: made by a run that stopped before recording it
			return err
		}
		l.logf("generating the test suite (the built-in suite of %d instances and seed %d, from the config's hash %s) in %s", rec.N, rec.Seed, hash, dir)
		start := time.Now()
		if rec.Generated, err = l.generateTest(ctx, dir, rec); err != nil {
			return fmt.Errorf("test suite: %w", err)
		}
		body, _ := json.MarshalIndent(rec, "", "  ")
		if err := atomicFile(l.testSuiteRecord(), append(body, '\n')); err != nil {
			return err
		}
		l.logf("test suite: its first %d of %d instances (every eval split's first eval.max_tasks tasks) generated in %s", rec.Generated, rec.N, time.Since(start).Round(time.Second))
		l.did("generate the test suite")
	case err != nil:
		return err
	case rec.ConfigHash != hash:
		l.logf("test suite: seed %d, from the config's hash when the run began (%s); the config hashes to %s now (changed since): the run keeps its suite", rec.Seed, rec.ConfigHash, hash)
	default:
		l.logf("test suite: seed %d, from the config's hash %s", rec.Seed, rec.ConfigHash)
	}
	s, err := tasks.Load(l.testSuiteDir())
	if err != nil {
		return fmt.Errorf("test suite: %w", err)
	}
	if err := rollout.CheckGrading(ctx, l.cfg.Rollout.Backend, s.Dir, s.Instances); err != nil {
		return fmt.Errorf("test suite: %w", err)
	}
	l.test = rec
	return nil
}

// generateTest generates the test suite's first instances into dir (see
// TestSuite.Generated): ten per eval.max_tasks task to start with (a
// heldout task is about one instance in six), twice as many while an
// eval split has fewer than eval.max_tasks tasks and instances are left.
// It returns how many it generated.
func (l *looper) generateTest(ctx context.Context, dir string, rec *TestSuite) (int, error) {
	need := l.cfg.Eval.MaxTasks
	n := rec.N
	if need > 0 {
		n = min(rec.N, 10*need)
	}
	for {
		var ins []tasks.Instance
		err := atomicDir(dir, func(tmp string) error {
			var err error
			ins, err = builtin.Generate(ctx, tmp, builtin.Options{N: n, Seed: rec.Seed, Languages: rec.Languages})
			return err
		})
		if err != nil || n == rec.N || !slices.ContainsFunc(l.cfg.Eval.Splits, func(split string) bool {
			return countValid(ins, split) < need
		}) {
			return n, err
		}
		if err := os.RemoveAll(dir); err != nil {
			return 0, err
		}
		n = min(rec.N, 2*n)
	}
}

// countValid counts the valid instances of a split.
func countValid(ins []tasks.Instance, split string) int {
	n := 0
	for _, in := range ins {
		if in.Split == split && in.Check() == nil {
			n++
		}
	}
	return n
}

// readTestSuite reads a test-suite.json.
func readTestSuite(path string) (*TestSuite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t TestSuite
	if err := json.Unmarshal(b, &t); err != nil || t.ConfigHash == "" {
		return nil, fmt.Errorf("%w: %s is not a test suite record (%v): remove it and the test-suite folder beside it to make the suite again", ErrConfig, path, err)
	}
	return &t, nil
}

// testEvalTasks is the task file of a test row: the first eval.max_tasks
// valid tasks of split (heldout or heldout_family) of the test suite, as
// many as the validation eval of split takes.
func (l *looper) testEvalTasks(split string) (string, []tasks.Instance, error) {
	if l.testInstances == nil {
		all, err := loadSuite(l.testSuiteDir())
		if err != nil {
			return "", nil, fmt.Errorf("test suite: %w", err)
		}
		l.testInstances = all
	}
	ins := slices.DeleteFunc(slices.Clone(l.testInstances), func(in tasks.Instance) bool { return in.Split != split || in.Check() != nil })
	if m := l.cfg.Eval.MaxTasks; m > 0 && len(ins) > m {
		ins = ins[:m]
	}
	if len(ins) == 0 {
		return "", nil, nil
	}
	p, err := l.taskFile("eval-"+testSplit(split), ins)
	return p, ins, err
}
