package main

// Tests of the analysis notebooks (notebooks/): the committed notebooks
// carry no outputs, the helper's mirrors of the schema agree with schemas/,
// and, with LEGORL_NOTEBOOKS=1 (as `make test` sets), every notebook runs
// headless with Debian's Jupyter against fixture runs that this file makes
// with the project's own commands (`legorl demo`, `legorl model init`,
// `legorl train`), the helper's bad-input tests pass, and a bad run id or a
// corrupt store makes a notebook fail with the helper's one-line message.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/safetensors"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
)

const notebooksDir = "../../notebooks"

// The notebooks `make test` runs; each must exist.
var notebookNames = []string{"run_overview", "behaviour_drift", "logprob_alignment", "reproducibility_audit", "harness_behaviour"}

// debianPython is the interpreter of Debian's Jupyter packages; the python3
// first on PATH may be another install without them.
const debianPython = "/usr/bin/python3"

func TestNotebooksHaveNoOutputs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(notebooksDir, "*.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[strings.TrimSuffix(filepath.Base(f), ".ipynb")] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var nb struct {
			NBFormat int `json:"nbformat"`
			Cells    []struct {
				CellType       string                     `json:"cell_type"`
				Outputs        []json.RawMessage          `json:"outputs"`
				ExecutionCount *int                       `json:"execution_count"`
				Metadata       map[string]json.RawMessage `json:"metadata"`
			} `json:"cells"`
			Metadata map[string]json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(b, &nb); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if nb.NBFormat != 4 || len(nb.Cells) == 0 {
			t.Errorf("%s: nbformat %d with %d cells, want 4 and some", f, nb.NBFormat, len(nb.Cells))
		}
		var dirty []int
		for i, c := range nb.Cells {
			_, timed := c.Metadata["execution"]
			if len(c.Outputs) > 0 || c.ExecutionCount != nil || timed {
				dirty = append(dirty, i)
			}
		}
		if len(dirty) > 0 {
			name := "notebooks/" + filepath.Base(f)
			t.Errorf("%s: cells %v have outputs, execution counts or timings: strip them before committing "+
				"(jupyter nbconvert --clear-output --ClearMetadataPreprocessor.enabled=True --inplace %s)", name, dirty, name)
		}
		if _, ok := nb.Metadata["widgets"]; ok {
			t.Errorf("%s: metadata holds widget state: strip it", f)
		}
	}
	for _, n := range notebookNames {
		if !have[n] {
			t.Errorf("notebooks/%s.ipynb is missing", n)
		}
	}
}

// pythonEnv is the environment for Debian's Python: none of another
// install's settings, no bytecode written into the checkout.
func pythonEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PYTHONPATH", k == "PYTHONHOME", k == "PYTHONSTARTUP", k == "VIRTUAL_ENV", k == "MPLBACKEND",
			strings.HasPrefix(k, "JUPYTER_"), strings.HasPrefix(k, "LEGORL_"), k == "IPYTHONDIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{"PYTHONDONTWRITEBYTECODE=1"}, extra...)...)
}

