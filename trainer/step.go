package trainer

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/legorl/legorl/policy/model"
)

// Trainer updates a model's weights in place: one Step per optimizer step,
// or one Iteration over an iteration's data. It is not safe for concurrent
// use.
type Trainer struct {
	cfg     Config
	m       *model.Model
	opt     *model.AdamW
	g       *model.Grads
	metrics *Metrics // Options.Metrics of Train; nil: none
}

// New returns a trainer of m with the given config (defaults applied). opt
// may carry optimizer state from earlier iterations; nil starts fresh
// moments with the config's hyperparameters.
func New(m *model.Model, opt *model.AdamW, cfg Config) (*Trainer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opt == nil {
		var err error
		if opt, err = NewOptimizer(m, cfg); err != nil {
			return nil, err
		}
	}
	return &Trainer{cfg: cfg, m: m, opt: opt, g: m.NewGrads()}, nil
}

// NewOptimizer returns AdamW with the config's hyperparameters.
func NewOptimizer(m *model.Model, cfg Config) (*model.AdamW, error) {
	cfg = cfg.WithDefaults()
	opt, err := model.NewAdamW(m, model.AdamWConfig{LR: cfg.LR, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps,
		WeightDecay: cfg.WeightDecay, MaxGradNorm: cfg.MaxGradNorm})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return opt, nil
}

// Config returns the trainer's config, defaults applied.
func (t *Trainer) Config() Config { return t.cfg }

// Model returns the model being trained.
func (t *Trainer) Model() *model.Model { return t.m }

// Optimizer returns the optimizer, whose state a checkpoint saves.
func (t *Trainer) Optimizer() *model.AdamW { return t.opt }

// StepResult describes one optimizer step.
type StepResult struct {
	Stats     LossStats
	GradNorm  float64 // before clipping
	LR        float64
	Sequences int
	// Tokens counts every token run forward and backward (prompts
	// included); Stats.Tokens only the sampled ones.
	Tokens       int
	MicroBatches int
	Seconds      float64
	// Skipped: no sequence carried loss, so no optimizer step was taken.
	Skipped bool
}

