package model

import (
	"fmt"
	"math"
	"strconv"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/safetensors"
)

// AdamWConfig holds the optimizer's hyperparameters.
type AdamWConfig struct {
	LR          float64 // learning rate
	Beta1       float64 // defaults to 0.9
	Beta2       float64 // defaults to 0.999
	Eps         float64 // defaults to 1e-8
	WeightDecay float64 // decoupled, applied to weight matrices only (not to norm weights); defaults to 0
	MaxGradNorm float64 // clip the global gradient L2 norm to this; 0 disables clipping
}

// AdamW is the decoupled-weight-decay Adam optimizer with bias correction,
// as torch.optim.AdamW, preceded by clipping of the global gradient norm as
// torch.nn.utils.clip_grad_norm_.
type AdamW struct {
	cfg   AdamWConfig
	m, v  []float32
	decay []bool // per tensor of the model, in params order
	step  int
}

// NewAdamW returns an optimizer for m with zeroed moments.
func NewAdamW(m *Model, cfg AdamWConfig) (*AdamW, error) {
	if cfg.Beta1 == 0 {
		cfg.Beta1 = 0.9
	}
	if cfg.Beta2 == 0 {
		cfg.Beta2 = 0.999
	}
	if cfg.Eps == 0 {
		cfg.Eps = 1e-8
	}
	if !(cfg.LR >= 0) || !(cfg.Beta1 >= 0 && cfg.Beta1 < 1) || !(cfg.Beta2 >= 0 && cfg.Beta2 < 1) ||
		!(cfg.Eps > 0) || !(cfg.WeightDecay >= 0) || !(cfg.MaxGradNorm >= 0) {
		return nil, fmt.Errorf("model: bad AdamW config %+v", cfg)
	}
	o := &AdamW{cfg: cfg, m: make([]float32, len(m.p.flat)), v: make([]float32, len(m.p.flat))}
	for _, t := range m.p.all {
		o.decay = append(o.decay, !t.is1D())
	}
	return o, nil
}

// Steps returns the number of steps taken.
func (o *AdamW) Steps() int { return o.step }

// Step clips g to the configured global norm (in place), applies one AdamW
// update to m's weights at learning rate lr (0 means the configured LR) and
// returns the gradient norm before clipping. A non-finite gradient norm
// leaves the weights unchanged and returns an error.
func (o *AdamW) Step(m *Model, g *Grads, lr float64) (float64, error) {
	if len(g.p.flat) != len(m.p.flat) || len(o.m) != len(m.p.flat) {
		return 0, fmt.Errorf("model: gradients or optimizer do not match the model")
	}
	if lr == 0 {
		lr = o.cfg.LR
	}
	norm := g.Norm()
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("model: gradient norm is %g; step skipped", norm)
	}
	scale := 1.0
	if c := o.cfg.MaxGradNorm; c > 0 && norm > c {
		scale = c / (norm + 1e-6)
	}
	o.step++
	b1, b2 := o.cfg.Beta1, o.cfg.Beta2
	bc1 := 1 - math.Pow(b1, float64(o.step))
	bc2 := 1 - math.Pow(b2, float64(o.step))
	stepSize := lr / bc1
	sqrtBC2 := math.Sqrt(bc2)
	backend.ParallelFor(len(m.p.all), func(k int) {
		pt, gt := m.p.all[k], g.p.all[k]
		off := offsetOf(m.p, k)
		s := backend.AdamWStep{Beta1: b1, Beta2: b2, Eps: o.cfg.Eps, StepSize: stepSize, SqrtBC2: sqrtBC2, Shrink: 1, GradScale: scale}
		if o.decay[k] {
			s.Shrink = float32(1 - lr*o.cfg.WeightDecay)
		}
		m.be.AdamW(pt.data, gt.data, o.m[off:off+len(pt.data)], o.v[off:off+len(pt.data)], s)
	})
	if err := m.backendErr(); err != nil {
		return norm, err
	}
	return norm, nil
}

// offsetOf returns the offset of tensor k in p.flat.
func offsetOf[T Float](p *params[T], k int) int {
	off := 0
	for _, t := range p.all[:k] {
		off += len(t.data)
	}
	return off
}

// SaveState writes the optimizer's moments and step count to path as a
// safetensors file (tensors exp_avg and exp_avg_sq over the model's flat
// parameter order, metadata step), so training can resume.
func (o *AdamW) SaveState(path string) error {
	n := len(o.m)
	return safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "exp_avg", Shape: []int{n}, Data: o.m},
		{Name: "exp_avg_sq", Shape: []int{n}, Data: o.v},
	}, safetensors.F32, map[string]string{"step": strconv.Itoa(o.step), "format": "legorl-adamw"})
}

// LoadState restores moments and step count written by SaveState for a
// model of the same config.
func (o *AdamW) LoadState(path string) error {
	set, err := safetensors.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: optimizer state: %w", ErrCheckpoint, err)
	}
	n := len(o.m)
	m, err := set.Float32("exp_avg", []int{n})
	if err != nil {
		return fmt.Errorf("%w: optimizer state: %w", ErrCheckpoint, err)
	}
	v, err := set.Float32("exp_avg_sq", []int{n})
	if err != nil {
		return fmt.Errorf("%w: optimizer state: %w", ErrCheckpoint, err)
	}
	step, err := strconv.Atoi(set.Metadata()["step"])
	if err != nil || step < 0 {
		return fmt.Errorf("%w: optimizer state: bad step %q", ErrCheckpoint, set.Metadata()["step"])
	}
	copy(o.m, m)
	copy(o.v, v)
	o.step = step
	return nil
}
