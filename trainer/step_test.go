package trainer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/trainer"
)

// weights returns the model's safetensors bytes.
func weights(t *testing.T, m *model.Model) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := m.Save(dir, model.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTrainer(t *testing.T, m *model.Model, cfg trainer.Config) *trainer.Trainer {
	t.Helper()
	tr, err := trainer.New(m, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var stepGroups = groups([]float64{1, 0, 0, 1}, []float64{0, 1, 1, 1}, []float64{1, 1})

func TestIterationIsDeterministic(t *testing.T) {
	for _, moe := range []bool{false, true} {
		t.Run(map[bool]string{false: "dense", true: "moe"}[moe], func(t *testing.T) {
			run := func(seed uint64) []byte {
				m := tinyModel(t, moe, 4)
				it := makeIteration(t, m, "det", 0, 0, smallShape, stepGroups, 9)
				cfg := trainer.Config{LR: 1e-3, Steps: 2, Seed: seed, MicroBatchTokens: 50}
				res, err := newTrainer(t, m, cfg).Iteration(it.data(), 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Steps) != 2 || res.Trained != 8 || res.Groups.ZeroVariance != 1 {
					t.Fatalf("%d steps, %d trained, %+v", len(res.Steps), res.Trained, res.Groups)
				}
				return weights(t, m)
			}
			a, b, c := run(7), run(7), run(8)
			if !bytes.Equal(a, b) {
				t.Error("two updates with the same seed and config gave different weights")
			}
			if bytes.Equal(a, c) {
				t.Error("another seed (another split into mini-batches) gave the same weights: the test cannot tell")
			}
		})
	}
}

// Epochs pass over the iteration's data again: Epochs x Steps optimizer
// steps, the first pass bitwise the one-pass update (0 and 1 are the same
// config), and later passes see ratios away from 1, so they move the
// positive-advantage tokens further than one pass does.
func TestIterationEpochs(t *testing.T) {
	run := func(epochs int) (*trainer.IterationResult, []byte, float64) {
		m := tinyModel(t, false, 4)
		it := makeIteration(t, m, "epochs", 0, 0, smallShape, stepGroups, 9)
		cfg := trainer.Config{LR: 3e-3, Steps: 2, Epochs: epochs, Seed: 7, MicroBatchTokens: 50}
		d := it.data()
		res, err := newTrainer(t, m, cfg).Iteration(d, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		pos, _ := meanSampled(t, m, d.Samples)
		return res, weights(t, m), pos
	}
	r0, w0, _ := run(0)
	r1, w1, pos1 := run(1)
	r3, w3, pos3 := run(3)
	if len(r0.Steps) != 2 || len(r1.Steps) != 2 || len(r3.Steps) != 6 {
		t.Fatalf("%d, %d and %d steps for epochs 0, 1 and 3; want 2, 2 and 6", len(r0.Steps), len(r1.Steps), len(r3.Steps))
	}
	if !bytes.Equal(w0, w1) {
		t.Error("epochs 0 and 1 gave different weights")
	}
	if bytes.Equal(w1, w3) {
		t.Error("three passes left the weights of one pass")
	}
	// The first pass's ratios are 1 up to the step before them; the third
	// pass's loss (-mean ratio x advantage) has moved.
	if r3.Steps[4].Stats.Loss == r3.Steps[0].Stats.Loss {
		t.Errorf("third pass's loss %v equals the first's", r3.Steps[4].Stats.Loss)
	}
	if !(pos3 > pos1) {
		t.Errorf("mean logprob of positive-advantage tokens after 3 passes %v, after 1 %v: want higher", pos3, pos1)
	}
	cfg := trainer.Config{LR: 1e-3, Epochs: 65}.WithDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "epochs 65") {
		t.Errorf("epochs 65: error %v, want one naming epochs", err)
	}
	// One pass writes no epochs field, so configs from before it keep
	// their hash; two passes are another config.
	if b, _ := json.Marshal(trainer.Config{LR: 1e-3}.WithDefaults()); strings.Contains(string(b), "epochs") {
		t.Errorf("a one-pass config's canonical JSON names epochs: %s", b)
	}
	if (trainer.Config{LR: 1e-3}).Hash() == (trainer.Config{LR: 1e-3, Epochs: 2}).Hash() {
		t.Error("epochs 2 hashes as one pass")
	}
}

// meanSampled returns the mean recomputed logprob of the sampled tokens of
// the samples with positive and with negative advantage.
func meanSampled(t *testing.T, m *model.Model, samples []trainer.Sample) (pos, neg float64) {
	t.Helper()
	rec, err := trainer.Recompute(m, samples, 1000, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var np, nn int
	for i, s := range samples {
		for j, mk := range s.Mask {
			if mk != 1 {
				continue
			}
			switch {
			case s.Advantage > 0:
				pos += float64(rec[i][j])
				np++
			case s.Advantage < 0:
				neg += float64(rec[i][j])
				nn++
			}
		}
	}
	return pos / float64(np), neg / float64(nn)
}

// Repeated PPO steps on one batch (epochs over the same data) lower the
// surrogate loss and move probability from negative- to positive-advantage
// tokens.
func TestStepsImproveTheObjective(t *testing.T) {
	for _, loss := range []trainer.LossKind{trainer.LossPPO, trainer.LossGSPO} {
		t.Run(string(loss), func(t *testing.T) {
			m := tinyModel(t, true, 5)
			it := makeIteration(t, m, "toy", 0, 0, smallShape, groups([]float64{1, 0}, []float64{0, 1, 0}), 10)
			samples := it.samples()
			adv, _ := trainer.Advantages(it.data().Rollouts, false)
			trainer.SetAdvantages(samples, adv)
			pos0, neg0 := meanSampled(t, m, samples)
			old, err := trainer.Recompute(m, samples, 1000, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg := trainer.Config{Loss: loss, LR: 3e-3, ClipLow: 0.2, ClipHigh: 0.2}
			tr := newTrainer(t, m, cfg)
			var losses []float64
			for k := 0; k < 6; k++ {
				r, err := tr.Step(samples, old, nil)
				if err != nil {
					t.Fatal(err)
				}
				losses = append(losses, r.Stats.Loss)
			}
			pos1, neg1 := meanSampled(t, m, samples)
			if !(losses[5] < losses[0]) {
				t.Errorf("loss went from %v to %v: %v", losses[0], losses[5], losses)
			}
			if !(pos1 > pos0) || !(neg1 < neg0) {
				t.Errorf("mean logprob of positive-advantage tokens %v -> %v, of negative %v -> %v", pos0, pos1, neg0, neg1)
			}
		})
	}
}

// Micro-batches accumulate into exactly the full batch's loss and, up to
// summation order, its gradient: the loss is normalised over the step,
// not per micro-batch.
func TestMicroBatchesAccumulate(t *testing.T) {
	var results []trainer.StepResult
	for _, budget := range []int{1, 1 << 20} {
		m := tinyModel(t, false, 6)
		it := makeIteration(t, m, "mb", 0, 0, smallShape, stepGroups, 11)
		samples := it.samples()
		adv, _ := trainer.Advantages(it.data().Rollouts, true)
		trainer.SetAdvantages(samples, adv)
		old, err := trainer.Recompute(m, samples, budget, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := newTrainer(t, m, trainer.Config{MicroBatchTokens: budget}).Step(samples, old, nil)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	a, b := results[0], results[1]
	if a.MicroBatches != 10 || b.MicroBatches != 1 {
		t.Errorf("%d and %d micro-batches, want 10 and 1", a.MicroBatches, b.MicroBatches)
	}
	if a.Stats != b.Stats || a.Tokens != b.Tokens || a.Stats.Tokens != 100 {
		t.Errorf("stats differ: %+v vs %+v", a.Stats, b.Stats)
	}
	if math.Abs(a.GradNorm-b.GradNorm) > 1e-5*b.GradNorm || b.GradNorm == 0 {
		t.Errorf("gradient norm %v with one sequence per micro-batch, %v with one micro-batch", a.GradNorm, b.GradNorm)
	}
}

func TestIterationEdgeCases(t *testing.T) {
	t.Run("failed gate leaves the weights", func(t *testing.T) {
		m := tinyModel(t, false, 7)
		it := makeIteration(t, m, "edge", 0, 0, smallShape, stepGroups, 12)
		d := it.data()
		perturb(d.Samples, 0.5, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
		before := weights(t, m)
		res, err := newTrainer(t, m, trainer.Config{LR: 1e-2}).Iteration(d, 0, nil)
		if !errors.Is(err, trainer.ErrGate) || res.Gate == nil || res.Gate.Passed || len(res.Steps) != 0 {
			t.Fatalf("err %v, result %+v", err, res)
		}
		if !bytes.Equal(before, weights(t, m)) {
			t.Error("weights changed")
		}
	})
	t.Run("zero-variance groups give no gradient", func(t *testing.T) {
		m := tinyModel(t, false, 7)
		it := makeIteration(t, m, "edge", 0, 0, smallShape, groups([]float64{1, 1}, []float64{0, 0, 0}, []float64{1}), 12)
		before := weights(t, m)
		res, err := newTrainer(t, m, trainer.Config{LR: 1e-2}).Iteration(it.data(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Groups.ZeroVariance != 3 || res.Trained != 0 || len(res.Steps) != 1 || !res.Steps[0].Skipped {
			t.Errorf("groups %+v, trained %d, steps %+v", res.Groups, res.Trained, res.Steps)
		}
		if !bytes.Equal(before, weights(t, m)) {
			t.Error("weights changed without a gradient")
		}
	})
	t.Run("baseline none trains every success and no failure", func(t *testing.T) {
		// Group g0 all passed (no variance: GRPO trains nothing of it),
		// g1 all failed, g2 mixed. Without a baseline the 2 + 1 passing
		// rollouts carry advantage 1 and the 4 failing ones 0.
		for _, tt := range []struct {
			baseline string
			trained  int
		}{{trainer.BaselineGroup, 2}, {trainer.BaselineNone, 3}} {
			m := tinyModel(t, false, 7)
			it := makeIteration(t, m, "edge", 0, 0, smallShape, groups([]float64{1, 1}, []float64{0, 0, 0}, []float64{1, 0}), 12)
			before := weights(t, m)
			res, err := newTrainer(t, m, trainer.Config{LR: 1e-2, Baseline: tt.baseline}).Iteration(it.data(), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Groups.ZeroVariance != 2 || res.Trained != tt.trained || len(res.Steps) != 1 || res.Steps[0].Skipped {
				t.Errorf("baseline %s: groups %+v, trained %d (want %d), steps %+v", tt.baseline, res.Groups, res.Trained, tt.trained, res.Steps)
			}
			if bytes.Equal(before, weights(t, m)) {
				t.Errorf("baseline %s: weights unchanged", tt.baseline)
			}
		}
	})
	t.Run("warm-up", func(t *testing.T) {
		m := tinyModel(t, false, 7)
		it := makeIteration(t, m, "edge", 0, 0, smallShape, stepGroups, 12)
		res, err := newTrainer(t, m, trainer.Config{LR: 1e-3, WarmupSteps: 4, Steps: 3}).Iteration(it.data(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range []float64{0.25e-3, 0.5e-3, 0.75e-3} {
			if math.Abs(res.Steps[k].LR-want) > 1e-15 {
				t.Errorf("step %d: lr %v, want %v", k, res.Steps[k].LR, want)
			}
		}
	})
}

func TestMismatchedLengthsAreErrors(t *testing.T) {
	m := tinyModel(t, false, 8)
	samples := makeIteration(t, m, "len", 0, 0, smallShape, stepGroups, 13).samples()
	rec, err := trainer.Recompute(m, samples, 1000, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec[2] = rec[2][1:]
	if _, _, err := trainer.Check(samples, rec, 0, trainer.Config{}); !errors.Is(err, trainer.ErrData) || !strings.Contains(err.Error(), samples[2].Source) {
		t.Errorf("check: err %v, want ErrData naming %s", err, samples[2].Source)
	}
	before := weights(t, m)
	if _, err := newTrainer(t, m, trainer.Config{}).Step(samples, rec, nil); !errors.Is(err, trainer.ErrData) || !strings.Contains(err.Error(), "12 recomputed logprobs") {
		t.Errorf("step: err %v, want ErrData", err)
	}
	if !bytes.Equal(before, weights(t, m)) {
		t.Error("a failed step changed the weights")
	}
}

// TestSharedPrefixStep: with SharedPrefix, a step over sequences that
// start with the same tokens gives the loss statistics, gradient norm and
// updated weights (the logprobs they give) of a step without it, up to
// float32 rounding; over sequences with nothing in common it is the same
// step, bit for bit.
func TestSharedPrefixStep(t *testing.T) {
	for _, shared := range []bool{true, false} {
		var results []trainer.StepResult
		var ws [][]byte
		var before, after [][][]float32
		for _, on := range []bool{false, true} {
			m := tinyModel(t, false, 6)
			it := makeIteration(t, m, "sp", 0, 0, shape{prompt: 12, turns: 3, sampled: 5, obs: 3, temperature: 0.7}, stepGroups, 11)
			samples := it.samples()
			if shared {
				for i := range samples { // a system prompt of 9 tokens
					copy(samples[i].Prompt, samples[0].Prompt[:9])
				}
			}
			adv, _ := trainer.Advantages(it.data().Rollouts, true)
			trainer.SetAdvantages(samples, adv)
			old, err := trainer.Recompute(m, samples, 1<<20, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := newTrainer(t, m, trainer.Config{LR: 1e-3, SharedPrefix: on}).Step(samples, old, nil)
			if err != nil {
				t.Fatal(err)
			}
			lp, err := trainer.Recompute(m, samples, 1<<20, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			results, ws = append(results, r), append(ws, weights(t, m))
			before, after = append(before, old), append(after, lp)
		}
		a, b := results[0], results[1]
		if !shared {
			if a.Stats != b.Stats || a.GradNorm != b.GradNorm || !bytes.Equal(ws[0], ws[1]) {
				t.Errorf("no shared tokens: the step differs with SharedPrefix: %+v vs %+v", a, b)
			}
			continue
		}
		if a.Stats.Tokens != b.Stats.Tokens || a.Tokens != b.Tokens || b.GradNorm == 0 ||
			math.Abs(a.GradNorm-b.GradNorm) > 1e-5*a.GradNorm || math.Abs(a.Stats.Loss-b.Stats.Loss) > 1e-6*math.Max(1, math.Abs(a.Stats.Loss)) {
			t.Errorf("shared prefix: %+v, want %+v up to rounding", b, a)
		}
		moved, apart := 0.0, 0.0
		for i := range after[0] {
			for j := range after[0][i] {
				moved = math.Max(moved, math.Abs(float64(after[0][i][j]-before[0][i][j])))
				apart = math.Max(apart, math.Abs(float64(after[0][i][j]-after[1][i][j])))
			}
		}
		t.Logf("moved %g, apart %g", moved, apart)
		if apart > 1e-5 || moved < 1e3*apart || moved == 0 {
			t.Errorf("the step moved logprobs by up to %g; with and without SharedPrefix they end %g apart", moved, apart)
		}
	}
}

// TestSharedPrefixIteration: a whole update with SharedPrefix recomputes
// the logprobs of one without it up to float32 rounding and trains the
// same samples.
func TestSharedPrefixIteration(t *testing.T) {
	var res []*trainer.IterationResult
	for _, on := range []bool{false, true} {
		m := tinyModel(t, false, 6)
		it := makeIteration(t, m, "spi", 0, 0, shape{prompt: 12, turns: 3, sampled: 5, obs: 3, temperature: 0.7}, stepGroups, 12)
		d := it.data()
		for i := range d.Samples {
			copy(d.Samples[i].Prompt, d.Samples[0].Prompt[:9])
		}
		r, err := newTrainer(t, m, trainer.Config{LR: 1e-3, Steps: 2, MinPearson: -1, SharedPrefix: on}).Iteration(d, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	a, b := res[0], res[1]
	if a.Trained != b.Trained || a.Trained == 0 || len(a.Steps) != len(b.Steps) || a.RecomputeTokens != b.RecomputeTokens {
		t.Fatalf("trained %d vs %d samples in %d vs %d steps", a.Trained, b.Trained, len(a.Steps), len(b.Steps))
	}
	for i := range a.Recomputed {
		for j, v := range a.Recomputed[i] {
			if w := b.Recomputed[i][j]; math.Abs(float64(v-w)) > 1e-5 {
				t.Fatalf("sample %d token %d: recomputed %v, %v with SharedPrefix", i, j, v, w)
			}
		}
	}
}