// The helper mirrors the schema's constants; they must agree.
func TestNotebookHelperMatchesSchemas(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Skip(debianPython + " is not installed")
	}
	cmd := exec.Command(debianPython, "-c", `import json, legorl_data as d
print(json.dumps({"version": d.SCHEMA_VERSION, "tables": d.TABLES, "terminations": d.TERMINATIONS,
  "scored": d.SCORED_TERMINATIONS, "floats": d.FLOAT_COLUMNS, "min_pearson": d.MIN_PEARSON,
  "recomputed": d.RECOMPUTED_FILE, "lineage": d.LINEAGE_FILE}))`)
	cmd.Dir = notebooksDir
	cmd.Env = pythonEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("import legorl_data: %v %s", err, stderrOf(err))
	}
	var got struct {
		Version      int                 `json:"version"`
		Tables       []string            `json:"tables"`
		Terminations []string            `json:"terminations"`
		Scored       []string            `json:"scored"`
		Floats       map[string][]string `json:"floats"`
		MinPearson   float64             `json:"min_pearson"`
		Recomputed   string              `json:"recomputed"`
		Lineage      string              `json:"lineage"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var tables, terms, scored []string
	floats := map[string][]string{}
	for _, tab := range schemas.Tables() {
		tables = append(tables, string(tab))
		s, err := schemas.ArrowSchema(tab)
		if err != nil {
			t.Fatal(err)
		}
		floats[string(tab)] = []string{}
		for _, f := range s.Fields() {
			if f.Type.ID() == arrow.FLOAT32 || f.Type.ID() == arrow.FLOAT64 {
				floats[string(tab)] = append(floats[string(tab)], f.Name)
			}
		}
	}
	for _, term := range schemas.Terminations() {
		terms = append(terms, string(term))
		if term.Status() == schemas.StatusCompleted {
			scored = append(scored, string(term))
		}
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"SCHEMA_VERSION", got.Version, schemas.Version},
		{"TABLES", got.Tables, tables},
		{"TERMINATIONS", got.Terminations, terms},
		{"SCORED_TERMINATIONS", got.Scored, scored},
		{"FLOAT_COLUMNS", got.Floats, floats},
		{"MIN_PEARSON", got.MinPearson, trainer.Config{}.WithDefaults().MinPearson},
		{"RECOMPUTED_FILE", got.Recomputed, trainer.RecomputedFile},
		{"LINEAGE_FILE", got.Lineage, trainer.LineageFile},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("notebooks/legorl_data.py %s = %v, schemas/trainer say %v", c.name, c.got, c.want)
		}
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// notebookFixture is what the notebooks run against.
type notebookFixture struct {
	store       string // file:// URI holding runs "fixture" (legorl demo) and "aligned" (legorl train)
	replay      string // checkpoint trained on "aligned" with routing replay
	noReplay    string // the same update without routing replay
	corruptCopy string // a copy of the store with one flipped byte in a segments file
}

// TestNotebooks executes every notebook headless against the fixture runs.
// It needs Debian's Jupyter (make tools) and runs when LEGORL_NOTEBOOKS=1.
func TestNotebooks(t *testing.T) {
	if os.Getenv("LEGORL_NOTEBOOKS") != "1" {
		t.Skip("set LEGORL_NOTEBOOKS=1 to execute the notebooks (make test does; needs make tools)")
	}
	start := time.Now()
	jupyter := "/usr/bin/jupyter"
	probe := exec.Command(debianPython, "-c", "import nbconvert, ipykernel, pandas, matplotlib, numpy")
	probe.Env = pythonEnv()
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("Debian's Jupyter stack is not installed (make tools installs it): %v: %s", err, out)
	}
	if _, err := os.Stat(jupyter); err != nil {
		t.Fatalf("%s: %v (make tools installs jupyter-nbconvert)", jupyter, err)
	}
	dir := t.TempDir()
	bin := legorlBinary(t, dir)
	fx := writeNotebookFixture(t, dir)
	t.Logf("fixture and binary ready in %v", time.Since(start).Round(time.Millisecond))

	// A private kernelspec named python3 (first on JUPYTER_PATH), so
	// neither another Python nor a user's Jupyter or IPython settings take part.
	kernels := filepath.Join(dir, "jupyter", "kernels", "python3")
	if err := os.MkdirAll(kernels, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := `{"argv": ["` + debianPython + `", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
 "display_name": "Python 3 (Debian)", "language": "python"}`
	if err := os.WriteFile(filepath.Join(kernels, "kernel.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"JUPYTER_PATH=" + filepath.Join(dir, "jupyter"), "JUPYTER_CONFIG_DIR=" + filepath.Join(dir, "jupyter-config"),
		"JUPYTER_RUNTIME_DIR=" + filepath.Join(dir, "jupyter-runtime"), "JUPYTER_DATA_DIR=" + filepath.Join(dir, "jupyter-data"), "IPYTHONDIR=" + filepath.Join(dir, "ipython"),
		"PYDEVD_DISABLE_FILE_VALIDATION=1", "LEGORL_BIN=" + bin}
	ckpts := fx.replay + string(os.PathListSeparator) + fx.noReplay

	cases := []struct {
		name, notebook string
		env            []string
		minImages      int
		fail           string // when set, the run must fail with this in its output
	}{
		{"run_overview", "run_overview", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=fixture"}, 4, ""},
		{"behaviour_drift", "behaviour_drift", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=fixture"}, 4, ""},
		{"behaviour_drift_no_steps", "behaviour_drift", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=aligned"}, 2, ""},
		// Two runs side by side, one without steps, one named with its store.
		{"harness_behaviour", "harness_behaviour", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUNS=fixture," + fx.store + "#aligned",
			"LEGORL_BEHAVIOUR_CSV=" + filepath.Join(dir, "behaviour.csv")}, 2, ""},
		{"logprob_alignment_train_steps", "logprob_alignment", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=fixture"}, 2, ""},
		{"logprob_alignment_checkpoints", "logprob_alignment", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=aligned", "LEGORL_CHECKPOINTS=" + ckpts}, 4, ""},
		{"reproducibility_audit", "reproducibility_audit", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=fixture"}, 0, ""},
		// Only the replay checkpoint: the other one committed its
		// train_steps to the scratch store, which the audit rightly flags.
		{"reproducibility_audit_checkpoint", "reproducibility_audit", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=aligned", "LEGORL_CHECKPOINTS=" + fx.replay}, 0, ""},
		{"reproducibility_audit_foreign_checkpoint", "reproducibility_audit", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=aligned", "LEGORL_CHECKPOINTS=" + ckpts}, 0,
			"its train_steps file is committed (no-replay: runs/aligned/data/train_steps/"},
		{"no_such_run", "run_overview", []string{"LEGORL_STORE=" + fx.store, "LEGORL_RUN=nope"}, 0,
			"NoSuchRun: legorl_data: no such run 'nope'"},
		{"corrupt_store", "reproducibility_audit", []string{"LEGORL_STORE=" + fx.corruptCopy, "LEGORL_RUN=fixture"}, 0,
			"audit of run 'fixture' failed"},
	}
	t.Run("notebooks", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				began := time.Now()
				out := filepath.Join(dir, "out", c.name)
				cmd := exec.Command(jupyter, "nbconvert", "--to", "notebook", "--execute",
					"--ExecutePreprocessor.timeout=600", "--output-dir", out, "--output", c.notebook,
					filepath.Join(notebooksDir, c.notebook+".ipynb"))
				cmd.Env = pythonEnv(append(append([]string{}, base...), c.env...)...)
				var buf bytes.Buffer
				cmd.Stdout, cmd.Stderr = &buf, &buf
				err := cmd.Run()
				t.Logf("%s.ipynb: %v", c.notebook, time.Since(began).Round(time.Millisecond))
				if c.fail != "" {
					if err == nil || !strings.Contains(buf.String(), c.fail) {
						t.Errorf("want a failure naming %q; err %v, output:\n%s", c.fail, err, tail(buf.String(), 40))
					}
					return
				}
				if err != nil {
					t.Fatalf("%v:\n%s", err, tail(buf.String(), 60))
				}
				images, errs := notebookOutputs(t, filepath.Join(out, c.notebook+".ipynb"))
				if errs > 0 || images < c.minImages {
					t.Errorf("executed notebook has %d error outputs and %d images, want 0 and at least %d", errs, images, c.minImages)
				}
			})
		}
		// The behaviour measures on tables made in the test.
		t.Run("legorl_behaviour_unittest", func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(debianPython, "-m", "unittest", "-v", "test_legorl_behaviour")
			cmd.Dir = notebooksDir
			cmd.Env = pythonEnv(base...)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "\nOK") {
				t.Errorf("%v:\n%s", err, tail(string(out), 80))
			}
		})
		// The helper's own tests: bad input (no run, no table, corrupt
		// files and manifests), footers, safetensors, both table backends' shared code.
		t.Run("legorl_data_unittest", func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			cmd := exec.Command(debianPython, "-m", "unittest", "-v", "test_legorl_data")
			cmd.Dir = notebooksDir
			cmd.Env = pythonEnv(append(append([]string{}, base...), "LEGORL_TEST_STORE="+fx.store,
				"LEGORL_TEST_CHECKPOINT="+fx.replay, "LEGORL_TEST_TMP="+filepath.Join(dir, "unittest"))...)
			out, err := cmd.CombinedOutput()
			t.Logf("test_legorl_data: %v", time.Since(began).Round(time.Millisecond))
			if err != nil || !strings.Contains(string(out), "\nOK") {
				t.Errorf("%v:\n%s", err, tail(string(out), 80))
			}
		})
	})
	t.Logf("notebook tests took %v in all", time.Since(start).Round(time.Millisecond))
}

// legorlBinary returns $LEGORL_BIN, or builds legorl into dir.
func legorlBinary(t *testing.T, dir string) string {
	if b := os.Getenv("LEGORL_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(dir, "legorl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	return bin
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// notebookOutputs counts the image and error outputs of an executed notebook.
func notebookOutputs(t *testing.T, path string) (images, errs int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		Cells []struct {
			Outputs []struct {
				OutputType string                     `json:"output_type"`
				Data       map[string]json.RawMessage `json:"data"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatal(err)
	}
	for _, c := range nb.Cells {
		for _, o := range c.Outputs {
			if o.OutputType == "error" {
				errs++
			}
			if _, ok := o.Data["image/png"]; ok {
				images++
			}
		}
	}
	return images, errs
}

