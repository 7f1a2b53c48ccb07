package loop_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/legorl/legorl/loop"
	"github.com/legorl/legorl/tasks/builtin"
)

// hashConfig is a config of every kind of field ConfigHash sees: strings,
// numbers, a uint64 past float64's precision, objects nested in objects
// and arrays, and an init.model kept as raw JSON.
const hashConfig = `{
  "run": "tools-r1",
  "store": "file:///data/store",
  "work_dir": "/data/work/tools-r1",
  "builtin": {"n": 3000, "seed": 18446744073709551557, "languages": ["python"]},
  "init": {"model": {"model_type": "qwen3", "hidden_size": 32, "num_hidden_layers": 1}, "vocab": 400, "seed": 1},
  "harness": "bash",
  "iterations": 28,
  "group": 8,
  "rl": {"tasks_per_iteration": 16, "select": "template_variance", "probe": {"tasks": 64, "every": 4}},
  "rollout": {"max_turns": 4, "max_tokens": 128, "parallel": 4},
  "train": {"lr": 0.0005, "steps": 4, "baseline": "none"},
  "train_from": [{"iteration": 10, "train": {"lr": 0.001, "steps": 2}}],
  "eval": {"group": 1, "max_tasks": 200, "splits": ["heldout"]}
}`

func mustHash(t *testing.T, text string) string {
	t.Helper()
	c, err := loop.ParseConfig(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	h, err := loop.ConfigHash(c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestConfigHashStable: the hash, and so the test suite's seed, does not
// depend on the file's field order or whitespace, on where the run's files
// live (store, work_dir), on a field written with its default value or
// left out, or on a zero field written or left out.
func TestConfigHashStable(t *testing.T) {
	want := mustHash(t, hashConfig)
	reordered := `{"eval": {"splits": ["heldout"], "max_tasks": 200, "group": 1},
	"train_from": [{"train": {"steps": 2, "lr": 0.001}, "iteration": 10}], "train": {"baseline": "none", "steps": 4, "lr": 0.0005},
	"rollout": {"parallel": 4, "max_tokens": 128, "max_turns": 4}, "rl": {"probe": {"every": 4, "tasks": 64}, "select": "template_variance", "tasks_per_iteration": 16},
	"group": 8, "iterations": 28, "harness": "bash",
	"init": {"seed": 1, "vocab": 400, "model": {"num_hidden_layers": 1,    "hidden_size": 32, "model_type":"qwen3"}},
	"builtin": {"languages": ["python"], "seed": 18446744073709551557, "n": 3000}, "run": "tools-r1"}`
	for _, tc := range []struct{ name, text string }{
		{"as written", hashConfig},
		{"fields reordered, whitespace changed", reordered},
		{"no whitespace", strings.Join(strings.Fields(hashConfig), "")},
		{"another store and work_dir", strings.NewReplacer(`file:///data/store`, `s3://bucket/x`, `/data/work/tools-r1`, `/elsewhere`).Replace(hashConfig)},
		{"store, s3_endpoint and work_dir left out", strings.NewReplacer(`"store": "file:///data/store",`, `"s3_endpoint": "http://127.0.0.1:9000",`, `"work_dir": "/data/work/tools-r1",`, ``).Replace(hashConfig)},
		{"defaults written out", strings.Replace(hashConfig, `"eval": {`, `"eval": {"greedy": true, "max_masked": 0.05, "harnesses": ["bash"], `, 1)},
		{"zero fields written out", strings.Replace(hashConfig, `"eval": {`, `"eval": {"every": 0, "max_tasks": 200, `, 1)},
	} {
		if got := mustHash(t, tc.text); got != want {
			t.Errorf("%s: hash %s, want %s", tc.name, got, want)
		}
	}
}

// TestConfigHashChanges: changing any field that says what the run does,
// at any depth, changes the hash and the seed.
func TestConfigHashChanges(t *testing.T) {
	base := mustHash(t, hashConfig)
	seeds := map[uint64]string{}
	s, err := loop.TestSeed(base)
	if err != nil {
		t.Fatal(err)
	}
	seeds[s] = "as written"
	for _, tc := range []struct{ old, new string }{
		{`"run": "tools-r1"`, `"run": "tools-r2"`},
		{`"n": 3000`, `"n": 3001`},
		{`"seed": 18446744073709551557`, `"seed": 18446744073709551556`},
		{`"languages": ["python"]`, `"languages": ["python", "go"]`},
		{`"hidden_size": 32`, `"hidden_size": 64`},
		{`"vocab": 400`, `"vocab": 401`},
		{`"harness": "bash"`, `"harness": "tools"`},
		{`"iterations": 28`, `"iterations": 29`},
		{`"group": 8`, `"group": 16`},
		{`"select": "template_variance"`, `"select": "variance"`},
		{`"every": 4`, `"every": 5`},
		{`"max_tokens": 128`, `"max_tokens": 256`},
		{`"lr": 0.0005`, `"lr": 0.0004`},
		{`"baseline": "none"`, `"baseline": "group"`},
		{`"iteration": 10`, `"iteration": 11`},
		{`"steps": 2}`, `"steps": 3}`},
		{`"max_tasks": 200`, `"max_tasks": 100`},
		{`"splits": ["heldout"]`, `"splits": ["heldout", "heldout_family"]`},
		{`"eval": {`, `"eval": {"greedy": false, `},
		{`"harness": "bash",`, `"harness": "bash", "policy": "starter:bash-sed",`},
	} {
		text := strings.Replace(hashConfig, tc.old, tc.new, 1)
		if text == hashConfig {
			t.Fatalf("%q is not in the config", tc.old)
		}
		h := mustHash(t, text)
		if h == base {
			t.Errorf("%s -> %s: the hash did not change", tc.old, tc.new)
		}
		s, err := loop.TestSeed(h)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seeds[s]; ok {
			t.Errorf("%s -> %s: seed %d, the same as %s", tc.old, tc.new, s, prev)
		}
		seeds[s] = tc.new
	}
}

// TestConfigHashCanonical pins the canonical text and its seed, so a
// change to the derivation (which would move every run's test suite) is
// seen.
func TestConfigHashCanonical(t *testing.T) {
	c, err := loop.ParseConfig(strings.NewReader(`{"run": "r", "harness": "bash", "builtin": {"n": 10, "seed": 1}, "policy": "starter:bash-sed",
		"store": "file:///x", "work_dir": "/w"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loop.CanonicalConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"builtin":{"n":10,"seed":1},"eval":{"greedy":true,"group":1,"harnesses":["bash"],"max_masked":0.05,"splits":["heldout","heldout_family"]},` +
		`"group":4,"harness":"bash","init":{"vocab":1024},"iterations":1,"policy":"starter:bash-sed",` +
		`"rollout":{"agent_timeout":"5m0s","backend":"local","grade_timeout":"5m0s","max_tokens":256,"max_turns":8,"parallel":4,"template":"qwen3"},"run":"r"}`
	if string(b) != want {
		t.Errorf("canonical config:\n%s\nwant\n%s", b, want)
	}
	h, _ := loop.ConfigHash(c)
	seed, err := loop.TestSeed(h)
	if err != nil || seed == 0 {
		t.Errorf("seed %d, %v", seed, err)
	}
	if _, err := loop.TestSeed("not hex"); err == nil {
		t.Error("TestSeed accepted a hash that is not hex")
	}
}

// TestBuiltinPrefix: the first k instances of a built-in suite of n > k
// are the suite of k: the test suite generates only the first instances
// its evals take (TestSuite.Generated) and relies on this.
func TestBuiltinPrefix(t *testing.T) {
	ctx := context.Background()
	full, err := builtin.Generate(ctx, t.TempDir(), builtin.Options{N: 24, Seed: 99, Languages: []string{"python", "go"}})
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := builtin.Generate(ctx, t.TempDir(), builtin.Options{N: 9, Seed: 99, Languages: []string{"python", "go"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range prefix {
		if !reflect.DeepEqual(in, full[i]) {
			t.Errorf("instance %d: %+v, the suite of 24's %+v", i, in, full[i])
		}
	}
}
