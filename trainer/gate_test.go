package trainer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/trainer"
)

// perturb adds noise of the given size to the rollout logprobs of the
// sampled tokens of samples[i] for each i in which (staying <= 0).
func perturb(samples []trainer.Sample, size float64, seed uint64, which ...int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, i := range which {
		s := &samples[i]
		lps := append([]float32(nil), s.Logprobs...)
		for t, m := range s.Mask {
			if m == 1 {
				lps[t] = -float32(math.Abs(float64(lps[t]) + rng.NormFloat64()*size))
			}
		}
		s.Logprobs = lps
	}
}

func gateData(t *testing.T, moe bool) (*model.Model, []trainer.Sample) {
	m := tinyModel(t, moe, 3)
	it := makeIteration(t, m, "gate", 0, 5, smallShape, groups([]float64{1, 0, 0, 1}, []float64{0, 1, 1, 1}), 11)
	return m, it.samples()
}

func TestGateSameModelPasses(t *testing.T) {
	for _, moe := range []bool{false, true} {
		t.Run(map[bool]string{false: "dense", true: "moe"}[moe], func(t *testing.T) {
			m, samples := gateData(t, moe)
			rec, err := trainer.Recompute(m, samples, 40, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, keep, err := trainer.Check(samples, rec, 5, trainer.Config{})
			if err != nil {
				t.Fatal(err)
			}
			o := r.Overall
			if !r.Passed || !(o.Pearson >= 0.99) || o.MaxAbsDiff > 1e-6 || o.KL > 1e-9 || !(o.Spearman >= 0.99) {
				t.Errorf("logprobs of the same model at the same temperature: %s", r.Summary())
			}
			if want := 8 * 10; o.Tokens != want { // 8 segments x 2 turns of 5 sampled tokens
				t.Errorf("%d tokens compared, want %d", o.Tokens, want)
			}
			if len(r.PerRollout) != 8 || r.StaleTokens != 0 || len(r.Masked) != 0 {
				t.Errorf("per rollout %d, stale %d, masked %d", len(r.PerRollout), r.StaleTokens, len(r.Masked))
			}
			for i, k := range keep {
				if !k {
					t.Errorf("sample %d dropped", i)
				}
			}
		})
	}
}

func TestGatePerturbedFails(t *testing.T) {
	m, samples := gateData(t, false)
	rec, err := trainer.Recompute(m, samples, 1000, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	perturb(samples, 0.3, 1, 0, 1, 2, 3, 4, 5, 6, 7)
	r, _, err := trainer.Check(samples, rec, 5, trainer.Config{})
	var ge *trainer.GateError
	if !errors.Is(err, trainer.ErrGate) || !errors.As(err, &ge) || ge.Report != r {
		t.Fatalf("err %v, want a GateError with the report", err)
	}
	if r.Passed || r.Overall.Pearson >= 0.99 || r.Overall.MaxAbsDiff < 0.05 {
		t.Errorf("perturbed logprobs passed: %s", r.Summary())
	}
	msg := err.Error()
	for _, want := range []string{"FAILED", "pearson", "< 0.99", "max |diff|", "at rollout gate-i0-r", "largest KL", "routing replay on"} {
		if !strings.Contains(msg, want) {
			t.Errorf("report %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("report is not one line: %q", msg)
	}
}

func TestGateMaskModeDropsOffendingSegments(t *testing.T) {
	m, samples := gateData(t, false)
	rec, err := trainer.Recompute(m, samples, 1000, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	perturb(samples, 0.5, 2, 2, 5)
	if _, _, err := trainer.Check(samples, rec, 5, trainer.Config{}); !errors.Is(err, trainer.ErrGate) {
		t.Fatalf("abort mode: err %v, want ErrGate", err)
	}
	r, keep, err := trainer.Check(samples, rec, 5, trainer.Config{GateMode: trainer.GateMask})
	if err != nil {
		t.Fatalf("mask mode: %v", err)
	}
	for i, k := range keep {
		if k != (i != 2 && i != 5) {
			t.Errorf("sample %d kept %v", i, k)
		}
	}
	if len(r.Masked) != 2 || r.Masked[0].RolloutID != samples[2].RolloutID || r.Masked[1].RolloutID != samples[5].RolloutID {
		t.Errorf("masked %+v, want samples 2 and 5", r.Masked)
	}
	if r.Before == nil || r.Before.Pearson >= 0.99 || r.Overall.Pearson < 0.99 || r.Overall.Tokens != 60 {
		t.Errorf("before/after: %s", r.Summary())
	}
	// Every segment bad: masking cannot save the update.
	perturb(samples, 0.5, 3, 0, 1, 3, 4, 6, 7)
	if r, _, err := trainer.Check(samples, rec, 5, trainer.Config{GateMode: trainer.GateMask}); !errors.Is(err, trainer.ErrGate) || r.Passed {
		t.Errorf("every segment perturbed, mask mode: err %v", err)
	}
}

func TestGateSkipsTokensOfOtherVersions(t *testing.T) {
	m, samples := gateData(t, false)
	rec, err := trainer.Recompute(m, samples, 1000, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Sample 3 was sampled by version 4 (before a hot swap): its logprobs
	// come from other weights and are not compared.
	perturb(samples, 0.5, 4, 3)
	s := &samples[3]
	s.Versions = append([]int64(nil), s.Versions...)
	for i, m := range s.Mask {
		if m == 1 {
			s.Versions[i] = 4
		}
	}
	r, _, err := trainer.Check(samples, rec, 5, trainer.Config{})
	if err != nil || r.StaleTokens != 10 || r.Overall.Tokens != 70 {
		t.Errorf("err %v, stale %d, compared %d; want nil, 10, 70", err, r.StaleTokens, r.Overall.Tokens)
	}
	if !strings.Contains(r.Summary(), "10 tokens of other policy versions not compared") {
		t.Errorf("summary %q", r.Summary())
	}
	// Checked against version 6: nothing to compare is an error, not a pass.
	_, _, err = trainer.Check(samples, rec, 6, trainer.Config{})
	if !errors.Is(err, trainer.ErrData) || !strings.Contains(err.Error(), "policy version 6") || !strings.Contains(err.Error(), "v5: 70 tokens") {
		t.Errorf("err %v, want ErrData naming the versions", err)
	}
}

// An MoE engine may route a token to other experts than the trainer would
// (numerics differ): replaying the recorded routes makes the recomputed
// logprobs match; without replay they differ, and the report says so.
func TestGateRoutingReplay(t *testing.T) {
	m := tinyModel(t, true, 3)
	it := makeIteration(t, m, "moe", 0, 5, smallShape, groups([]float64{1, 0}, []float64{0, 1}), 12)
	E := m.Config().NumExperts
	var seqs []model.Sequence
	for i := range it.segments {
		s := &it.segments[i]
		r, err := s.Routes()
		if err != nil {
			t.Fatal(err)
		}
		// The engine took the two other experts for every odd token.
		routing := make([][][]int16, r.Tokens)
		for tok := range routing {
			ids := r.At(tok, 0)
			if tok%2 == 1 {
				var other []int16
				for e := int16(0); int(e) < E; e++ {
					if e != ids[0] && e != ids[1] {
						other = append(other, e)
					}
				}
				copy(ids, other)
			}
			routing[tok] = [][]int16{ids}
		}
		seqs = append(seqs, model.Sequence{Prompt: s.PromptTokenIDs, Completion: s.CompletionTokenIDs, Routing: routing, Temperature: float64(s.Temperature)})
	}
	res, err := m.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range it.segments {
		for j, mk := range it.segments[i].LossMask {
			if mk == 1 {
				it.segments[i].Logprobs[j] = res[i].Logprobs[j]
			}
		}
	}
	samples := it.samples()
	var diff [2]float64
	for k, replay := range []bool{true, false} {
		rec, err := trainer.Recompute(m, samples, 1000, replay, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, _, _ := trainer.Check(samples, rec, 5, trainer.Config{NoReplay: !replay, MinPearson: -1})
		diff[k] = r.Overall.MaxAbsDiff
		if r.Replay != replay || !strings.Contains(r.Summary(), map[bool]string{true: "replay on", false: "replay off"}[replay]) {
			t.Errorf("replay %v: report %s", replay, r.Summary())
		}
	}
	if diff[0] > 1e-6 || diff[1] < 1e-5 {
		t.Errorf("max |diff| with replay %g (want ~0), without %g (want > 1e-5)", diff[0], diff[1])
	}
	// A segment of an MoE model without routes cannot be replayed.
	samples[1].Routes.Experts = nil
	samples[1].Routes.Layers, samples[1].Routes.K = 0, 0
	if _, err := trainer.Recompute(m, samples, 1000, true, nil); !errors.Is(err, trainer.ErrData) || !strings.Contains(err.Error(), samples[1].Source) {
		t.Errorf("err %v, want ErrData naming %s", err, samples[1].Source)
	}
}

// TestGatePaddedVocabulary samples segments with the engine from a
// checkpoint whose vocab_size (64, initialised at random) pads past its
// tokenizer (40 ids), loads the checkpoint as the trainer does (model.Load:
// the model's support is the tokenizer's size) and requires the
// train-inference check to pass as tightly as for any engine-sampled
// data: the engine's logprobs and the trainer's recompute are over the
// same support. The same tokens scored over the whole vocabulary (the
// checkpoint without its tokenizer) differ by far more, so the test can
// fail.
func TestGatePaddedVocabulary(t *testing.T) {
	const support = 40
	for _, moe := range []bool{false, true} {
		t.Run(map[bool]string{false: "dense", true: "moe"}[moe], func(t *testing.T) {
			dir, bare := t.TempDir(), t.TempDir()
			tok := filepath.Join(t.TempDir(), "tokenizer.json")
			os.WriteFile(tok, []byte(fmt.Sprintf(`{"model":{"vocab":{"a":%d}}}`, support-1)), 0o644)
			m := tinyModel(t, moe, 3)
			if err := m.Save(dir, model.SaveOptions{TokenizerFiles: []string{tok}}); err != nil {
				t.Fatal(err)
			}
			if err := m.Save(bare, model.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			loaded, err := model.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if loaded.Support() != support {
				t.Fatalf("Support() = %d, want the tokenizer's %d", loaded.Support(), support)
			}
			samples := engineSamples(t, loaded, 8, 5)

			rec, err := trainer.Recompute(loaded, samples, 1000, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, _, err := trainer.Check(samples, rec, 5, trainer.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if o := r.Overall; !r.Passed || !(o.Pearson >= 0.999) || o.MaxAbsDiff > 1e-4 || o.Tokens != 8*12 {
				t.Errorf("engine vs trainer over the same support: %s", r.Summary())
			}
			t.Logf("padded vocabulary (%d of %d ids): %s", support, m.Config().VocabSize, r.Summary())

			whole, err := model.Load(bare)
			if err != nil {
				t.Fatal(err)
			}
			rec, err = trainer.Recompute(whole, samples, 1000, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, _, _ = trainer.Check(samples, rec, 5, trainer.Config{MinPearson: -1})
			if r.Overall.MaxAbsDiff < 0.1 {
				t.Errorf("scored over the whole vocabulary, max |diff| is only %g: %s", r.Overall.MaxAbsDiff, r.Summary())
			}
			t.Logf("the same tokens scored over all %d ids: %s", m.Config().VocabSize, r.Summary())

			// An update on them: two groups of four with varying rewards.
			data := &trainer.Data{RunID: "pad", Samples: samples, Masked: map[string]int{}}
			for i := range samples {
				samples[i].GroupID = fmt.Sprintf("g%d", i/4)
				data.Rollouts = append(data.Rollouts, trainer.RolloutReward{RolloutID: samples[i].RolloutID, GroupID: samples[i].GroupID, Reward: float64(i % 2)})
			}
			before := weights(t, loaded)
			res, err := newTrainer(t, loaded, trainer.Config{LR: 1e-3}).Iteration(data, 5, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Trained != 8 || len(res.Steps) != 1 || !(res.Steps[0].GradNorm > 0) || bytes.Equal(before, weights(t, loaded)) {
				t.Errorf("update on the padded model's samples: %d trained, %d steps, weights changed %v", res.Trained, len(res.Steps), !bytes.Equal(before, weights(t, loaded)))
			}
		})
	}
}

// engineSamples generates n segments of 12 sampled tokens with the local
// engine from m (policy version `version`), half at temperature 0.7, and
// returns them as the trainer reads them.
func engineSamples(t *testing.T, m *model.Model, n int, version int64) []trainer.Sample {
	t.Helper()
	e := engine.New(m, version, engine.Options{})
	defer e.Close()
	rng := rand.New(rand.NewPCG(9, 9))
	var out []trainer.Sample
	for i := range n {
		prompt := make([]int32, 6)
		for j := range prompt {
			prompt[j] = int32(rng.IntN(m.Support()))
		}
		s := engine.DefaultSampling(uint64(i))
		if i%2 == 1 {
			s.Temperature = 0.7
		}
		g, err := e.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 12, Sampling: s}, nil)
		if err != nil {
			t.Fatal(err)
		}
		seg := schemas.Segment{RunID: "pad", RolloutID: fmt.Sprintf("pad-r%d", i), PromptTokenIDs: prompt,
			CompletionTokenIDs: g.Tokens, Logprobs: g.Logprobs, PolicyVersions: g.Versions,
			LossMask: make([]int8, len(g.Tokens)), PolicyVersion: version, FinishReason: g.Finish, Temperature: float32(s.Temperature), TopP: 1}
		for j := range seg.LossMask {
			seg.LossMask[j] = 1
		}
		if g.Routing != nil {
			if err := seg.SetRoutes(append(g.PromptRouting, g.Routing...)); err != nil {
				t.Fatal(err)
			}
		}
		routes, err := seg.Routes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, trainer.Sample{RolloutID: seg.RolloutID, GroupID: "g", Prompt: prompt, Completion: g.Tokens,
			Mask: seg.LossMask, Logprobs: g.Logprobs, Versions: g.Versions, Routes: routes, Temperature: s.Temperature,
			Source: fmt.Sprintf("engine sample %d", i)})
	}
	return out
}
