package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
)

// writeTrainRun saves a tiny MoE checkpoint (version 0) under dir/v0 and
// commits iteration 0 of run "cli": two groups of two rollouts and a masked
// one, each one segment whose logprobs and routes are the checkpoint's
// own, shifted by `shift` when the test wants the check to fail.
func writeTrainRun(t *testing.T, dir string, shift float32) (store, policy string) {
	t.Helper()
	cfg, err := model.ParseConfig([]byte(modelTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	policy = filepath.Join(dir, "v0")
	if err := m.Save(policy, model.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var rollouts []schemas.Rollout
	var segs []schemas.Segment
	var seqs []model.Sequence
	for i, rw := range []float64{1, 0, 0, 1, -1} {
		r := schemas.Rollout{RunID: "cli", TaskID: fmt.Sprintf("t%d", i/2), GroupID: fmt.Sprintf("g%d", i/2),
			RolloutID: fmt.Sprintf("r%d", i), Harness: "bash", Reward: rw, Termination: schemas.TerminationAgentCompleted}
		if rw < 0 {
			r.Reward, r.Termination = 0, schemas.TerminationSandboxCrash
		}
		r.Status = r.Termination.Status()
		rollouts = append(rollouts, r)
		s := schemas.Segment{RunID: "cli", RolloutID: r.RolloutID, FinishReason: "stop", Temperature: 1, TopP: 1}
		for j := 0; j < 20; j++ {
			id := int32(rng.IntN(cfg.VocabSize))
			if j < 5 {
				s.PromptTokenIDs = append(s.PromptTokenIDs, id)
				continue
			}
			mask := int8(1)
			if j >= 10 && j < 13 {
				mask = 0 // an observation
			}
			s.CompletionTokenIDs = append(s.CompletionTokenIDs, id)
			s.LossMask = append(s.LossMask, mask)
			s.PolicyVersions = append(s.PolicyVersions, 0)
		}
		segs = append(segs, s)
		seqs = append(seqs, model.Sequence{Prompt: s.PromptTokenIDs, Completion: s.CompletionTokenIDs, Temperature: 1})
	}
	res, err := m.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range segs {
		segs[i].Logprobs = make([]float32, len(segs[i].CompletionTokenIDs))
		for j, mk := range segs[i].LossMask {
			if mk == 1 {
				segs[i].Logprobs[j] = res[i].Logprobs[j] - shift*float32(j%3)
			}
		}
		segs[i].SetRoutes(res[i].Routing)
	}
	storeDir := filepath.Join(dir, "store")
	st, err := storage.NewFileStore(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref := storage.ManifestRef{RunID: "cli", Stage: "rollout"}
	foot := func(tab schemas.Table) schemas.Footer {
		return schemas.Footer{SchemaVersion: schemas.Version, Table: tab, RunID: "cli", CodeVersion: "test"}
	}
	fr, err := storage.WriteFile(ctx, st, ref.DataKey("rollouts", "0"), foot(schemas.TableRollouts), rollouts)
	if err != nil {
		t.Fatal(err)
	}
	fsg, err := storage.WriteFile(ctx, st, ref.DataKey("segments", "0"), foot(schemas.TableSegments), segs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Commit(ctx, st, ref, []storage.FileEntry{fr, fsg}); err != nil {
		t.Fatal(err)
	}
	return "file://" + storeDir, policy
}

func TestTrainCommand(t *testing.T) {
	dir := t.TempDir()
	store, policy := writeTrainRun(t, dir, 0)
	cfgFile := filepath.Join(dir, "train.json")
	os.WriteFile(cfgFile, []byte(`{"loss":"gspo","lr":0.001,"steps":1}`), 0o644)
	out := filepath.Join(dir, "v1")
	code, stdout, stderr := runCLI(t, testEnv(nil), "train", "--store", store, "--run", "cli", "--iteration", "0",
		"--policy", policy, "--out", out, "--config", cfgFile, "--steps", "2", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Count(stdout, "\n") != 1 {
		t.Errorf("summary is not one line: %q", stdout)
	}
	for _, want := range []string{"run cli iteration 0: policy v0 -> v1 in " + out, "4 segments of 4 completed rollouts",
		"(1 masked: sandbox_crash 1)", "0 of 2 groups zero-variance", "trained 4 segments in 2 steps", "logprob pearson 1.0000", "train tokens/s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary %q lacks %q", stdout, want)
		}
	}
	for _, want := range []string{"legorl train: loaded the parent", "recompute logprobs: 100% (4/4 segments)", "step 2/2: 100%", "publishing"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress %q lacks %q", stderr, want)
		}
	}
	lin, err := trainer.ReadLineage(out)
	if err != nil || lin == nil {
		t.Fatalf("lineage: %v", err)
	}
	// The file's settings, then the flags over them.
	if lin.Config.Loss != trainer.LossGSPO || lin.Config.LR != 0.001 || lin.Config.Steps != 2 || lin.Config.Seed != 3 || lin.CodeVersion != version {
		t.Errorf("config %+v, code version %q", lin.Config, lin.CodeVersion)
	}
	// The new checkpoint is version 1: iteration 0 was sampled by version
	// 0, so training it again from v1 is refused, unless told otherwise.
	args := []string{"train", "--store", store, "--run", "cli", "--iteration", "0", "--policy", out, "--out", filepath.Join(dir, "v2")}
	code, _, stderr = runCLI(t, testEnv(nil), args...)
	if code != 2 || !strings.Contains(stderr, "none was sampled by policy version 1") {
		t.Errorf("training v1 on v0's rollouts: exit %d, %q", code, stderr)
	}
	code, stdout, stderr = runCLI(t, testEnv(nil), append(args, "--policy-version", "0", "--min-pearson", "-1")...)
	if code != 0 || !strings.Contains(stdout, "policy v0 -> v1") {
		t.Errorf("with --policy-version 0: exit %d, %q %q", code, stdout, stderr)
	}
}

func TestTrainCommandErrors(t *testing.T) {
	dir := t.TempDir()
	store, policy := writeTrainRun(t, dir, 0)
	badStore, badPolicy := writeTrainRun(t, filepath.Join(dir, "bad"), 0.4)
	badCfg := filepath.Join(dir, "bad.json")
	os.WriteFile(badCfg, []byte(`{"learning_rate":1}`), 0o644)
	out := filepath.Join(dir, "out")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing flags", []string{"train", "--run", "cli"}, "--run, --iteration, --policy and --out are required"},
		{"bad run id", []string{"train", "--store", store, "--run", "a/b", "--iteration", "0", "--policy", policy, "--out", out}, `run id "a/b"`},
		{"unknown config field", []string{"train", "--store", store, "--run", "cli", "--iteration", "0", "--policy", policy, "--out", out, "--config", badCfg}, `unknown field "learning_rate"`},
		{"bad loss", []string{"train", "--store", store, "--run", "cli", "--iteration", "0", "--policy", policy, "--out", out, "--loss", "dpo"}, `loss "dpo"`},
		{"no such iteration", []string{"train", "--store", store, "--run", "cli", "--iteration", "5", "--policy", policy, "--out", out}, "no manifest under runs/cli/manifests/rollout/iter-000005/"},
		{"failed check", []string{"train", "--store", badStore, "--run", "cli", "--iteration", "0", "--policy", badPolicy, "--out", out}, "train-inference logprob check failed: FAILED: pearson"},
		{"output exists", []string{"train", "--store", store, "--run", "cli", "--iteration", "0", "--policy", policy, "--out", policy}, "already exists"},
		{"unknown compute", []string{"train", "--store", store, "--run", "cli", "--iteration", "0", "--policy", policy, "--out", out, "--compute", "tpu"}, `--compute tpu: backend: unknown backend "tpu" (have cpu`},
		{"unknown precision", []string{"train", "--store", store, "--run", "cli", "--iteration", "0", "--policy", policy, "--out", out, "--precision", "fp8"}, `unknown precision "fp8"`},
	}
	if !slices.Contains(backend.Names(), "cuda") { // the default build
		tests = append(tests, struct {
			name string
			args []string
			want string
		}{"cuda not compiled in", []string{"train", "--store", store, "--run", "cli", "--iteration", "0", "--policy", policy, "--out", out, "--compute", "cuda"}, "build with -tags cuda"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, testEnv(nil), tt.args...)
			// Progress lines may come first; the error is the last line.
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			if code != 2 || !strings.HasSuffix(stderr, "\n") || !strings.HasPrefix(last, "legorl train: ") || !strings.Contains(last, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and a last line naming %q", code, stderr, tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written on error", out)
			}
		})
	}
}
