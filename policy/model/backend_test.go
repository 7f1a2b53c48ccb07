package model

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/legorl/legorl/policy/backend"
)

// recorder is a backend that counts the operations the model calls and can
// fail like a device: after fail is set, Err reports it.
type recorder struct {
	*backend.CPU
	mu    sync.Mutex
	calls map[string]int
	fail  error
}

func newRecorder() *recorder { return &recorder{CPU: backend.NewCPU(), calls: map[string]int{}} }

func (r *recorder) note(op string) {
	r.mu.Lock()
	r.calls[op]++
	r.mu.Unlock()
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Err() error   { return r.fail }

func (r *recorder) Gemm(ta, tb bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.note("Gemm")
	r.CPU.Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
func (r *recorder) RowLinear(y, x []float32, rows, in int, w []float32, out int) {
	r.note("RowLinear")
	r.CPU.RowLinear(y, x, rows, in, w, out)
}
func (r *recorder) RMSNorm(y, rr, x []float32, rows, n int, w []float32, eps float64) {
	r.note("RMSNorm")
	r.CPU.RMSNorm(y, rr, x, rows, n, w, eps)
}
func (r *recorder) RMSNormBack(dx, dw, dy, x []float32, rows, n int, w, rr []float32) {
	r.note("RMSNormBack")
	r.CPU.RMSNormBack(dx, dw, dy, x, rows, n, w, rr)
}
func (r *recorder) SwiGLU(act, g, u []float32) { r.note("SwiGLU"); r.CPU.SwiGLU(act, g, u) }
func (r *recorder) SwiGLUBack(dg, du, dact, g, u []float32) {
	r.note("SwiGLUBack")
	r.CPU.SwiGLUBack(dg, du, dact, g, u)
}
func (r *recorder) Attention(out, probs, q, k, v []float32, a backend.AttnShape) {
	r.note("Attention")
	r.CPU.Attention(out, probs, q, k, v, a)
}
func (r *recorder) AttendRows(out, q []float32, ld, nq int, k, v []float32, ldkv, first, hd int) {
	r.note("AttendRows")
	r.CPU.AttendRows(out, q, ld, nq, k, v, ldkv, first, hd)
}
func (r *recorder) AttentionBack(dq, dk, dv, dout, q, k, v, probs []float32, a backend.AttnShape) {
	r.note("AttentionBack")
	r.CPU.AttentionBack(dq, dk, dv, dout, q, k, v, probs, a)
}
func (r *recorder) Logprobs(lp, logits []float32, vocab int, targets []int32, invTemp float64, keep bool) {
	r.note("Logprobs")
	r.CPU.Logprobs(lp, logits, vocab, targets, invTemp, keep)
}
func (r *recorder) LogprobsBack(probs []float32, vocab int, targets []int32, w []float32, temp float64) {
	r.note("LogprobsBack")
	r.CPU.LogprobsBack(probs, vocab, targets, w, temp)
}
func (r *recorder) AdamW(p, g, m, v []float32, s backend.AdamWStep) {
	r.note("AdamW")
	r.CPU.AdamW(p, g, m, v, s)
}

// TestModelRunsOnItsBackend checks that every operation of the backend
// interface is reached through the model's public methods (so a device
// backend is exercised by them), that results do not change when the model
// moves between backends, and that a backend's sticky error surfaces from
// each method with the caches left as they were.
func TestModelRunsOnItsBackend(t *testing.T) {
	c := tinyMoE(true) // dense and MoE layers
	m := &Model{cfg: c, p: randomParams[float32](c, 5), be: backend.NewCPU(), support: c.VocabSize}
	seqs := []Sequence{{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5}, Temperature: 0.7}}
	want, err := m.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	m.SetBackend(rec)
	got, err := m.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range want[0].Logprobs {
		if got[0].Logprobs[i] != v {
			t.Fatalf("logprob %d: %v on the recorder, %v on the CPU", i, got[0].Logprobs[i], v)
		}
	}
	g := m.NewGrads()
	if _, err := m.Backward(seqs, [][]float32{{1, -1}}, g); err != nil {
		t.Fatal(err)
	}
	opt, err := NewAdamW(m, AdamWConfig{LR: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opt.Step(m, g, 0); err != nil {
		t.Fatal(err)
	}
	cache := m.NewCache()
	if _, _, err := cache.Extend([]int32{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step([]StepInput{{Cache: cache, IDs: []int32{3}}}); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"Gemm", "RowLinear", "RMSNorm", "RMSNormBack", "SwiGLU", "SwiGLUBack",
		"Attention", "AttendRows", "AttentionBack", "Logprobs", "LogprobsBack", "AdamW"} {
		if rec.calls[op] == 0 {
			t.Errorf("the model never called %s on its backend", op)
		}
	}

	rec.fail = errors.New("device lost")
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "backend recorder: device lost") {
			t.Errorf("%s: err = %v, want the backend's error", what, err)
		}
	}
	_, err = m.Logprobs(seqs)
	check("Logprobs", err)
	_, err = m.Backward(seqs, [][]float32{{1, -1}}, g)
	check("Backward", err)
	_, err = opt.Step(m, g, 0)
	check("AdamW.Step", err)
	_, _, err = cache.Extend([]int32{4}, nil)
	check("Extend", err)
	if cache.Len() != 3 || len(cache.kv.k[0]) != 3*c.NumKeyValueHeads*c.HeadDim {
		t.Errorf("a failed Extend left the cache at %d positions, %d key floats", cache.Len(), len(cache.kv.k[0]))
	}
	_, err = m.Step([]StepInput{{Cache: cache, IDs: []int32{4, 5}}})
	check("Step", err)
	if cache.Len() != 3 || len(cache.kv.k[0]) != 3*c.NumKeyValueHeads*c.HeadDim {
		t.Errorf("a failed Step left the cache at %d positions, %d key floats", cache.Len(), len(cache.kv.k[0]))
	}
	m.SetBackend(nil)
	if m.Backend().Name() != "cpu" {
		t.Errorf("SetBackend(nil) gave %s", m.Backend().Name())
	}
}
