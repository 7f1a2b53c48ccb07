package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/trainer"
)

// TestSFT runs `legorl sft demos` for both agents on a generated suite and
// `legorl sft` on the demonstrations with a tiny random policy: the
// checkpoint is written with an sft lineage and the loss falls.
func TestSFT(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if code, stdout, stderr := runCLI(t, testEnv(nil), "tasks", "generate", "--n", "6", "--seed", "3", "--out", suite); code != 0 {
		t.Fatalf("generate: %s %s", stdout, stderr)
	}
	var files []string
	for _, h := range []string{"bash", "tools"} {
		out := filepath.Join(dir, h+".jsonl")
		code, stdout, stderr := runCLI(t, testEnv(nil), "sft", "demos", "--tasks", suite, "--harness", h, "--out", out, "--n", "2", "--grade", "local")
		if code != 0 || !strings.Contains(stdout, "2 "+h+" demonstrations") || strings.Count(stderr, "graded reward 1") != 2 {
			t.Fatalf("sft demos %s: exit %d: %s %s", h, code, stdout, stderr)
		}
		files = append(files, out)
	}
	// Both formats in one file.
	var all []byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	demos := filepath.Join(dir, "demos.jsonl")
	os.WriteFile(demos, all, 0o644)

	policy := testPolicy(t)
	out := filepath.Join(dir, "sft")
	code, stdout, stderr := runCLI(t, testEnv(nil), "sft", "--demos", demos, "--policy", policy, "--out", out,
		"--epochs", "2", "--lr", "3e-3", "--batch", "4", "--seed", "1")
	if code != 0 || !strings.Contains(stdout, "from 4 conversations") || !strings.Contains(stderr, "step 2/2") {
		t.Fatalf("sft: exit %d: %s %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "lineage.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lin trainer.SFTLineage
	if err := json.Unmarshal(b, &lin); err != nil {
		t.Fatal(err)
	}
	if lin.Kind != "sft" || lin.Demos.SHA256 == "" || lin.Demos.Turns != 12 || lin.ConfigHash == "" || !(lin.FinalLoss < lin.Steps[0].Loss) {
		t.Errorf("lineage: kind %q, demos %+v, final loss %v, first %v", lin.Kind, lin.Demos, lin.FinalLoss, lin.Steps[0].Loss)
	}
	if lin.Config.SharedPrefix {
		t.Error("lineage: shared_prefix on without --shared-prefix")
	}

	// --shared-prefix: the same SFT through model.BackwardSharedPrefix,
	// recorded in the lineage; its losses agree with the default's to
	// float32 rounding.
	outShared := filepath.Join(dir, "sft-shared")
	code, stdout, stderr = runCLI(t, testEnv(nil), "sft", "--demos", demos, "--policy", policy, "--out", outShared,
		"--epochs", "2", "--lr", "3e-3", "--batch", "4", "--seed", "1", "--shared-prefix")
	if code != 0 {
		t.Fatalf("sft --shared-prefix: exit %d: %s %s", code, stdout, stderr)
	}
	b, err = os.ReadFile(filepath.Join(outShared, "lineage.json"))
	if err != nil {
		t.Fatal(err)
	}
	var linShared trainer.SFTLineage
	if err := json.Unmarshal(b, &linShared); err != nil {
		t.Fatal(err)
	}
	if !linShared.Config.SharedPrefix || linShared.ConfigHash == lin.ConfigHash || len(linShared.Steps) != len(lin.Steps) {
		t.Fatalf("lineage with --shared-prefix: config %+v, hash %s (default's %s), %d steps", linShared.Config, linShared.ConfigHash, lin.ConfigHash, len(linShared.Steps))
	}
	for i, st := range linShared.Steps {
		if d := math.Abs(st.Loss - lin.Steps[i].Loss); d > 1e-3*math.Abs(lin.Steps[i].Loss)+1e-5 {
			t.Errorf("step %d: loss %v with --shared-prefix, %v without", i, st.Loss, lin.Steps[i].Loss)
		}
	}

	// Bad input: one line naming the file and line; nothing written.
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, append(all, []byte("not json\n")...), 0o644)
	code, _, stderr = runCLI(t, testEnv(nil), "sft", "--demos", bad, "--policy", policy, "--out", filepath.Join(dir, "x"))
	if code != 2 || !strings.Contains(stderr, "bad.jsonl:5") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("bad demos: exit %d: %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a checkpoint was written from bad demos")
	}
	code, _, stderr = runCLI(t, testEnv(nil), "sft", "demos", "--tasks", suite, "--harness", "claude", "--out", filepath.Join(dir, "claude.jsonl"))
	if code != 2 || !strings.Contains(stderr, "want bash, tools, pi, codex, opencode") {
		t.Errorf("claude: exit %d: %q", code, stderr)
	}
	code, _, stderr = runCLI(t, testEnv(nil), "sft", "demos", "--tasks", suite, "--harness", "bash", "--parallel", "0", "--out", filepath.Join(dir, "p0.jsonl"))
	if code != 2 || !strings.Contains(stderr, "--parallel 0: want at least 1") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("--parallel 0: exit %d: %q", code, stderr)
	}
}

// TestSFTDemosPi: `legorl sft demos --harness pi` runs the installed pi
// program (--harness-cache); without it, and no npm to install it, it
// fails on one line naming the cache and make test-harnesses, writing
// nothing. With LEGORL_HARNESSES=1 and pi in $LEGORL_HARNESS_CACHE (as
// make test-harnesses leaves tools/harnesses) it writes graded
// demonstrations.
func TestHarnessSFTDemosPi(t *testing.T) {
	if scripted.ProgramDir != rollout.ProgramDir || scripted.DefaultWorkdir != rollout.WorkspaceDir {
		t.Errorf("the demonstrations name %s and %s, rollouts show %s and %s", scripted.ProgramDir, scripted.DefaultWorkdir, rollout.ProgramDir, rollout.WorkspaceDir)
	}
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if code, stdout, stderr := runCLI(t, testEnv(nil), "tasks", "generate", "--n", "6", "--seed", "3", "--out", suite); code != 0 {
		t.Fatalf("generate: %s %s", stdout, stderr)
	}
	out := filepath.Join(dir, "pi.jsonl")
	if cache := os.Getenv("LEGORL_HARNESS_CACHE"); os.Getenv("LEGORL_HARNESSES") != "" && cache != "" {
		code, stdout, stderr := runCLI(t, testEnv(nil), "sft", "demos", "--tasks", suite, "--harness", "pi", "--harness-cache", cache, "--out", out, "--n", "2", "--grade", "local")
		if code != 0 || !strings.Contains(stdout, "2 pi demonstrations") || strings.Count(stderr, "graded reward 1") != 2 {
			t.Fatalf("sft demos pi: exit %d: %s %s", code, stdout, stderr)
		}
		demos, _, err := trainer.ReadDemos(out)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.Load(filepath.Join(testPolicy(t), "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range demos { // SFT renders them with the proxy's template
			if seqs, err := trainer.DemoSequences(tok, d); err != nil || len(seqs) < 2 {
				t.Errorf("%s: %d sequences, %v", d.InstanceID, len(seqs), err)
			}
		}
		return
	}
	cache := filepath.Join(dir, "cache")
	t.Setenv("PATH", t.TempDir()) // no npm
	code, _, stderr := runCLI(t, testEnv(nil), "sft", "demos", "--tasks", suite, "--harness", "pi", "--harness-cache", cache, "--out", out)
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, cache) || !strings.Contains(stderr, "make test-harnesses") {
		t.Errorf("pi not installed: exit %d: %q", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a demonstrations file was written")
	}
}
