//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/legorl/legorl/policy/model"
)

// Tolerances of the model-level tests, CUDA against the CPU backend on the
// tiny configs (policy/model/testdata), per precision:
//
//   - logprobs: the largest absolute difference of a completion token's
//     logprob (nats). fp32 1e-4: a few float32 ulps of the logits carried
//     through 4 layers and a 4096-way log-softmax. bf16 2e-2: every
//     product rounds its inputs to 8 bits.
//   - gradients: ||g_cuda - g_cpu|| / ||g_cpu|| over all parameters
//     (measured by accumulating the CPU gradient and the negated CUDA
//     gradient into one Grads). fp32 1e-4, bf16 5e-2.
var modelTol = map[string]struct{ logprob, grad float64 }{
	"fp32": {1e-4, 1e-4},
	"bf16": {2e-2, 5e-2},
}

func loadConfig(t testing.TB, name string) model.Config {
	t.Helper()
	c, err := model.LoadConfig(filepath.Join("..", "..", "model", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// batch returns n random sequences of promptLen + complLen tokens and
// their loss weights.
func batch(c model.Config, seed uint64, n, promptLen, complLen int) ([]model.Sequence, [][]float32) {
	r := rand.New(rand.NewPCG(seed, 99))
	seqs := make([]model.Sequence, n)
	ws := make([][]float32, n)
	for i := range seqs {
		for range promptLen {
			seqs[i].Prompt = append(seqs[i].Prompt, int32(r.IntN(c.VocabSize)))
		}
		for range complLen + i { // lengths differ across the batch
			seqs[i].Completion = append(seqs[i].Completion, int32(r.IntN(c.VocabSize)))
			ws[i] = append(ws[i], (2*r.Float32()-1)/float32(complLen))
		}
		if i%2 == 1 {
			seqs[i].Temperature = 0.8
		}
	}
	return seqs, ws
}

func negate(ws [][]float32) [][]float32 {
	out := make([][]float32, len(ws))
	for i, w := range ws {
		out[i] = make([]float32, len(w))
		for j, v := range w {
			out[i][j] = -v
		}
	}
	return out
}

// maxLogprobDiff returns the largest |a - b| over the logprobs of two
// result sets.
func maxLogprobDiff(t testing.TB, a, b []model.Result) float64 {
	t.Helper()
	worst := 0.0
	for i := range a {
		if len(a[i].Logprobs) != len(b[i].Logprobs) {
			t.Fatalf("sequence %d: %d logprobs vs %d", i, len(a[i].Logprobs), len(b[i].Logprobs))
		}
		for j := range a[i].Logprobs {
			d := math.Abs(float64(a[i].Logprobs[j]) - float64(b[i].Logprobs[j]))
			if math.IsNaN(d) {
				return math.Inf(1)
			}
			worst = max(worst, d)
		}
	}
	return worst
}

// routingAgreement returns the fraction of (token, MoE layer) expert sets
// that agree.
func routingAgreement(a, b []model.Result) float64 {
	same, all := 0, 0
	for i := range a {
		for t := range a[i].Routing {
			for l := range a[i].Routing[t] {
				all++
				if reflect.DeepEqual(a[i].Routing[t][l], b[i].Routing[t][l]) {
					same++
				}
			}
		}
	}
	if all == 0 {
		return 1
	}
	return float64(same) / float64(all)
}

// TestModel runs the tiny dense and MoE models on the CPU and on CUDA and
// compares logprobs, gradients, the MoE routing (and its replay), the
// KV-cache path (Attention with Pos0 > 0), the batched inference step
// (RowLinear) and one AdamW update.
func TestModel(t *testing.T) {
	for _, cfgName := range []string{"tiny.json", "tiny_moe.json"} {
		for _, prec := range []string{"fp32", "bf16"} {
			t.Run(fmt.Sprintf("%s/%s", cfgName, prec), func(t *testing.T) {
				testModel(t, loadConfig(t, cfgName), prec)
			})
		}
	}
}

func testModel(t *testing.T, c model.Config, prec string) {
	tol := modelTol[prec]
	b := openT(t, prec)
	cpuM, err := model.New(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	gpuM, err := model.New(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	gpuM.SetBackend(b)
	seqs, ws := batch(c, 1, 4, 24, 40)

	// Forward: logprobs and routing.
	want, err := cpuM.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gpuM.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	moe := c.NumExperts > 0
	// In bf16 the router's logits move by bfloat16 roundings, enough to
	// flip near ties of its top-k; the MoE model is compared with replayed
	// routing then.
	exact := !moe || prec == "fp32"
	d := maxLogprobDiff(t, got, want)
	switch {
	case !exact:
		t.Logf("logprobs without replay: max difference %.3g (not checked: bf16 MoE routing may differ)", d)
	case d > tol.logprob:
		t.Errorf("logprobs: max difference %.3g > %.3g", d, tol.logprob)
	default:
		t.Logf("logprobs: max difference %.3g (tolerance %.3g)", d, tol.logprob)
	}
	if moe {
		agree := routingAgreement(got, want)
		t.Logf("routing without replay: %.4f of the expert sets agree", agree)
		if exact && agree < 0.99 {
			t.Errorf("routing without replay: only %.4f of the expert sets agree with the CPU", agree)
		}
		// Replay the CPU's routing on the GPU: the same experts, and the
		// logprobs of the CPU pass.
		replay := make([]model.Sequence, len(seqs))
		for i, s := range seqs {
			s.Routing = want[i].Routing
			replay[i] = s
		}
		rep, err := gpuM.Logprobs(replay)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rep {
			if !reflect.DeepEqual(rep[i].Routing, want[i].Routing) {
				t.Fatalf("sequence %d: the replayed routing is not the CPU's", i)
			}
		}
		if d := maxLogprobDiff(t, rep, want); d > tol.logprob {
			t.Errorf("logprobs with replayed routing: max difference %.3g > %.3g", d, tol.logprob)
		} else {
			t.Logf("logprobs with replayed routing: max difference %.3g (tolerance %.3g)", d, tol.logprob)
		}
		seqs = replay // the backward pass below replays too
	}

	// Backward: g = g_cpu - g_cuda (the loss is linear in the weights).
	gCPU := cpuM.NewGrads()
	if _, err := cpuM.Backward(seqs, ws, gCPU); err != nil {
		t.Fatal(err)
	}
	norm := gCPU.Norm()
	gGPU := gpuM.NewGrads()
	resGPU, err := gpuM.Backward(seqs, ws, gGPU)
	if err != nil {
		t.Fatal(err)
	}
	if moe {
		for i := range resGPU {
			if !reflect.DeepEqual(resGPU[i].Routing, seqs[i].Routing) {
				t.Fatalf("sequence %d: Backward did not replay the routing", i)
			}
		}
	}
	diff := gpuM.NewGrads()
	if _, err := cpuM.Backward(seqs, ws, diff); err != nil {
		t.Fatal(err)
	}
	if _, err := gpuM.Backward(seqs, negate(ws), diff); err != nil {
		t.Fatal(err)
	}
	rel := diff.Norm() / norm
	t.Logf("gradients: norm cpu %.6g cuda %.6g, ||cuda-cpu||/||cpu|| = %.3g (tolerance %.3g)", norm, gGPU.Norm(), rel, tol.grad)
	if !(rel <= tol.grad) {
		t.Errorf("gradients: relative difference %.3g > %.3g", rel, tol.grad)
	}

	// KV cache: a prefill, then an extension at Pos0 > 0.
	ids := append(append([]int32{}, seqs[0].Prompt...), seqs[0].Completion...)
	var lw, lg []float32
	var r1, r2 [][][]int16 // MoE: replay the CPU's routing
	if moe {
		r1, r2 = want[0].Routing[:20], want[0].Routing[20:30]
	}
	for _, m := range []*model.Model{cpuM, gpuM} {
		cache := m.NewCache()
		if _, _, err := cache.Extend(ids[:20], r1); err != nil {
			t.Fatal(err)
		}
		logits, _, err := cache.Extend(ids[20:30], r2)
		if err != nil {
			t.Fatal(err)
		}
		if m == cpuM {
			lw = logits
		} else {
			lg = logits
		}
	}
	near(t, "cache logits", lg, lw, tol.logprob)

	// Step: the batched inference path (RowLinear, SwiGLU; AttendRows on
	// the host).
	var sw, sg []model.StepOutput
	for _, m := range []*model.Model{cpuM, gpuM} {
		in := []model.StepInput{{Cache: m.NewCache(), IDs: seqs[1].Prompt}, {Cache: m.NewCache(), IDs: seqs[2].Prompt[:5]}}
		out, err := m.Step(in)
		if err != nil {
			t.Fatal(err)
		}
		if m == cpuM {
			sw = out
		} else {
			sg = out
		}
	}
	for i := range sw {
		if !reflect.DeepEqual(sg[i].Routing, sw[i].Routing) { // a near tie of the router
			t.Logf("step %d: the routing differs from the CPU's; logits not compared", i)
			continue
		}
		near(t, fmt.Sprintf("step %d logits", i), sg[i].Logits, sw[i].Logits, tol.logprob)
	}

	// One AdamW update of each model with the same (CPU) gradient, on its
	// backend (clipped: the step rescales g on the backend), then compare
	// the models' logprobs on the CPU.
	gs := []*model.Grads{cpuM.NewGrads(), cpuM.NewGrads()}
	for _, g := range gs {
		if _, err := cpuM.Backward(seqs, ws, g); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range []*model.Model{cpuM, gpuM} {
		g := gs[i]
		opt, err := model.NewAdamW(m, model.AdamWConfig{LR: 1e-3, WeightDecay: 0.1, MaxGradNorm: norm / 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(m, g, 0); err != nil {
			t.Fatal(err)
		}
	}
	gpuM.SetBackend(nil)
	after, err := gpuM.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	afterCPU, err := cpuM.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxLogprobDiff(t, after, afterCPU); d > tol.logprob {
		t.Errorf("logprobs after one AdamW step on each backend: max difference %.3g > %.3g", d, tol.logprob)
	} else {
		t.Logf("logprobs after one AdamW step: max difference %.3g", d)
	}
	checkErr(t, b)
}
