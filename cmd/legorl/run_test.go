package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/legorl/legorl/loop"
	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
	"github.com/legorl/legorl/trainer"
)

// loopTestConfig is a loop small enough for a test: a tiny model, SFT for
// one epoch, two iterations of G=2 on a six-task suite, two turns of 16
// tokens.
func loopTestConfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := `{
  "run": "loop-test",
  "store": "file://` + filepath.Join(dir, "store") + `",
  "work_dir": "` + filepath.Join(dir, "work") + `",
  "builtin": {"n": 16, "seed": 3, "languages": ["python"]},
  "init": {"model": {"model_type": "qwen3", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 4096,
           "tie_word_embeddings": true}, "vocab": 400, "seed": 1},
  "sft": {"epochs": 2, "lr": 0.001, "probe": {"tasks": 2, "every": 1, "band": [0.5, 1]}},
  "harness": "bash",
  "iterations": 2,
  "group": 2,
  "rl": {"tasks_per_iteration": 2},
  "rollout": {"max_turns": 2, "max_tokens": 16, "parallel": 4, "agent_timeout": "2m"},
  "train": {"lr": 0.0001, "steps": 1, "seed": 7},
  "eval": {"max_tasks": 1, "greedy": true}
}`
	path := filepath.Join(dir, "loop.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestRunLoop runs `legorl run` end to end on a tiny config: the suite,
// demonstrations, tokenizer, initial and SFT checkpoints are made, each
// iteration rolls out (training split only), trains, publishes its
// checkpoint to the store, and the held-out evals before and after print
// the before/after table. Running it again resumes everything (nothing is
// redone), and an update whose train_steps commit was lost is redone with
// bitwise the same weights.
func TestRunLoop(t *testing.T) {
	dir := t.TempDir()
	cfgPath := loopTestConfig(t, dir)
	self, _ := os.Executable()
	args := []string{"run", "--config", cfgPath, "--agent", self}

	code, stdout, stderr := runCLI(t, testEnv(nil), args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Logf("stdout:\n%s", stdout)
	work := filepath.Join(dir, "work")
	for _, p := range []string{"suite/tasks.jsonl", "demos-bash.jsonl", "tokenizer.json", "checkpoints/init/model.safetensors",
		"checkpoints/sft/lineage.json", "checkpoints/iter-000001/lineage.json", "checkpoints/iter-000002/lineage.json"} {
		if _, err := os.Stat(filepath.Join(work, p)); err != nil {
			t.Errorf("missing %s", p)
		}
	}
	// Versions chain: init 0, sft 1, iteration updates 2 and 3.
	for i, want := range map[int]int64{1: 2, 2: 3} {
		lin, err := trainer.ReadLineage(filepath.Join(work, "checkpoints", "iter-00000"+string(rune('0'+i))))
		if err != nil || lin == nil {
			t.Fatalf("lineage of iteration %d: %v", i, err)
		}
		if lin.Version != want || lin.Parent.Version != want-1 || lin.Gate == nil || lin.Gate.Overall.Pearson < 0.99 {
			t.Errorf("iteration %d: version %d parent %d gate %+v", i, lin.Version, lin.Parent.Version, lin.Gate)
		}
	}
	// Published checkpoints, byte for byte.
	for v, iter := range map[string]string{"v000002": "iter-000001", "v000003": "iter-000002"} {
		got := filepath.Join(dir, "store/runs/loop-test/checkpoints", v, "model.safetensors")
		if fileSHA(t, got) != fileSHA(t, filepath.Join(work, "checkpoints", iter, "model.safetensors")) {
			t.Errorf("published %s differs from %s", v, iter)
		}
	}
	// Training rollouts come from the training split only.
	code, out, errOut := runCLI(t, testEnv(nil), "export", "--store", "file://"+filepath.Join(dir, "store"), "--run", "loop-test", "--table", "rollouts")
	if code != 0 {
		t.Fatal(errOut)
	}
	if n := strings.Count(out, "\n"); n == 0 {
		t.Fatal("no training rollouts")
	}
	// K = 2 fresh tasks per iteration: 2 tasks x G = 2 rollouts each
	// iteration, 4 distinct tasks over the two iterations, none of them
	// an SFT demonstration; every row names its split.
	perIter := map[int][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			TaskID    string   `json:"task_id"`
			Iteration int      `json:"iteration"`
			Flags     []string `json:"flags"`
		}
		json.Unmarshal([]byte(line), &r)
		if !trainInstance(t, work, r.TaskID) {
			t.Errorf("rollout of %s, which is not a training instance", r.TaskID)
		}
		if !slices.Contains(r.Flags, "split:train") {
			t.Errorf("rollout of %s: flags %v lack split:train", r.TaskID, r.Flags)
		}
		if !slices.Contains(perIter[r.Iteration], r.TaskID) {
			perIter[r.Iteration] = append(perIter[r.Iteration], r.TaskID)
		}
	}
	if len(perIter[0]) != 2 || len(perIter[1]) != 2 || slices.ContainsFunc(perIter[1], func(id string) bool { return slices.Contains(perIter[0], id) }) {
		t.Errorf("tasks per iteration %v: want 2 fresh ones each", perIter)
	}
	demos, _ := os.ReadFile(filepath.Join(work, "demos-bash.jsonl"))
	for _, ids := range perIter {
		for _, id := range ids {
			if strings.Contains(string(demos), `"instance_id":"`+id+`"`) {
				t.Errorf("%s is both a demonstration and an RL task", id)
			}
		}
	}
	table := regexp.MustCompile(`(?m)^bash +heldout +t1 +\d\.\d{3} \[\d\.\d{3},\d\.\d{3}\] \d\.\d{3} \[\d\.\d{3},\d\.\d{3}\] [+-]\d\.\d{3} \[[+-]\d\.\d{3},[+-]\d\.\d{3}\] +1 +\S+$`)
	if !strings.Contains(stdout, "pass@1 on held-out tasks, policy v1 (before RL) -> v3") || !table.MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^bash +heldout +greedy `).MatchString(stdout) {
		t.Errorf("no before/after table (t1 and greedy):\n%s", stdout)
	}
	if !regexp.MustCompile(`pass rate on the training tasks, by iteration: \d\.\d{3}, \d\.\d{3}\n`).MatchString(stdout) ||
		!regexp.MustCompile(`groups without reward variance, by iteration: \d\.\d\d, \d\.\d\d\n`).MatchString(stdout) {
		t.Errorf("no training pass rates:\n%s", stdout)
	}
	// The SFT probe ran on RL-pool tasks, and the summary holds it.
	var sum struct {
		SFT struct {
			Probes []struct {
				Tasks   int     `json:"tasks"`
				Seconds float64 `json:"seconds"`
			} `json:"probes"`
			Kept         *int    `json:"kept_probe"`
			TrainSeconds float64 `json:"train_seconds"`
			ProbeSeconds float64 `json:"probe_seconds"`
		} `json:"sft"`
		Comparisons []struct {
			Mode  string `json:"mode"`
			Tasks int    `json:"tasks"`
		} `json:"comparisons"`
	}
	if b, err := os.ReadFile(filepath.Join(work, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if len(sum.SFT.Probes) == 0 || sum.SFT.Probes[0].Tasks != 2 || sum.SFT.Kept == nil || len(sum.Comparisons) < 2 {
		t.Errorf("summary: %+v", sum)
	}
	// How long each phase took: in the summary (SFT) and the log.
	if len(sum.SFT.Probes) > 0 && (!(sum.SFT.TrainSeconds > 0) || !(sum.SFT.Probes[0].Seconds > 0) || !(sum.SFT.ProbeSeconds >= sum.SFT.Probes[0].Seconds)) {
		t.Errorf("summary: SFT times: %+v", sum.SFT)
	}
	for _, re := range []string{`bash demonstrations of the sft split in [0-9hms]+ ->`, `SFT: \d+ steps, loss \d\.\d{4} -> \d\.\d{4} in [0-9hms]+ ->`,
		`eval of policy v1 \(t1\): bash on heldout: pass@1 .* \(\d+ masked\); [0-9hms]+\n`} {
		if !regexp.MustCompile(re).MatchString(stderr) {
			t.Errorf("no line matching %s in the log:\n%s", re, stderr)
		}
	}
	if !strings.Contains(stderr, "iteration 1: policy v2:") || !strings.Contains(stderr, "gate Pearson") {
		t.Errorf("no iteration summary:\n%s", stderr)
	}

	// Again: everything resumes.
	code, stdout2, stderr2 := runCLI(t, testEnv(nil), args...)
	if code != 0 {
		t.Fatalf("rerun: exit %d: %s", code, stderr2)
	}
	if strings.Count(stderr2, "done by an earlier run") != 2 || strings.Contains(stderr2, "sft step") || strings.Contains(stderr2, "training") {
		t.Errorf("the rerun redid work:\n%s", stderr2)
	}
	if tableLines(stdout2) != tableLines(stdout) {
		t.Errorf("the rerun's table differs:\n%s\nvs\n%s", stdout2, stdout)
	}
	first := sum.SFT.TrainSeconds
	if b, err := os.ReadFile(filepath.Join(work, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil || sum.SFT.TrainSeconds != first {
		t.Errorf("the rerun's summary: SFT train_seconds %v, first run's %v (%v)", sum.SFT.TrainSeconds, first, err)
	}

	checkTestSplit(t, dir, cfgPath, stdout, args)

	// A crash between the checkpoint's rename and its train_steps commit
	// (simulated: the commit and the publication removed) redoes the
	// update, deterministically.
	before := fileSHA(t, filepath.Join(work, "checkpoints/iter-000002/model.safetensors"))
	for _, p := range []string{"store/runs/loop-test/manifests/train/iter-000001", "store/runs/loop-test/checkpoints/v000003"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr3 := runCLI(t, testEnv(nil), args...)
	if code != 0 {
		t.Fatalf("redo: exit %d: %s", code, stderr3)
	}
	if strings.Count(stderr3, "done by an earlier run") != 1 || !strings.Contains(stderr3, "iteration 1: policy v2:") {
		t.Errorf("iteration 1 was not redone:\n%s", stderr3)
	}
	if after := fileSHA(t, filepath.Join(work, "checkpoints/iter-000002/model.safetensors")); after != before {
		t.Errorf("the redone update's weights differ: %s vs %s", after, before)
	}

	// rl.select variance, from the SFT checkpoint: iteration 1's draw
	// weighs the families by iteration 0's outcomes (2 tasks x G = 2
	// completed rollouts), and a rerun draws the same tasks (the loop
	// refuses a task file that differs).
	varCfg := strings.NewReplacer(`"run": "loop-test"`, `"run": "loop-var"`, work+`"`, work+`-var"`,
		`"rl": {"tasks_per_iteration": 2}`, `"rl": {"tasks_per_iteration": 2, "select": "variance"}`,
		`"sft": {`, `"policy": "`+filepath.Join(work, "checkpoints/sft")+`", "x": {`).Replace(string(mustRead(t, cfgPath)))
	varCfg = regexp.MustCompile(`(?s)"x": \{.*?\}\},`).ReplaceAllString(varCfg, "")
	varPath := filepath.Join(dir, "var.json")
	if err := os.WriteFile(varPath, []byte(varCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		code, _, stderr := runCLI(t, testEnv(nil), "run", "--config", varPath, "--agent", self)
		if code != 0 {
			t.Fatalf("variance run %d: exit %d: %s\n%s", run, code, stderr, varCfg)
		}
		m := regexp.MustCompile(`iteration 1: family weights \(rl.select variance\): (.*)`).FindStringSubmatch(stderr)
		if run == 1 {
			if m != nil || strings.Count(stderr, "done by an earlier run") != 2 {
				t.Errorf("the variance rerun redid work:\n%s", stderr)
			}
			continue
		}
		if m == nil {
			t.Fatalf("no family weights for iteration 1:\n%s", stderr)
		}
		completed := 0
		for _, c := range regexp.MustCompile(`\(\d+/(\d+)\)`).FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(c[1])
			completed += n
		}
		if completed != 4 {
			t.Errorf("iteration 1 weighed %d completed rollouts of iteration 0, want 4: %s", completed, m[1])
		}
	}
	checkRLProbe(t, dir, varPath, self)
}

// checkRLProbe runs the loop config at cfgPath (an SFT-free config of
// TestRunLoop's) with rl.probe on 2 tasks every iteration: the probe's
// tasks are never an iteration's, the start and each iteration are
// probed, and the final eval measures the best probed checkpoint.
func checkRLProbe(t *testing.T, dir, cfgPath, self string) {
	t.Helper()
	work := filepath.Join(dir, "work-probe")
	cfg := strings.NewReplacer(`"run": "loop-var"`, `"run": "loop-probe"`, `-var"`, `-probe"`,
		`"select": "variance"}`, `"probe": {"tasks": 2, "every": 1}}`,
		`"seed": 7},`, `"seed": 7}, "train_from": [{"iteration": 1, "train": {"lr": 0.0003, "steps": 1, "seed": 7, "baseline": "none"}}],`,
	).Replace(string(mustRead(t, cfgPath)))
	if !strings.Contains(cfg, "train_from") {
		t.Fatalf("no train_from in the probe config:\n%s", cfg)
	}
	path := filepath.Join(dir, "probe.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, testEnv(nil), "run", "--config", path, "--agent", self)
	if code != 0 {
		t.Fatalf("rl.probe run: exit %d: %s\n%s", code, stderr, cfg)
	}
	var sum struct {
		Probes []loop.ProbeResult `json:"rl_probes"`
		Kept   *int               `json:"kept_iteration"`
		Evals  []struct {
			Checkpoint string `json:"checkpoint"`
		} `json:"evals"`
	}
	if b, err := os.ReadFile(filepath.Join(work, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if len(sum.Probes) != 3 || sum.Kept == nil || len(sum.Evals) != 2 {
		t.Fatalf("summary: %d probes, kept %v, %d evals; want 3, set, 2", len(sum.Probes), sum.Kept, len(sum.Evals))
	}
	best := 0
	for i, p := range sum.Probes {
		if p.Iteration != i || p.Tasks != 2 {
			t.Errorf("probe %d: %+v", i, p)
		}
		if p.Pass1 > sum.Probes[best].Pass1 {
			best = i
		}
	}
	if *sum.Kept != best || sum.Evals[1].Checkpoint != sum.Probes[best].Checkpoint {
		t.Errorf("kept %d, final eval of %s; want %d, %s", *sum.Kept, sum.Evals[1].Checkpoint, best, sum.Probes[best].Checkpoint)
	}
	probe := string(mustRead(t, filepath.Join(work, "pools", "rl-probe.jsonl")))
	for i := range 2 {
		for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(work, "pools", fmt.Sprintf("rl-iter-%06d.jsonl", i))))), "\n") {
			var in struct {
				ID string `json:"instance_id"`
			}
			json.Unmarshal([]byte(line), &in)
			if in.ID == "" || strings.Contains(probe, `"instance_id":"`+in.ID+`"`) {
				t.Errorf("iteration %d rolled out %q, a probe task", i, in.ID)
			}
		}
	}
	// train_from: iteration 0 trained with train, iteration 1 with
	// train_from[0], as each checkpoint's lineage records.
	for i, want := range []struct {
		lr       float64
		baseline string
	}{{0.0001, ""}, {0.0003, trainer.BaselineNone}} {
		lin, err := trainer.ReadLineage(filepath.Join(work, "checkpoints", fmt.Sprintf("iter-%06d", i+1)))
		if err != nil || lin == nil {
			t.Fatalf("lineage of iteration %d: %v", i, err)
		}
		if lin.Config.LR != want.lr || lin.Config.Baseline != want.baseline {
			t.Errorf("iteration %d trained with lr %g baseline %q, want %g %q", i, lin.Config.LR, lin.Config.Baseline, want.lr, want.baseline)
		}
	}
	if !strings.Contains(stderr, "training with train_from[0]") || strings.Count(stderr, "with train_from[") != 1 {
		t.Errorf("the log does not name iteration 1's train_from phase (and only it):\n%s", stderr)
	}
	// Resuming with another train config for a done iteration is refused,
	// and nothing is redone or removed.
	if err := os.WriteFile(path, []byte(strings.Replace(cfg, `"lr": 0.0003`, `"lr": 0.0004`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ckpt := fileSHA(t, filepath.Join(work, "checkpoints/iter-000002/model.safetensors"))
	code, _, stderr2 := runCLI(t, testEnv(nil), "run", "--config", path, "--agent", self)
	if code != 2 || !strings.Contains(stderr2, "iteration 1: "+filepath.Join(work, "checkpoints/iter-000002")+" was trained with another train config (config_hash ") {
		t.Errorf("resume with another train_from: exit %d:\n%s", code, stderr2)
	}
	if fileSHA(t, filepath.Join(work, "checkpoints/iter-000002/model.safetensors")) != ckpt {
		t.Error("the refused resume changed iteration 1's checkpoint")
	}
	if !strings.Contains(stdout, "rl.probe pass@1 after N iterations (2 tasks): 0: ") || !strings.Contains(stderr, "rl.probe: the final policy is the best probed one") {
		t.Errorf("no probe report:\n%s\n%s", stdout, stderr)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tableLines(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "bash ") || strings.HasPrefix(l, "pass rate on the training tasks") || strings.HasPrefix(l, "groups without reward variance") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func trainInstance(t *testing.T, work, id string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(work, "suite/tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"instance_id":"`+id+`"`) {
			return strings.Contains(line, `"split":"train"`)
		}
	}
	return false
}

