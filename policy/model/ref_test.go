package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

// refPython is the interpreter with PyTorch (Debian's python3-torch; the
// python3 on PATH may be another one without torch).
const refPython = "/usr/bin/python3"

var refScript = filepath.Join("..", "..", "tools", "model-ref", "qwen3_ref.py")

type refLine struct {
	Logprobs []float64            `json:"logprobs"`
	Routing  [][][]int16          `json:"routing"`
	Grads    map[string][]float64 `json:"grads"`
}

// runRef runs the PyTorch reference on a checkpoint and input lines. The
// test fails (never skips) when torch is missing: make test installs it.
func runRef(t *testing.T, dir string, in []map[string]any, extra ...string) []refLine {
	t.Helper()
	if out, err := exec.Command(refPython, "-c", "import torch").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch (apt-get install -y python3-torch python3-numpy): %v\n%s", refPython, err, out)
	}
	var buf bytes.Buffer
	for _, l := range in {
		b, _ := json.Marshal(l)
		buf.Write(append(b, '\n'))
	}
	inPath := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(inPath, buf.Bytes(), 0o644)
	cmd := exec.Command(refPython, append([]string{refScript, "--model", dir, "--input", inPath}, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference: %v\n%s", err, stderr.String())
	}
	var res []refLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var r refLine
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reference output: %v", err)
		}
		res = append(res, r)
	}
	if len(res) != len(in) {
		t.Fatalf("reference returned %d lines for %d", len(res), len(in))
	}
	return res
}

func refConfigs() map[string]Config {
	dense := Config{ModelType: "qwen3", VocabSize: 300, HiddenSize: 64, IntermediateSize: 96, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 32, RMSNormEps: 1e-6, RopeTheta: 10000,
		TieWordEmbeddings: true, DecoderSparseStep: 1}
	moe := dense
	moe.ModelType, moe.TieWordEmbeddings, moe.NumHiddenLayers = "qwen3_moe", false, 3
	moe.NumExperts, moe.NumExpertsPerTok, moe.MoEIntermediateSize, moe.NormTopKProb = 8, 2, 48, true
	moe.MLPOnlyLayers = []int{0}
	sparse := moe
	sparse.NormTopKProb, sparse.NumHiddenLayers, sparse.DecoderSparseStep, sparse.MLPOnlyLayers = false, 4, 2, nil
	sparse.NumKeyValueHeads, sparse.RopeTheta = 1, 1e6
	return map[string]Config{"dense": dense, "moe": moe, "moe sparse step": sparse}
}

// refModel returns a model with weights large enough (std 0.1, norm weights
// around 1) that the logprobs are far from uniform.
func refModel(c Config, seed uint64) *Model {
	p := newParams[float32](c)
	p.initRandom(seed, 0.1)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, t := range p.all {
		if t.is1D() {
			for i := range t.data {
				t.data[i] = float32(1 + 0.3*r.NormFloat64())
			}
		}
	}
	return &Model{cfg: c, p: p, be: backend.NewCPU(), support: c.VocabSize}
}

func refInputs(c Config, seed uint64) []Sequence {
	r := rand.New(rand.NewPCG(seed, 2))
	var seqs []Sequence
	for i, n := range [][2]int{{1, 1}, {7, 20}, {60, 40}, {3, 90}} {
		s := Sequence{Temperature: []float64{1, 0.7, 1, 1.5}[i]}
		for range n[0] {
			s.Prompt = append(s.Prompt, int32(r.IntN(c.VocabSize)))
		}
		for range n[1] {
			s.Completion = append(s.Completion, int32(r.IntN(c.VocabSize)))
		}
		seqs = append(seqs, s)
	}
	return seqs
}

func toLine(s Sequence) map[string]any {
	l := map[string]any{"prompt_ids": s.Prompt, "completion_ids": s.Completion, "temperature": s.Temperature}
	if s.Routing != nil {
		l["routing"] = s.Routing
	}
	return l
}

