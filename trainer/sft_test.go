package trainer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/trainer"
)

const sftTokenizer = "../policy/tokenizer/testdata/small/tokenizer.json"

// sftPolicy writes a random tiny checkpoint whose vocabulary is the test
// tokenizer's.
func sftPolicy(t *testing.T) string {
	t.Helper()
	tok, err := tokenizer.Load(sftTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	c := tinyConfig(t, false)
	c.VocabSize, c.MaxPositionEmbeddings = tok.VocabSize(), 1024
	m, err := model.New(c, 5)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "policy")
	if err := m.Save(dir, model.SaveOptions{TokenizerFiles: []string{sftTokenizer}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sftDemos writes a small demonstrations file: bash-style and tools-style
// conversations.
func sftDemos(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	for i, fix := range []string{"a + b", "a - b", "a * b", "a // b"} {
		bash := trainer.Demo{InstanceID: "bash", Messages: []chat.Message{
			{Role: "system", Content: "Fix bugs with one bash block."},
			{Role: "user", Content: "<task>\nadd is wrong\n</task>"},
			{Role: "assistant", Content: "```bash\ncat m.py\n```"},
			{Role: "user", Content: "<returncode>0</returncode>\n<output>\nreturn a ? b\n</output>"},
			{Role: "assistant", Content: "```bash\nsed -i 's/a ? b/" + fix + "/' m.py\n```"},
		}}
		tools := trainer.Demo{InstanceID: "tools", Messages: []chat.Message{
			{Role: "system", Content: "Use the tools."},
			{Role: "user", Content: "<task>\nfix " + fix + "\n</task>"},
			{Role: "assistant", Content: "Fixing.", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "str_replace", Arguments: json.RawMessage(`{"path": "m.py", "old_str": "x", "new_str": "` + fix + `"}`)}}},
			{Role: "tool", ToolCallID: "c1", Content: "Edited."},
			{Role: "assistant", Content: "Done.", ToolCalls: []chat.ToolCall{{ID: "c2", Name: "submit", Arguments: json.RawMessage(`{}`)}}},
		}, Tools: []chat.Tool{{Name: "str_replace", Description: "Replace.", Parameters: json.RawMessage(`{"type": "object"}`)}, {Name: "submit"}}}
		for _, d := range []trainer.Demo{bash, tools} {
			if i%2 == 1 && d.InstanceID == "tools" {
				continue
			}
			line, _ := json.Marshal(d)
			b.Write(append(line, '\n'))
		}
	}
	p := filepath.Join(t.TempDir(), "demos.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func demoSeqs(t *testing.T, path string) []model.Sequence {
	t.Helper()
	ds, _, err := trainer.ReadDemos(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(sftTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Sequence
	for _, d := range ds {
		s, err := trainer.DemoSequences(tok, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s...)
	}
	return out
}

// TestDemoSequences: one sequence per assistant turn; the completion is
// what the model samples after the generation prompt, ending with
// <|im_end|>; prompt plus completion is the rendered conversation.
func TestDemoSequences(t *testing.T) {
	tok, err := tokenizer.Load(sftTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	ds, _, err := trainer.ReadDemos(sftDemos(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		seqs, err := trainer.DemoSequences(tok, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 2 {
			t.Fatalf("%d sequences, want 2", len(seqs))
		}
		for k, s := range seqs {
			p, _ := tok.Decode(s.Prompt)
			c, _ := tok.Decode(s.Completion)
			if !strings.HasSuffix(string(p), "<|im_start|>assistant\n") || !strings.HasPrefix(string(c), "<think>\n\n</think>\n\n") || !strings.HasSuffix(string(c), "<|im_end|>") {
				t.Errorf("turn %d: prompt ends %q, completion %q", k, string(p)[max(0, len(p)-30):], c)
			}
			want, _ := chat.Qwen3{}.Render(d.Messages[:2+2*k], d.Tools, chat.Options{AddGenerationPrompt: true})
			if string(p) != want {
				t.Errorf("turn %d: the prompt is not the agent's request rendered", k)
			}
		}
	}
}

// TestSFT: a few steps on a tiny model lower the demonstrations' loss and
// raise the logprob of every assistant turn; the same seed gives the same
// weights; the lineage says what was done.
func TestSFT(t *testing.T) {
	policy, demos := sftPolicy(t), sftDemos(t)
	seqs := demoSeqs(t, demos)
	m0, err := model.Load(policy)
	if err != nil {
		t.Fatal(err)
	}
	before, err := trainer.SFTLoss(m0, seqs)
	if err != nil {
		t.Fatal(err)
	}
	lp0, _ := m0.Logprobs(seqs)
	cfg := trainer.SFTConfig{Epochs: 4, LR: 3e-3, BatchSize: 3, Seed: 9}
	var dirs []string
	for run := range 2 {
		out := filepath.Join(t.TempDir(), "sft")
		var steps int
		res, err := trainer.SFT(context.Background(), trainer.SFTOptions{Demos: demos, PolicyDir: policy, OutDir: out, Config: cfg,
			Progress: func(trainer.SFTStep) { steps++ }})
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, res.Dir)
		lin := res.Lineage
		if steps != 8 || len(lin.Steps) != 8 || lin.Kind != "sft" || lin.Version != 1 || lin.Demos.Conversations != 6 || lin.Demos.Turns != 12 || lin.Demos.SHA256 == "" {
			t.Fatalf("run %d: %d progress calls, lineage %+v", run, steps, lin)
		}
		if !(lin.FinalLoss < lin.Steps[0].Loss) {
			t.Errorf("final loss %v, first step %v", lin.FinalLoss, lin.Steps[0].Loss)
		}
		// RL reads the SFT lineage as a parent's.
		rl, err := trainer.ReadLineage(out)
		if err != nil || rl == nil || rl.Version != 1 {
			t.Fatalf("ReadLineage: %+v %v", rl, err)
		}
		for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "lineage.json"} {
			if _, err := os.Stat(filepath.Join(out, f)); err != nil {
				t.Error(err)
			}
		}
	}
	m1, err := model.Load(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	after, err := trainer.SFTLoss(m1, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if !(after < before-0.5) {
		t.Errorf("loss %v -> %v: not lowered", before, after)
	}
	lp1, _ := m1.Logprobs(seqs)
	for i := range seqs {
		var a, b float64
		for k := range lp0[i].Logprobs {
			a += float64(lp0[i].Logprobs[k])
			b += float64(lp1[i].Logprobs[k])
		}
		if !(b > a) {
			t.Errorf("sequence %d: assistant logprob %v -> %v", i, a, b)
		}
	}
	w0, _ := os.ReadFile(filepath.Join(dirs[0], "model.safetensors"))
	w1, _ := os.ReadFile(filepath.Join(dirs[1], "model.safetensors"))
	if !bytes.Equal(w0, w1) {
		t.Error("two runs with one seed differ")
	}
}

func TestSFTBadInput(t *testing.T) {
	policy, demos := sftPolicy(t), sftDemos(t)
	good, _ := os.ReadFile(demos)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.jsonl"), "nope.jsonl"},
		{"malformed", write("bad.jsonl", string(good)+"{\"messages\": [\n"), "bad.jsonl:7"},
		{"no assistant", write("noasst.jsonl", `{"messages": [{"role": "user", "content": "hi"}]}`+"\n"), "noasst.jsonl:1: no assistant turn"},
		{"bad role", write("role.jsonl", string(good)+"\n"+`{"messages": [{"role": "robot", "content": "hi"}]}`+"\n"), "role.jsonl:8: message 0: unknown role"},
		{"empty", write("empty.jsonl", "\n"), "no demonstrations"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			_, err := trainer.SFT(context.Background(), trainer.SFTOptions{Demos: c.path, PolicyDir: policy, OutDir: out, Config: trainer.SFTConfig{Epochs: 1}})
			if !errors.Is(err, trainer.ErrData) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want ErrData naming %q", err, c.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s written", out)
			}
		})
	}
	// An existing output folder is refused.
	if _, err := trainer.SFT(context.Background(), trainer.SFTOptions{Demos: demos, PolicyDir: policy, OutDir: dir}); !errors.Is(err, trainer.ErrCheckpoint) {
		t.Errorf("existing out: %v", err)
	}
}

// TestSFTProbe: with a probe, SFT stops at the first epoch whose measured
// pass rate is in the band and keeps those weights; when no probe is in
// the band it runs every epoch and keeps the weights of the probe nearest
// to it, not the last ones. The lineage records every probe.
func TestSFTProbe(t *testing.T) {
	policy, demos := sftPolicy(t), sftDemos(t)
	cfg := trainer.SFTConfig{Epochs: 4, LR: 3e-3, BatchSize: 3, Seed: 9}
	cases := []struct {
		name   string
		rates  []float64 // by epoch
		probes int
		kept   int
	}{
		{"enters the band", []float64{0.05, 0.1, 0.3, 0.9}, 3, 2},
		{"never in the band", []float64{0.0, 0.8, 0.6, 0.9}, 4, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var measured []int
			probe := &trainer.SFTProbe{Dir: filepath.Join(dir, "probes"), Measure: func(ctx context.Context, ckpt string, epoch int) (float64, int, error) {
				if _, err := model.Load(ckpt); err != nil {
					return 0, 0, err
				}
				measured = append(measured, epoch)
				return c.rates[epoch], 10, nil
			}}
			res, err := trainer.SFT(context.Background(), trainer.SFTOptions{Demos: demos, PolicyDir: policy, OutDir: filepath.Join(dir, "sft"), Config: cfg, Probe: probe})
			if err != nil {
				t.Fatal(err)
			}
			lin := res.Lineage
			if len(measured) != c.probes || len(lin.Probes) != c.probes || lin.Kept == nil || *lin.Kept != c.kept {
				t.Fatalf("measured epochs %v, lineage probes %+v kept %v; want %d probes, kept %d", measured, lin.Probes, lin.Kept, c.probes, c.kept)
			}
			if len(lin.Steps) != 2*c.probes {
				t.Fatalf("%d steps, want %d (2 per epoch run)", len(lin.Steps), 2*c.probes)
			}
			for i, p := range lin.Probes {
				if p.InBand != (p.PassRate >= 0.2 && p.PassRate <= 0.5) || p.Tasks != 10 || p.Epoch != i || !(p.Seconds > 0) {
					t.Fatalf("probe %d: %+v", i, p)
				}
			}
			kept, _ := os.ReadFile(filepath.Join(lin.Probes[c.kept].Checkpoint, "model.safetensors"))
			got, _ := os.ReadFile(filepath.Join(res.Dir, "model.safetensors"))
			if len(kept) == 0 || !bytes.Equal(kept, got) {
				t.Fatal("the checkpoint does not hold the kept probe's weights")
			}
			if last, _ := os.ReadFile(filepath.Join(lin.Probes[len(lin.Probes)-1].Checkpoint, "model.safetensors")); c.kept != len(lin.Probes)-1 && bytes.Equal(last, got) {
				t.Fatal("the checkpoint holds the last probe's weights, not the kept one's")
			}
			back, err := os.ReadFile(filepath.Join(res.Dir, "lineage.json"))
			if err != nil || !bytes.Contains(back, []byte(`"kept_probe"`)) || !bytes.Contains(back, []byte(`"in_band"`)) {
				t.Fatalf("lineage.json: %v %s", err, back)
			}
		})
	}
}

// TestSFTSharedPrefix: with SharedPrefix every step's loss and gradient
// norm are the default's to float32 rounding (the first step's exactly up
// to rounding; later ones after AdamW has moved slightly different
// weights), two runs with one seed give the same bytes, the lineage
// records the option, and a config without it hashes as before the option
// existed.
func TestSFTSharedPrefix(t *testing.T) {
	policy, demos := sftPolicy(t), sftDemos(t)
	run := func(shared bool) (*trainer.SFTLineage, []byte) {
		t.Helper()
		cfg := trainer.SFTConfig{Epochs: 2, LR: 3e-3, BatchSize: 3, Seed: 9, SharedPrefix: shared}
		res, err := trainer.SFT(context.Background(), trainer.SFTOptions{Demos: demos, PolicyDir: policy, OutDir: filepath.Join(t.TempDir(), "sft"), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.ReadFile(filepath.Join(res.Dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		lin, err := os.ReadFile(filepath.Join(res.Dir, "lineage.json"))
		if err != nil || bytes.Contains(lin, []byte(`"shared_prefix"`)) != shared {
			t.Fatalf("shared %v: lineage.json: %v %s", shared, err, lin)
		}
		return res.Lineage, w
	}
	base, _ := run(false)
	lin, w1 := run(true)
	_, w2 := run(true)
	if !bytes.Equal(w1, w2) {
		t.Error("two shared-prefix runs with one seed differ")
	}
	rel := func(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-12) }
	var worst float64
	for i, st := range lin.Steps {
		worst = max(worst, rel(st.Loss, base.Steps[i].Loss))
		want := base.Steps[i]
		tol := 1e-3
		if i == 0 {
			tol = 1e-5
		}
		if rel(st.Loss, want.Loss) > tol || rel(st.GradNorm, want.GradNorm) > 10*tol || st.Tokens != want.Tokens {
			t.Errorf("step %d: loss %.8g grad norm %.8g, unshared %.8g and %.8g", i, st.Loss, st.GradNorm, want.Loss, want.GradNorm)
		}
	}
	t.Logf("%d steps: loss within %.2g (relative) of the unshared run's", len(lin.Steps), worst)
	b, _ := json.Marshal(trainer.SFTConfig{}.WithDefaults())
	if bytes.Contains(b, []byte("shared_prefix")) {
		t.Errorf("the default config marshals the option: %s", b)
	}
}