// TestResultsConfigsLoad: the configs docs/RESULTS.md tells readers to run
// are valid for this code (strict JSON: a renamed field breaks them), and
// --print-config shows what they resolve to without running anything.
func TestResultsConfigsLoad(t *testing.T) {
	files, err := filepath.Glob("../../docs/results/*.json")
	if err != nil || len(files) < 3 {
		t.Fatalf("docs/results configs: %v %v", files, err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".summary.json") { // what a run wrote, not a config
			continue
		}
		code, stdout, stderr := runCLI(t, testEnv(nil), "run", "--config", f, "--print-config")
		var cfg struct {
			Run     string `json:"run"`
			Harness string `json:"harness"`
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &cfg) != nil || cfg.Run == "" || cfg.Harness == "" {
			t.Errorf("%s: exit %d, %s %s", f, code, stdout, stderr)
		}
	}
}

// TestDemoResultIsTheDemoConfig: docs/results/demo-rl.json, the config
// next to the committed `make demo` summary, is the embedded demo config
// byte for byte, so RESULTS.md's demo row describes what `make demo` runs.
func TestDemoResultIsTheDemoConfig(t *testing.T) {
	doc, err := os.ReadFile("../../docs/results/demo-rl.json")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := os.ReadFile("../../loop/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, embedded) {
		t.Error("docs/results/demo-rl.json differs from loop/demo.json: copy the demo config there and run make demo again for its summary")
	}
}

