package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/safetensors"
)

func TestParseConfig(t *testing.T) {
	for _, name := range []string{"tiny.json", "tiny_moe.json"} {
		c, err := LoadConfig(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if c.HiddenSize != 256 || c.NumHiddenLayers != 4 || c.HeadDim != 64 || c.NumKeyValueHeads != 2 || c.VocabSize != 4096 {
			t.Fatalf("%s: %+v", name, c)
		}
		if name == "tiny_moe.json" && (c.MoELayers() != 3 || c.IsMoE(0) || !c.IsMoE(1)) {
			t.Fatalf("%s: %d MoE layers, layer 0 MoE %v", name, c.MoELayers(), c.IsMoE(0))
		}
		if _, ok := c.Extra["architectures"]; !ok {
			t.Fatalf("%s: unknown field architectures not kept", name)
		}
	}
	base := `"vocab_size":10,"hidden_size":8,"intermediate_size":4,"num_hidden_layers":2,"num_attention_heads":2`
	tests := []struct {
		name, json, want string
	}{
		{"defaults", `{` + base + `}`, ""},
		{"no layers", `{"vocab_size":10,"hidden_size":8,"intermediate_size":4,"num_attention_heads":2}`, "num_hidden_layers must be positive"},
		{"gqa", `{` + base + `,"num_key_value_heads":3}`, "not a multiple of num_key_value_heads"},
		{"odd head dim", `{` + base + `,"head_dim":3}`, "head_dim 3 must be even"},
		{"act", `{` + base + `,"hidden_act":"gelu"}`, `hidden_act "gelu"`},
		{"rope scaling", `{` + base + `,"rope_scaling":{"type":"yarn"}}`, "rope_scaling"},
		{"model type", `{` + base + `,"model_type":"llama"}`, `model_type "llama"`},
		{"topk", `{` + base + `,"num_experts":4,"num_experts_per_tok":5,"moe_intermediate_size":2}`, "num_experts_per_tok 5"},
		{"moe inter", `{` + base + `,"num_experts":4,"num_experts_per_tok":2}`, "moe_intermediate_size"},
		{"mlp only", `{` + base + `,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":2,"mlp_only_layers":[7]}`, "mlp_only_layers names layer 7"},
		{"dtype", `{` + base + `,"torch_dtype":"int8"}`, `torch_dtype "int8"`},
		{"not json", `{`, "unexpected end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.json))
			if tc.want == "" {
				if err != nil || c.HeadDim != 4 || c.NumKeyValueHeads != 2 || c.DecoderSparseStep != 1 {
					t.Fatalf("%+v, %v", c, err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func mustNew(t testing.TB, c Config, seed uint64) *Model {
	t.Helper()
	m, err := New(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func seqsFor(c Config) []Sequence {
	var out []Sequence
	for i, n := range [][2]int{{5, 7}, {1, 3}, {9, 0}} {
		s := Sequence{Temperature: []float64{1, 0.6, 1.3}[i]}
		for j := 0; j < n[0]; j++ {
			s.Prompt = append(s.Prompt, int32((j*7+i)%c.VocabSize))
		}
		for j := 0; j < n[1]; j++ {
			s.Completion = append(s.Completion, int32((j*5+3*i+1)%c.VocabSize))
		}
		out = append(out, s)
	}
	return out
}

// TestCheckpointRoundTrip saves and loads dense and MoE models in F32 (the
// logprobs must be bit-identical) and BF16 (close), and checks the HF tensor
// names.
func TestCheckpointRoundTrip(t *testing.T) {
	for _, c := range []Config{tinyDense(true), tinyDense(false), tinyMoE(true)} {
		for _, dt := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
			t.Run(fmt.Sprintf("%s tied=%v %s", c.ModelType, c.TieWordEmbeddings, dt), func(t *testing.T) {
				m := mustNew(t, c, 1)
				dir := t.TempDir()
				tok := filepath.Join(t.TempDir(), "tokenizer.json")
				os.WriteFile(tok, []byte(fmt.Sprintf(`{"model":{"vocab":{"a":%d}}}`, c.VocabSize-1)), 0o644) // a size Load reads
				if err := m.Save(dir, SaveOptions{DType: dt, TokenizerFiles: []string{tok}}); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
					t.Fatal("tokenizer not copied")
				}
				set, err := safetensors.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				names := strings.Join(set.Names(), " ")
				for _, want := range []string{"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
					"model.layers.1.self_attn.k_norm.weight", "model.layers.0.post_attention_layernorm.weight",
					"model.layers.1.mlp.down_proj.weight", "model.norm.weight"} {
					if !strings.Contains(names, want) {
						t.Errorf("no tensor %s in %s", want, names)
					}
				}
				if strings.Contains(names, "lm_head.weight") == c.TieWordEmbeddings {
					t.Errorf("lm_head.weight present=%v with tie_word_embeddings=%v", !c.TieWordEmbeddings, c.TieWordEmbeddings)
				}
				if c.NumExperts > 0 && !strings.Contains(names, "model.layers.2.mlp.experts.3.gate_proj.weight") ||
					c.NumExperts > 0 && !strings.Contains(names, "model.layers.0.mlp.gate.weight") {
					t.Errorf("MoE tensors missing: %s", names)
				}
				m2, err := Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				if m2.cfg.TorchDType != map[safetensors.DType]string{safetensors.F32: "float32", safetensors.BF16: "bfloat16"}[dt] {
					t.Errorf("torch_dtype %q", m2.cfg.TorchDType)
				}
				a, err := m.Logprobs(seqsFor(c))
				if err != nil {
					t.Fatal(err)
				}
				b, err := m2.Logprobs(seqsFor(c))
				if err != nil {
					t.Fatal(err)
				}
				for i := range a {
					for j := range a[i].Logprobs {
						d := math.Abs(float64(a[i].Logprobs[j] - b[i].Logprobs[j]))
						if dt == safetensors.F32 && d != 0 || d > 0.05 {
							t.Fatalf("seq %d token %d: %v vs %v after %s round trip", i, j, a[i].Logprobs[j], b[i].Logprobs[j], dt)
						}
					}
				}
			})
		}
	}
}

// TestLoadErrors damages a checkpoint in each way a user meets and wants
// a one-line error naming the tensor.
func TestLoadErrors(t *testing.T) {
	c := tinyDense(false)
	m := mustNew(t, c, 2)
	write := func(t *testing.T, mutate func(ts []safetensors.Tensor) []safetensors.Tensor, dtype safetensors.DType) string {
		dir := t.TempDir()
		if err := m.Save(dir, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		var ts []safetensors.Tensor
		for _, pt := range m.p.all {
			ts = append(ts, safetensors.Tensor{Name: pt.name, Shape: pt.shape, Data: pt.data})
		}
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), mutate(ts), dtype, nil); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"missing", func(t *testing.T) string {
			return write(t, func(ts []safetensors.Tensor) []safetensors.Tensor { return ts[:len(ts)-1] }, safetensors.F32)
		}, `missing tensor: "lm_head.weight"`},
		{"shape", func(t *testing.T) string {
			return write(t, func(ts []safetensors.Tensor) []safetensors.Tensor {
				ts[2].Shape = []int{ts[2].Shape[1], ts[2].Shape[0]}
				return ts
			}, safetensors.F32)
		}, `"model.layers.0.self_attn.q_proj.weight" has shape [8 16]`},
		{"unexpected", func(t *testing.T) string {
			return write(t, func(ts []safetensors.Tensor) []safetensors.Tensor {
				return append(ts, safetensors.Tensor{Name: "model.rotary_emb.inv_freq", Shape: []int{2}, Data: []float32{1, 2}})
			}, safetensors.BF16)
		}, `unexpected tensor "model.rotary_emb.inv_freq"`},
		{"truncated", func(t *testing.T) string {
			dir := t.TempDir()
			m.Save(dir, SaveOptions{})
			p := filepath.Join(dir, "model.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-10], 0o644)
			return dir
		}, `truncated file: tensor "lm_head.weight"`},
		{"dtype", func(t *testing.T) string {
			dir := t.TempDir()
			m.Save(dir, SaveOptions{})
			h := `{"model.norm.weight":{"dtype":"F16","shape":[8],"data_offsets":[0,16]}}`
			b := make([]byte, 8, 8+len(h)+16)
			b[0] = byte(len(h))
			b = append(append(b, h...), make([]byte, 16)...)
			os.WriteFile(filepath.Join(dir, "model.safetensors"), b, 0o644)
			return dir
		}, `tensor "model.norm.weight" has dtype "F16"`},
		{"no config", func(t *testing.T) string { return t.TempDir() }, "config.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.dir(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCausal checks that a token's logprob does not depend on where the
// prompt ends or on later tokens.
func TestCausal(t *testing.T) {
	for _, c := range []Config{tinyDense(true), tinyMoE(false)} {
		m := mustNew(t, c, 3)
		ids := []int32{1, 4, 2, 8, 5, 7, 3, 9}
		r, err := m.Logprobs([]Sequence{
			{Prompt: ids[:2], Completion: ids[2:]},
			{Prompt: ids[:5], Completion: ids[5:7]},
		})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 2; j++ {
			if d := math.Abs(float64(r[0].Logprobs[3+j] - r[1].Logprobs[j])); d > 1e-5 {
				t.Errorf("%s token %d: %v vs %v", c.ModelType, 5+j, r[0].Logprobs[3+j], r[1].Logprobs[j])
			}
		}
		if c.NumExperts > 0 && fmt.Sprint(r[0].Routing[:7]) != fmt.Sprint(r[1].Routing) {
			t.Errorf("routing of shared tokens differs")
		}
	}
}

// TestReplay checks routing replay: replaying the router's own choice gives
// the same logprobs, another routing gives different ones and is reported
// back, and a malformed routing is a clear error.
func TestReplay(t *testing.T) {
	c := tinyMoE(true)
	m := mustNew(t, c, 4)
	seq := seqsFor(c)[0]
	free, err := m.Logprobs([]Sequence{seq})
	if err != nil {
		t.Fatal(err)
	}
	S := len(seq.Prompt) + len(seq.Completion)
	if len(free[0].Routing) != S || len(free[0].Routing[0]) != c.MoELayers() || len(free[0].Routing[0][0]) != 2 {
		t.Fatalf("routing shape %d x %d x %d", len(free[0].Routing), len(free[0].Routing[0]), len(free[0].Routing[0][0]))
	}
	seq.Routing = free[0].Routing
	same, err := m.Logprobs([]Sequence{seq})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(same[0].Logprobs) != fmt.Sprint(free[0].Logprobs) {
		t.Fatalf("replaying the router's own routing changed logprobs")
	}
	other := make([][][]int16, S)
	for tok := range other {
		for l := range c.MoELayers() {
			f := free[0].Routing[tok][l]
			// the two experts not chosen with the smallest ids
			var pick []int16
			for e := int16(0); len(pick) < 2; e++ {
				if e != f[0] && e != f[1] {
					pick = append(pick, e)
				}
			}
			other[tok] = append(other[tok], pick)
		}
	}
	seq.Routing = other
	diff, err := m.Logprobs([]Sequence{seq})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(diff[0].Routing) != fmt.Sprint(other) {
		t.Fatalf("replayed routing not reported")
	}
	if fmt.Sprint(diff[0].Logprobs) == fmt.Sprint(free[0].Logprobs) {
		t.Fatalf("a different routing left logprobs unchanged")
	}
	bad := []struct {
		name   string
		mutate func(r [][][]int16) [][][]int16
		want   string
	}{
		{"tokens", func(r [][][]int16) [][][]int16 { return r[1:] }, "routing has 11 tokens, the sequence 12"},
		{"layers", func(r [][][]int16) [][][]int16 { r[3] = r[3][:1]; return r }, "token 3 has 1 layers"},
		{"k", func(r [][][]int16) [][][]int16 { r[2][1] = []int16{1}; return r }, "token 2 layer 1 has 1 experts, want 2"},
		{"range", func(r [][][]int16) [][][]int16 { r[0][0] = []int16{0, 9}; return r }, "names expert 9 of 4"},
		{"repeat", func(r [][][]int16) [][][]int16 { r[0][0] = []int16{1, 1}; return r }, "repeats expert 1"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := make([][][]int16, S)
			for i := range r {
				r[i] = append([][]int16(nil), other[i]...)
			}
			seq.Routing = tc.mutate(r)
			_, err := m.Logprobs([]Sequence{seq})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestInputErrors(t *testing.T) {
	m := mustNew(t, tinyDense(true), 5)
	tests := []struct {
		name string
		seq  Sequence
		want string
	}{
		{"empty prompt", Sequence{Completion: []int32{1}}, "empty prompt"},
		{"id range", Sequence{Prompt: []int32{1}, Completion: []int32{11}}, "completion token 0 is id 11"},
		{"negative", Sequence{Prompt: []int32{-1}}, "prompt token 0 is id -1"},
		{"temperature", Sequence{Prompt: []int32{1}, Temperature: -1}, "temperature -1"},
		{"dense routing", Sequence{Prompt: []int32{1}, Routing: [][][]int16{{{0}}}}, "dense model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Logprobs([]Sequence{tc.seq})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLogprobsNormalised checks that the logprobs of every vocabulary entry
// at one position sum to 1 at several temperatures.
func TestLogprobsNormalised(t *testing.T) {
	c := tinyMoE(false)
	m := mustNew(t, c, 6)
	for _, temp := range []float64{0.5, 1, 2} {
		var seqs []Sequence
		for v := 0; v < c.VocabSize; v++ {
			seqs = append(seqs, Sequence{Prompt: []int32{3, 1}, Completion: []int32{int32(v)}, Temperature: temp})
		}
		r, err := m.Logprobs(seqs)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, x := range r {
			sum += math.Exp(float64(x.Logprobs[0]))
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("temperature %g: probabilities sum to %v", temp, sum)
		}
	}
}

// TestAdamW checks one tensor's update against the AdamW formulas written
// out in float64, with clipping active, and that training lowers the loss.
func TestAdamW(t *testing.T) {
	c := tinyDense(false)
	m := mustNew(t, c, 7)
	cfg := AdamWConfig{LR: 0.01, WeightDecay: 0.1, MaxGradNorm: 0.5}
	opt, err := NewAdamW(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	seqs, _ := testSeqs(c, c.VocabSize, 8)
	ws := make([][]float32, len(seqs))
	for i, s := range seqs {
		for range s.Completion {
			ws[i] = append(ws[i], -1) // minimise -sum logprob: maximum likelihood
		}
	}
	w0 := append([]float32(nil), m.p.layers[0].q.data...)
	n0 := append([]float32(nil), m.p.norm.data...)
	var mRef, vRef [2]float64 // element 0 of q and of the final norm
	var first, last float64
	for step := 1; step <= 30; step++ {
		g := m.NewGrads()
		res, err := m.Backward(seqs, ws, g)
		if err != nil {
			t.Fatal(err)
		}
		var L float64
		for i := range res {
			for _, lp := range res[i].Logprobs {
				L -= float64(lp)
			}
		}
		if step == 1 {
			first = L
		}
		last = L
		norm := g.Norm()
		scale := math.Min(1, cfg.MaxGradNorm/(norm+1e-6))
		gq, gn := float64(g.p.layers[0].q.data[0])*scale, float64(g.p.norm.data[0])*scale
		wq, wn := float64(m.p.layers[0].q.data[0]), float64(m.p.norm.data[0])
		got, err := opt.Step(m, g, 0)
		if err != nil || math.Abs(got-norm) > 1e-9 {
			t.Fatalf("Step returned %v, %v; norm %v", got, err, norm)
		}
		upd := func(i int, w, gr, decay float64) float64 {
			mRef[i] = 0.9*mRef[i] + 0.1*gr
			vRef[i] = 0.999*vRef[i] + 0.001*gr*gr
			mh := mRef[i] / (1 - math.Pow(0.9, float64(step)))
			vh := vRef[i] / (1 - math.Pow(0.999, float64(step)))
			return w*(1-cfg.LR*decay) - cfg.LR*mh/(math.Sqrt(vh)+1e-8)
		}
		if want := upd(0, wq, gq, cfg.WeightDecay); math.Abs(want-float64(m.p.layers[0].q.data[0])) > 1e-5 {
			t.Fatalf("step %d: q[0] = %v, want %v", step, m.p.layers[0].q.data[0], want)
		}
		if want := upd(1, wn, gn, 0); math.Abs(want-float64(m.p.norm.data[0])) > 1e-5 {
			t.Fatalf("step %d: norm[0] = %v, want %v (norm weights are not decayed)", step, m.p.norm.data[0], want)
		}
	}
	if !(last < first*0.7) {
		t.Fatalf("30 AdamW steps took the loss from %v to %v", first, last)
	}
	if w0[0] == m.p.layers[0].q.data[0] || n0[0] == m.p.norm.data[0] {
		t.Fatal("weights did not move")
	}
}

func TestConfigJSONKeepsExtra(t *testing.T) {
	c, err := LoadConfig("testdata/tiny_moe.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c)
	c2, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c2) != fmt.Sprint(c) {
		t.Fatalf("round trip changed the config:\n%+v\n%+v", c, c2)
	}
}

// TestLoadSharded splits a saved checkpoint into two shards with an index,
// as HF does for large models, and loads it.
func TestLoadSharded(t *testing.T) {
	c := tinyMoE(false)
	m := mustNew(t, c, 9)
	dir := t.TempDir()
	if err := m.Save(dir, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "model.safetensors"))
	var a, b []safetensors.Tensor
	wm := map[string]string{}
	for i, pt := range m.p.all {
		ts := safetensors.Tensor{Name: pt.name, Shape: pt.shape, Data: pt.data}
		if i%2 == 0 {
			a, wm[pt.name] = append(a, ts), "model-00001-of-00002.safetensors"
		} else {
			b, wm[pt.name] = append(b, ts), "model-00002-of-00002.safetensors"
		}
	}
	safetensors.WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), a, safetensors.F32, nil)
	safetensors.WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), b, safetensors.BF16, nil)
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": wm})
	os.WriteFile(filepath.Join(dir, safetensors.IndexFile), idx, 0o644)
	m2, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m2.p.all[0].data[5], m.p.all[0].data[5]; got != want {
		t.Fatalf("shard 1 (F32) value %v, want %v", got, want)
	}
	if got, want := m2.p.all[1].data[3], m.p.all[1].data[3]; math.Abs(float64(got-want)) > 1e-2*math.Abs(float64(want)) {
		t.Fatalf("shard 2 (BF16) value %v, want about %v", got, want)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"tiny.json", "tiny_moe.json"} {
		b, _ := os.ReadFile(filepath.Join("testdata", name))
		f.Add(b)
	}
	f.Add([]byte(`{"num_hidden_layers":-1,"mlp_only_layers":[-5]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if c.Validate() != nil || c.MoELayers() > c.NumHiddenLayers {
			t.Fatalf("accepted config fails its own checks: %+v", c)
		}
	})
}

// TestAdamWResume saves the optimizer state mid-training and checks that a
// fresh optimizer loaded from it takes exactly the same next step.
func TestAdamWResume(t *testing.T) {
	c := tinyDense(true)
	m := mustNew(t, c, 70)
	cfg := AdamWConfig{LR: 0.01, WeightDecay: 0.1, MaxGradNorm: 1}
	opt, _ := NewAdamW(m, cfg)
	seqs, ws := testSeqs(c, c.VocabSize, 71)
	step := func(m *Model, o *AdamW) {
		g := m.NewGrads()
		if _, err := m.Backward(seqs, ws, g); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Step(m, g, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		step(m, opt)
	}
	dir := t.TempDir()
	if err := m.Save(dir, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "optimizer.safetensors")
	if err := opt.SaveState(state); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	opt2, _ := NewAdamW(m2, cfg)
	if err := opt2.LoadState(state); err != nil {
		t.Fatal(err)
	}
	if opt2.Steps() != 3 {
		t.Fatalf("resumed at step %d", opt2.Steps())
	}
	step(m, opt)
	step(m2, opt2)
	for i, v := range m.p.flat {
		if m2.p.flat[i] != v {
			t.Fatalf("parameter %d: %v after resume, %v without", i, m2.p.flat[i], v)
		}
	}
	other, _ := NewAdamW(mustNew(t, tinyMoE(true), 1), cfg)
	if err := other.LoadState(state); err == nil || !strings.Contains(err.Error(), `"exp_avg" has shape`) {
		t.Fatalf("loading another model's state: %v", err)
	}
}

// TestLoadVerifies damages a sealed checkpoint (one whose lineage.json
// records each file's sha256) in the three ways a disk or a killed copy
// does, and wants Load to refuse it naming the file.
func TestLoadVerifies(t *testing.T) {
	m := mustNew(t, tinyDense(false), 2)
	for _, tc := range []struct {
		name, file string
		damage     func(path string) error
		want       string
	}{
		{"intact", "", nil, ""},
		{"flipped byte", "model.safetensors", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)-5] ^= 0x10 // a weight's low mantissa bit: the tensors still parse
			return os.WriteFile(p, b, 0o644)
		}, "has sha256"},
		{"truncated file", "model.safetensors", func(p string) error { return os.Truncate(p, 100) }, "has sha256"},
		{"missing file", "config.json", os.Remove, "is missing (lineage.json lists it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := m.Save(dir, SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			seal(t, dir)
			if tc.damage != nil {
				if err := tc.damage(filepath.Join(dir, tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, checkpoint.ErrDamaged) || !errors.Is(err, ErrCheckpoint) ||
				!strings.Contains(err.Error(), filepath.Join(dir, tc.file)+" "+tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Load: %v; want one line wrapping ErrDamaged naming %s", err, tc.file)
			}
		})
	}
}

// seal writes dir/lineage.json recording the sha256 of every file in dir.
func seal(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := checkpoint.Header{Format: checkpoint.Format, Version: 1, Files: map[string]string{}}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		h.Files[e.Name()] = hex.EncodeToString(sum[:])
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