// Step runs one optimizer step over samples: the sequences are packed into
// micro-batches of cfg.MicroBatchTokens, each micro-batch's forward and
// backward pass adds its gradient, then the gradient is clipped and AdamW
// steps at the warm-up learning rate. old[i] holds sample i's logprobs
// under the weights at the start of the iteration (from Recompute).
// With cfg.SharedPrefix a micro-batch's common leading tokens run once.
// progress, when not nil, is called after each micro-batch.
func (t *Trainer) Step(samples []Sample, old [][]float32, progress func(done, total int)) (StepResult, error) {
	start := time.Now()
	if len(old) != len(samples) {
		return StepResult{}, fmt.Errorf("trainer: step: %d old logprob rows for %d samples", len(old), len(samples))
	}
	res := StepResult{LR: t.cfg.lrAt(t.opt.Steps())}
	tokens := make([]int, len(samples))
	norm := 0
	for i := range samples {
		s := &samples[i]
		if err := s.checkLengths(old[i]); err != nil {
			return StepResult{}, err
		}
		tokens[i] = s.Tokens()
		if n := s.Sampled(); n > 0 {
			if t.cfg.Loss == LossGSPO {
				norm++
			} else {
				norm += n
			}
		}
	}
	if norm == 0 {
		res.Skipped = true
		res.Seconds = time.Since(start).Seconds()
		return res, nil
	}
	p := LossParams{ClipLow: t.cfg.ClipLow, ClipHigh: t.cfg.ClipHigh, TISCap: t.cfg.TISCap, Scale: 1 / float64(norm)}
	lossFn := PPOWeights
	if t.cfg.Loss == LossGSPO {
		lossFn = GSPOWeights
	}
	replay := !t.cfg.NoReplay
	backward := t.m.BackwardFunc
	if t.cfg.SharedPrefix {
		backward = t.m.BackwardSharedPrefix
	}
	stats := make([]LossStats, len(samples))
	t.g.Zero()
	batches := Pack(tokens, t.cfg.MicroBatchTokens)
	for bi, mb := range batches {
		seqs := make([]model.Sequence, len(mb))
		for j, i := range mb {
			seqs[j] = samples[i].sequence(replay)
			res.Tokens += tokens[i]
		}
		_, err := backward(seqs, func(j int, newLP []float32) []float32 {
			i := mb[j]
			s := &samples[i]
			w, st := lossFn(LossInput{New: newLP, Old: old[i], Rollout: s.Logprobs, Mask: s.Mask, Advantage: s.Advantage}, p)
			stats[i] = st
			return w
		}, t.g)
		if err != nil {
			return StepResult{}, fmt.Errorf("trainer: step (micro-batch starting with %s): %w", samples[mb[0]].Source, err)
		}
		if progress != nil {
			progress(bi+1, len(batches))
		}
	}
	for i := range stats { // in sample order: the sums do not depend on scheduling
		res.Stats.Add(stats[i])
	}
	res.Sequences, res.MicroBatches = len(samples), len(batches)
	var err error
	if res.GradNorm, err = t.opt.Step(t.m, t.g, res.LR); err != nil {
		return StepResult{}, fmt.Errorf("trainer: step: %w", err)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// Progress reports how far an iteration is.
type Progress struct {
	Phase       string // "recompute" or "step"
	Step, Steps int    // for "step": 1-based step and step count
	Done, Total int    // recompute: samples; step: micro-batches
}

// IterationResult is what Iteration did.
type IterationResult struct {
	Groups GroupStats
	Gate   *GateReport
	// Recomputed holds, per sample of the data, the logprob of every
	// completion token under the weights before the update.
	Recomputed [][]float32
	// Trained counts the samples that carried loss: kept by the gate, of a
	// group with varying rewards, with at least one sampled token.
	Trained int
	Steps   []StepResult
	// RecomputeTokens and RecomputeSeconds measure the recomputation
	// (prompt and completion tokens run forward).
	RecomputeTokens  int
	RecomputeSeconds float64
}

// Iteration runs the update of one iteration's data: advantages, the
// train-inference check against policy version `version` (the weights
// the trainer holds now), then cfg.Epochs passes of cfg.Steps optimizer
// steps, each pass over a fresh seeded shuffle of the samples that carry
// loss. On a failed check it returns the result so far (with the gate
// report) and a *GateError, and the weights are unchanged.
func (t *Trainer) Iteration(d *Data, version int64, progress func(Progress)) (*IterationResult, error) {
	report := func(p Progress) {
		if progress != nil {
			progress(p)
		}
	}
	res := &IterationResult{}
	adv, groups := Advantages(d.Rollouts, t.cfg.ScaleByStd)
	if t.cfg.Baseline == BaselineNone {
		adv = Rewards(d.Rollouts)
	}
	res.Groups = groups
	SetAdvantages(d.Samples, adv)
	start := time.Now()
	rec, err := recompute(t.m, d.Samples, t.cfg.MicroBatchTokens, !t.cfg.NoReplay, t.cfg.SharedPrefix, func(done, total int) {
		report(Progress{Phase: "recompute", Done: done, Total: total})
	})
	if err != nil {
		return res, err
	}
	res.Recomputed = rec
	res.RecomputeSeconds = time.Since(start).Seconds()
	for i := range d.Samples {
		res.RecomputeTokens += d.Samples[i].Tokens()
	}
	gate, keep, err := Check(d.Samples, rec, version, t.cfg)
	res.Gate = gate
	t.metrics.gate(gate)
	if err != nil {
		return res, err
	}
	var train []int
	for i := range d.Samples {
		if keep[i] && d.Samples[i].Advantage != 0 && d.Samples[i].Sampled() > 0 {
			train = append(train, i)
		}
	}
	res.Trained = len(train)
	rng := rand.New(rand.NewPCG(t.cfg.Seed, uint64(d.Iteration)))
	steps := min(t.cfg.Steps, max(len(train), 1))
	epochs := max(t.cfg.Epochs, 1)
	for e := 0; e < epochs; e++ {
		// The first pass shuffles exactly as before epochs existed, so a
		// one-pass update is bitwise what it was.
		rng.Shuffle(len(train), func(a, b int) { train[a], train[b] = train[b], train[a] })
		for k := 0; k < steps; k++ {
			idx := train[k*len(train)/steps : (k+1)*len(train)/steps]
			samples := make([]Sample, len(idx))
			old := make([][]float32, len(idx))
			for j, i := range idx {
				samples[j], old[j] = d.Samples[i], rec[i]
			}
			n := e*steps + k + 1
			sr, err := t.Step(samples, old, func(done, total int) {
				report(Progress{Phase: "step", Step: n, Steps: epochs * steps, Done: done, Total: total})
			})
			if err != nil {
				return res, err
			}
			t.metrics.step(sr)
			res.Steps = append(res.Steps, sr)
		}
	}
	return res, nil
}