// TestRunConfigErrors: a config that cannot run fails with one line naming
// the field, before anything is written.
func TestRunConfigErrors(t *testing.T) {
	if err := loop.DefaultConfig().Validate(); err != nil {
		t.Fatalf("the embedded demo config: %v", err)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ name, cfg, want string }{
		{"unknown field", `{"run": "x", "harnes": "bash"}`, `unknown field "harnes"`},
		{"no harness", `{"run": "x", "builtin": {"n": 4}, "init": {"model": {}}}`, "harness"},
		{"bad harness", `{"run": "x", "harness": "nope", "builtin": {"n": 4}, "init": {"model": {}}}`, "harness"},
		{"no tasks", `{"run": "x", "harness": "bash", "init": {"model": {}}}`, "builtin.n"},
		{"no policy", `{"run": "x", "harness": "bash", "builtin": {"n": 4}}`, "init.model"},
		{"bad run id", `{"run": "a/b", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}}`, "run"},
		{"sft claude", `{"run": "x", "harness": "claude", "builtin": {"n": 4}, "init": {"model": {}}, "sft": {}}`, `sft.harness "claude": demonstrations exist for bash, tools, pi, codex, opencode`},
		{"bad duration", `{"run": "x", "harness": "bash", "rollout": {"agent_timeout": "soon"}}`, "duration"},
		{"negative eval", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "eval": {"every": -1}}`, "eval.every"},
		{"negative K", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "rl": {"tasks_per_iteration": -2}}`, "rl.tasks_per_iteration -2"},
		{"negative eval cap", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "eval": {"max_tasks": -1}}`, "eval.max_tasks -1"},
		{"probe band upside down", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "sft": {"probe": {"band": [0.6, 0.2]}}}`, "sft.probe"},
		{"unknown starter", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "policy": "starter:gpt-5"}`, `policy "starter:gpt-5": no such starter (have bash-early, bash-sed, bash-sft, pi-sft, tools-copy, tools-induct, tools-sft)`},
		{"bad eval split", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "eval": {"splits": ["train"]}}`, `eval.splits: "train"`},
		{"bad select", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "rl": {"tasks_per_iteration": 2, "select": "best"}}`, `rl.select "best"`},
		{"variance without K", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "rl": {"select": "variance"}}`, "rl.select variance needs rl.tasks_per_iteration"},
		{"template variance without K", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "rl": {"select": "template_variance"}}`, "rl.select template_variance needs rl.tasks_per_iteration"},
		{"rl probe without K", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "rl": {"probe": {}}}`, "rl.probe needs rl.tasks_per_iteration"},
		{"rl probe negative patience", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "rl": {"tasks_per_iteration": 2, "probe": {"patience": -1}}}`, "rl.probe: tasks 128, every 10, patience -1"},
		{"bad rollout precision", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "rollout": {"precision": "fp16"}}`, `rollout.precision "fp16": want fp32 or bf16`},
		{"upcycle top-k past experts", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "policy": "starter:bash-sed", "upcycle": {"experts": 2, "top_k": 4}}`, "upcycle: experts 2, top_k 4"},
		{"max masked past 1", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "eval": {"max_masked": 1.5}}`, "eval.max_masked 1.5: want a share in (0, 1]"},
		{"negative max masked", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "eval": {"max_masked": -0.1}}`, "eval.max_masked -0.1"},
		{"train_from at 0", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "iterations": 3, "train_from": [{"iteration": 0, "train": {"lr": 0.001}}]}`, "train_from[0].iteration 0: want 1 to 2"},
		{"train_from past the run", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "iterations": 3, "train_from": [{"iteration": 3, "train": {"lr": 0.001}}]}`, "train_from[0].iteration 3: want 1 to 2"},
		{"train_from out of order", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "iterations": 9, "train_from": [{"iteration": 4, "train": {"lr": 0.001}}, {"iteration": 4, "train": {"lr": 0.001}}]}`, "train_from[1].iteration 4"},
		{"train_from bad train", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "iterations": 3, "train_from": [{"iteration": 1, "train": {"lr": 0.001, "baseline": "mean"}}]}`, `train_from[0]: `},
		{"probe band past 1", `{"run": "x", "harness": "bash", "builtin": {"n": 4}, "init": {"model": {}}, "sft": {"probe": {"band": [0.2, 1.5]}}}`, "sft.probe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			os.WriteFile(path, []byte(tc.cfg), 0o644)
			work := filepath.Join(dir, "work-"+strings.ReplaceAll(tc.name, " ", "-"))
			code, _, stderr := runCLI(t, testEnv(nil), "run", "--config", path, "--work", work)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("exit %d, stderr %q: want one line with %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(work); err == nil {
				t.Errorf("%s was created", work)
			}
		})
	}
	work, store := filepath.Join(dir, "work-compute"), filepath.Join(dir, "store-compute")
	code, _, stderr := runCLI(t, testEnv(nil), "run", "--work", work, "--store", "file://"+store, "--compute", "tpu")
	if code != 2 || !strings.Contains(stderr, `--compute tpu: backend: unknown backend "tpu"`) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("--compute tpu: exit %d, stderr %q", code, stderr)
	}
	for _, p := range []string{work, store} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
}

// TestRunUpcycle: a config's upcycle turns the starter into a mixture of
// experts once, before the first iteration, with a lineage one version on.
func TestRunUpcycle(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "up.json")
	os.WriteFile(cfg, []byte(`{"run": "up", "harness": "bash", "builtin": {"n": 8, "seed": 1, "languages": ["python"]},
		"policy": "starter:bash-sed", "upcycle": {"experts": 4, "top_k": 2, "noise": 0.01, "seed": 1}}`), 0o644)
	work, store := filepath.Join(dir, "work"), "file://"+filepath.Join(dir, "store")
	up := filepath.Join(work, "checkpoints", "upcycled")
	self, _ := os.Executable() // the test binary serves as legorl-agent
	var sum string
	for round := range 2 { // the second run reuses the folder
		code, _, stderr := runCLI(t, testEnv(nil), "run", "--config", cfg, "--work", work, "--store", store, "--prepare-only", "--agent", self)
		if code != 0 {
			t.Fatalf("round %d: exit %d: %s", round, code, stderr)
		}
		if logged := strings.Contains(stderr, "upcycled"); logged != (round == 0) {
			t.Errorf("round %d: upcycle logged %v:\n%s", round, logged, stderr)
		}
		b, err := os.ReadFile(filepath.Join(up, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprintf("%x", sha256.Sum256(b)); round == 0 {
			sum = s
		} else if s != sum {
			t.Errorf("the upcycled weights changed on resume")
		}
	}
	c, err := model.LoadConfig(filepath.Join(up, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c.NumExperts != 4 || c.NumExpertsPerTok != 2 || c.MoELayers() != c.NumHiddenLayers {
		t.Errorf("config: %d experts, top-%d, %d MoE layers of %d", c.NumExperts, c.NumExpertsPerTok, c.MoELayers(), c.NumHiddenLayers)
	}
	h, err := checkpoint.Read(up)
	if err != nil || h == nil || h.Kind != trainer.LineageKindUpcycle || h.Version != 2 || h.Parent.Version != 1 {
		t.Fatalf("lineage %+v, err %v", h, err)
	}
	if _, err := os.Stat(filepath.Join(up, "tokenizer.json")); err != nil {
		t.Errorf("the parent's tokenizer did not travel: %v", err)
	}
}

// TestRunChecksGrading: `legorl run` grades a gold patch per test runner of
// its suite before anything else, and stops with one line naming the
// instance when it fails (here a suite whose every gold patch is another
// instance's, which cannot apply): a machine that cannot grade would mask
// every rollout, and the run would go on for hours learning nothing.
func TestRunChecksGrading(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	ins, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 3, Seed: 5, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	first := ins[0].Patch
	for i := range ins {
		if i+1 < len(ins) {
			ins[i].Patch = ins[i+1].Patch
		} else {
			ins[i].Patch = first
		}
	}
	var b bytes.Buffer
	if err := tasks.WriteJSONL(&b, ins); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(suite, "tasks.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	cfg := `{"run": "grading-check", "tasks": "` + suite + `", "harness": "bash", "work_dir": "` + work + `",
  "store": "file://` + filepath.Join(dir, "store") + `",
  "init": {"model": {"model_type": "qwen3", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 4096,
           "tie_word_embeddings": true}, "vocab": 400, "seed": 1}, "iterations": 1}`
	path := filepath.Join(dir, "run.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	code, _, stderr := runCLI(t, testEnv(nil), "run", "--config", path, "--agent", self)
	want := "the gold patch of " + ins[0].InstanceID + " fails its pytest tests here"
	if code != 2 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q: want exit 2 and one line with %q", code, stderr, want)
	}
	if _, err := os.Stat(filepath.Join(work, "checkpoints", "init")); err == nil {
		t.Error("the run made its initial checkpoint before the grading check failed")
	}
}