// writeNotebookFixture makes the notebooks' fixture in dir:
//   - run "fixture": `legorl demo --grade-tasks 0`: 3 iterations of 8 tasks
//     x 4 rollouts, two harnesses, masked rollouts, every table;
//   - run "aligned": one iteration of a tiny MoE checkpoint's own rollouts
//     (rollouts and segments, no steps), where the "engine" routed every
//     third token to other experts than the trainer's router would, then
//     `legorl train` on it twice: with routing replay (into the store) and
//     without (--no-replay, into a copy of the store, so the run keeps one
//     set of train_steps);
//   - a copy of the store with one flipped byte in a segments file.
func writeNotebookFixture(t *testing.T, dir string) notebookFixture {
	t.Helper()
	storeDir := filepath.Join(dir, "store")
	fx := notebookFixture{store: "file://" + storeDir, replay: filepath.Join(dir, "ckpt", "replay"),
		noReplay: filepath.Join(dir, "ckpt", "no-replay"), corruptCopy: "file://" + filepath.Join(dir, "corrupt")}
	env := testEnv(nil)
	if code, _, stderr := runCLI(t, env, "demo", "--store", fx.store, "--run", "fixture", "--grade-tasks", "0"); code != 0 {
		t.Fatalf("legorl demo: %s", stderr)
	}
	policy := writeAlignedRun(t, dir, storeDir)
	scratch := filepath.Join(dir, "store-no-replay")
	if err := os.CopyFS(scratch, os.DirFS(storeDir)); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []struct {
		store, out string
		extra      []string
	}{
		{fx.store, fx.replay, nil},
		{"file://" + scratch, fx.noReplay, []string{"--no-replay", "--min-pearson", "-1"}},
	} {
		args := append([]string{"train", "--store", tr.store, "--run", "aligned", "--iteration", "0", "--policy", policy,
			"--out", tr.out, "--steps", "2", "--lr", "0.001"}, tr.extra...)
		if code, stdout, stderr := runCLI(t, env, args...); code != 0 {
			t.Fatalf("legorl %s: %s", strings.Join(args, " "), stderr)
		} else {
			t.Log(strings.TrimSpace(stdout))
		}
	}
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.CopyFS(corrupt, os.DirFS(storeDir)); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(corrupt, "runs", "fixture", "data", "segments", "iter-000001", "rollout-shard-001.parquet")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.Chmod(seg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return fx
}

// notebookModelConfig is a tiny Qwen3-MoE: every layer MoE, 8 experts, top 2.
const notebookModelConfig = `{"model_type":"qwen3_moe","vocab_size":64,"hidden_size":32,"intermediate_size":48,
"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"rms_norm_eps":1e-6,
"rope_theta":10000,"tie_word_embeddings":true,"num_experts":8,"num_experts_per_tok":2,"norm_topk_prob":true,
"moe_intermediate_size":16,"bos_token_id":1}`

// writeAlignedRun initialises checkpoint v0 with `legorl model init` and
// sharpens it, and commits iteration 0 of run "aligned" in storeDir: 4 tasks x 4 rollouts
// and a masked one, two harnesses, one or two segments each, whose
// logprobs are v0's own under the routes an "engine" chose (other experts
// for every third token) plus a little numeric noise. It returns v0's folder.
func writeAlignedRun(t *testing.T, dir, storeDir string) string {
	t.Helper()
	cfgPath := filepath.Join(dir, "aligned-config.json")
	if err := os.WriteFile(cfgPath, []byte(notebookModelConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "ckpt", "v0")
	if err := os.MkdirAll(filepath.Dir(policy), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, testEnv(nil), "model", "init", "--config", cfgPath, "--out", policy, "--seed", "11"); code != 0 {
		t.Fatalf("legorl model init: %s", stderr)
	}
	sharpen(t, filepath.Join(policy, safetensors.SingleFile), 6)
	m, err := model.Load(policy)
	if err != nil {
		t.Fatal(err)
	}
	cfg := m.Config()
	rng := rand.New(rand.NewPCG(5, 9))
	const run = "aligned"
	var rollouts []schemas.Rollout
	var segs []schemas.Segment
	for i := 0; i < 17; i++ {
		task := i / 4
		r := schemas.Rollout{RunID: run, TaskID: fmt.Sprintf("aligned__task-%d", task), GroupID: fmt.Sprintf("%s/0/task-%d", run, task),
			RolloutID: fmt.Sprintf("aligned-i0-t%d-g%d", task, i%4), Harness: []string{"bash", "tools"}[i%2],
			Termination: schemas.TerminationAgentCompleted, NumTurns: 3, NumLLMCalls: 3, NumToolCalls: 2,
			AgentSeconds: 1, StartedAtMs: 1_780_000_000_000 + int64(i)*1000,
			F2PPassed: []string{}, F2PFailed: []string{}, P2PPassed: []string{}, P2PFailed: []string{}, Flags: []string{}}
		switch {
		case i == 16:
			r.Termination, r.Error = schemas.TerminationSandboxCrash, "fixture: the sandbox died"
		case (i+task)%3 == 0:
			r.Reward, r.F2PPassed = 1, []string{"tests/test_x.py::test_fix"}
		default:
			r.F2PFailed = []string{"tests/test_x.py::test_fix"}
		}
		r.Status = r.Termination.Status()
		rollouts = append(rollouts, r)
		nseg := 1 + i%2
		for s := 0; s < nseg; s++ {
			segs = append(segs, alignedSegment(t, m, cfg, rng, r, int32(s)))
		}
	}
	st, err := storage.NewFileStore(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref := storage.ManifestRef{RunID: run, Stage: "rollout"}
	foot := func(tab schemas.Table) schemas.Footer {
		return schemas.Footer{SchemaVersion: schemas.Version, Table: tab, RunID: run, ConfigHash: "fixture", CodeVersion: "test"}
	}
	fr, err := storage.WriteFile(ctx, st, ref.DataKey("rollouts", "shard-000"), foot(schemas.TableRollouts), rollouts)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := storage.WriteFile(ctx, st, ref.DataKey("segments", "shard-000"), foot(schemas.TableSegments), segs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Commit(ctx, st, ref, []storage.FileEntry{fr, fs}); err != nil {
		t.Fatal(err)
	}
	return policy
}

// sharpen multiplies every matrix of a checkpoint by f: a freshly
// initialised model is nearly uniform (every logprob near -log vocab);
// larger weights make it peaked like a trained policy, with a spread of
// logprobs and experts whose choice matters.
func sharpen(t *testing.T, path string, f float32) {
	t.Helper()
	set, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, name := range set.Names() {
		info, _ := set.Info(name)
		data, err := set.Float32(name, info.Shape)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Shape) > 1 {
			for i := range data {
				data[i] *= f
			}
		}
		ts = append(ts, safetensors.Tensor{Name: name, Shape: info.Shape, Data: data})
	}
	if err := safetensors.WriteFile(path, ts, safetensors.F32, set.Metadata()); err != nil {
		t.Fatal(err)
	}
}

// alignedSegment makes one segment of r: a prompt, then three sampled
// turns with observation tokens between them, scored by m under routes
// that differ from m's own for every third token.
func alignedSegment(t *testing.T, m *model.Model, cfg model.Config, rng *rand.Rand, r schemas.Rollout, index int32) schemas.Segment {
	t.Helper()
	s := schemas.Segment{RunID: r.RunID, RolloutID: r.RolloutID, SegmentIndex: index, FirstCall: 3 * index, LastCall: 3*index + 2,
		FinishReason: "stop", Temperature: 1, TopP: 1}
	tok := func() int32 { return int32(2 + rng.IntN(cfg.VocabSize-2)) }
	for j := 0; j < 12; j++ {
		s.PromptTokenIDs = append(s.PromptTokenIDs, tok())
	}
	for turn := 0; turn < 3; turn++ {
		for j := 0; turn > 0 && j < 5; j++ {
			s.CompletionTokenIDs = append(s.CompletionTokenIDs, tok())
			s.LossMask = append(s.LossMask, 0)
		}
		for j := 0; j < 10; j++ {
			s.CompletionTokenIDs = append(s.CompletionTokenIDs, tok())
			s.LossMask = append(s.LossMask, 1)
		}
	}
	seq := model.Sequence{Prompt: s.PromptTokenIDs, Completion: s.CompletionTokenIDs, Temperature: 1}
	own, err := m.Logprobs([]model.Sequence{seq})
	if err != nil {
		t.Fatal(err)
	}
	routes := own[0].Routing
	for tk := range routes {
		if tk%3 != 1 {
			continue
		}
		for l := range routes[tk] {
			// The engine's numerics put other experts first for this token.
			used := map[int16]bool{}
			for _, e := range routes[tk][l] {
				used[e] = true
			}
			k := 0
			for e := int16(0); int(e) < cfg.NumExperts && k < len(routes[tk][l]); e++ {
				if !used[e] {
					routes[tk][l][k] = e
					k++
				}
			}
		}
	}
	seq.Routing = routes
	eng, err := m.Logprobs([]model.Sequence{seq})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRoutes(routes); err != nil {
		t.Fatal(err)
	}
	s.Logprobs = make([]float32, len(s.CompletionTokenIDs))
	s.PolicyVersions = make([]int64, len(s.CompletionTokenIDs))
	for j, mk := range s.LossMask {
		if mk == 1 {
			s.Logprobs[j] = min(eng[0].Logprobs[j]+float32(0.002*rng.NormFloat64()), 0)
		}
	}
	if err := s.Validate(cfg.VocabSize); err != nil {
		t.Fatal(err)
	}
	return s
}