// TestAgainstPyTorch writes random tiny checkpoints (dense with a tied head;
// MoE with mlp_only_layers and renormalised top-k; MoE with
// decoder_sparse_step 2, raw top-k and one KV head), scores the same
// sequences with tools/model-ref/qwen3_ref.py (plain PyTorch following the
// HF modeling code) and requires logprobs within 1e-4 and identical
// routing, also when replaying a routing unlike the router's.
func TestAgainstPyTorch(t *testing.T) {
	t.Parallel()
	for name, c := range refConfigs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // the reference spends most of its time importing torch
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			m := refModel(c, 11)
			dir := t.TempDir()
			if err := m.Save(dir, SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			seqs := refInputs(c, 12)
			ours, err := m.Logprobs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			if c.MoELayers() > 0 {
				// Replay: each token takes the experts the router ranked
				// 3rd and 1st for the token after it.
				s := seqs[1]
				S := len(ours[1].Routing)
				s.Routing = make([][][]int16, S)
				for tok := range s.Routing {
					for l := range c.MoELayers() {
						nxt := ours[1].Routing[(tok+1)%S][l]
						s.Routing[tok] = append(s.Routing[tok], []int16{(nxt[0] + 3) % 8, nxt[0]})
					}
				}
				seqs = append(seqs, s)
				r, err := m.Logprobs(seqs[len(seqs)-1:])
				if err != nil {
					t.Fatal(err)
				}
				ours = append(ours, r[0])
			}
			var lines []map[string]any
			for _, s := range seqs {
				lines = append(lines, toLine(s))
			}
			ref := runRef(t, dir, lines)
			var worst float64
			for i := range seqs {
				if len(ref[i].Logprobs) != len(ours[i].Logprobs) {
					t.Fatalf("seq %d: %d logprobs vs %d", i, len(ours[i].Logprobs), len(ref[i].Logprobs))
				}
				for j, v := range ref[i].Logprobs {
					worst = math.Max(worst, math.Abs(v-float64(ours[i].Logprobs[j])))
				}
				if fmt.Sprint(ref[i].Routing) != fmt.Sprint(ours[i].Routing) {
					t.Errorf("seq %d: routing differs:\nours  %v\ntorch %v", i, ours[i].Routing, ref[i].Routing)
				}
			}
			t.Logf("max |logprob difference| = %.3g over %d sequences (a typical logprob: %.2f)", worst, len(seqs), ours[2].Logprobs[0])
			if worst >= 1e-4 {
				t.Fatalf("max |logprob difference| %.3g >= 1e-4", worst)
			}
		})
	}
}

// TestGradientAgainstPyTorch compares the gradient of sum_t w_t logprob_t
// for several tensors with torch autograd (float32 both sides).
func TestGradientAgainstPyTorch(t *testing.T) {
	t.Parallel()
	c := refConfigs()["moe"]
	m := refModel(c, 21)
	dir := t.TempDir()
	if err := m.Save(dir, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	seq := refInputs(c, 22)[2] // 100 tokens: several causal attention blocks
	r := rand.New(rand.NewPCG(23, 0))
	w := make([]float32, len(seq.Completion))
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	g := m.NewGrads()
	if _, err := m.Backward([]Sequence{seq}, [][]float32{w}, g); err != nil {
		t.Fatal(err)
	}
	names := []string{"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
		"model.layers.0.self_attn.k_norm.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.2.mlp.experts.3.down_proj.weight", "model.norm.weight", "lm_head.weight"}
	line := toLine(seq)
	line["weights"] = w
	args := []string{}
	for _, n := range names {
		args = append(args, "--grad", n)
	}
	ref := runRef(t, dir, []map[string]any{line}, args...)[0]
	for _, n := range names {
		var ours []float32
		for k, pt := range m.p.all {
			if pt.name == n {
				ours = g.p.all[k].data
			}
		}
		theirs := ref.Grads[n]
		if len(theirs) != len(ours) {
			t.Fatalf("%s: %d vs %d values", n, len(ours), len(theirs))
		}
		var diff, norm float64
		for i, v := range theirs {
			diff += (v - float64(ours[i])) * (v - float64(ours[i]))
			norm += v * v
		}
		rel := math.Sqrt(diff / norm)
		t.Logf("%s: |grad| %.4g, relative L2 difference %.2g", n, math.Sqrt(norm), rel)
		if !(norm > 0) || rel > 1e-3 {
			t.Errorf("%s: relative L2 difference %.3g from torch autograd", n, rel)
		}
	}
}
