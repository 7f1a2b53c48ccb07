package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
)

// LossKind names the policy-gradient objective.
type LossKind string

const (
	// LossPPO is PPO-clip at token level: each sampled token has its own
	// ratio, clipped to [1-ClipLow, 1+ClipHigh], and the loss is the mean
	// over every sampled token of the step (DAPO's token-level mean).
	LossPPO LossKind = "ppo"
	// LossGSPO is GSPO: one length-normalised ratio per sequence
	// (the geometric mean of its token ratios), clipped per sequence, and
	// the loss is the mean over sequences.
	LossGSPO LossKind = "gspo"
)

// The values of Config.Baseline.
const (
	BaselineGroup = "group"
	BaselineNone  = "none"
)

// GateMode says what a failed train-inference check does.
type GateMode string

const (
	// GateAbort stops the update with a GateError: nothing is written.
	GateAbort GateMode = "abort"
	// GateMask drops the segments whose own KL exceeds MaxSegmentKL and
	// checks the rest again; the update aborts if the rest still fails.
	GateMask GateMode = "mask"
)

// Config holds every setting of an update. It is written, canonicalised,
// into each checkpoint's lineage, and its sha256 is the config hash. Zero
// fields take the defaults named in their comments (see WithDefaults).
type Config struct {
	// Loss is the objective. Defaults to ppo.
	Loss LossKind `json:"loss"`
	// ClipLow and ClipHigh bound the ratio to [1-ClipLow, 1+ClipHigh].
	// Defaults to 0.2 and 0.2 for ppo, 3e-4 and 4e-4 for gspo (the GSPO
	// paper's values: sequence ratios stay much closer to 1).
	ClipLow  float64 `json:"clip_low"`
	ClipHigh float64 `json:"clip_high"`
	// TISCap is C of truncated importance sampling: the weight
	// pi_trainer/pi_rollout of each sampled token is capped at C. Defaults to 2.
	TISCap float64 `json:"tis_cap"`
	// ScaleByStd divides each group's centred rewards by the group's
	// sample standard deviation (GRPO); without it advantages are reward
	// minus group mean (Dr. GRPO). Defaults to false.
	ScaleByStd bool `json:"scale_by_std"`
	// Baseline is what a rollout's reward is compared with: "group" (the
	// default) subtracts its group's mean reward (GRPO); "none" takes the
	// reward itself as the advantage (REINFORCE without a baseline). With
	// rewards of 0 and 1, "none" trains on the policy's own successes only,
	// every one of them, including groups that all passed (rejection
	// sampling fine-tuning, as RAFT and ReST-EM): it sharpens the policy
	// toward what it already solves and never pushes a failure down.
	// WithDefaults writes "group" as "", so the config hash of a config
	// without the field is unchanged.
	Baseline string `json:"baseline,omitempty"`

	// LR is the peak AdamW learning rate. Defaults to 1e-6.
	LR float64 `json:"lr"`
	// WarmupSteps ramps the learning rate linearly from LR/WarmupSteps to
	// LR over the first optimizer steps of the whole run (the optimizer's
	// step count travels with the checkpoint). Defaults to 0 (no warm-up).
	WarmupSteps int `json:"warmup_steps"`
	// Beta1, Beta2 and Eps are AdamW's. Default to 0.9, 0.999 and 1e-8.
	Beta1 float64 `json:"beta1"`
	Beta2 float64 `json:"beta2"`
	Eps   float64 `json:"eps"`
	// WeightDecay is AdamW's decoupled decay on weight matrices. Defaults to 0.
	WeightDecay float64 `json:"weight_decay"`
	// MaxGradNorm clips the global gradient norm. Defaults to 1.
	MaxGradNorm float64 `json:"max_grad_norm"`

	// Steps is the number of optimizer steps per pass over an iteration's
	// data: the data is shuffled (by Seed) and split into that many
	// mini-batches. Defaults to 1.
	Steps int `json:"steps"`
	// Epochs is the number of passes over an iteration's data (PPO's
	// epochs), each a fresh seeded shuffle split into Steps mini-batches,
	// so an update takes Epochs x Steps optimizer steps. From the second
	// pass on, the ratio to the policy that sampled the data is no longer
	// about 1 and the clip range bounds how far one update moves a token.
	// 0 means 1 and is what the config hash sees for one pass, so configs
	// written before the field hash as they did.
	Epochs int `json:"epochs,omitempty"`
	// MicroBatchTokens is the token budget of one micro-batch (prompt plus
	// completion tokens of the sequences packed together); gradients of a
	// mini-batch's micro-batches are accumulated before the step. A longer
	// sequence goes alone. Defaults to 16384.
	MicroBatchTokens int `json:"micro_batch_tokens"`
	// SharedPrefix runs the tokens every sequence of a micro-batch starts
	// with (an agent's system prompt and tool schemas) once per
	// micro-batch instead of once per sequence, in the recomputation
	// (model.LogprobsSharedPrefix) and the steps
	// (model.BackwardSharedPrefix), as SFT's shared_prefix does.
	// Logprobs, losses and gradients equal those without it up to float32
	// rounding, not bitwise, so it is off by default and a config without
	// it hashes as before.
	SharedPrefix bool `json:"shared_prefix,omitempty"`
	// Seed fixes the shuffle; with the same data, weights and config the
	// update is bitwise identical on the same machine. Defaults to 0.
	Seed uint64 `json:"seed"`

	// MinPearson is the gate: the Pearson correlation of rollout and
	// recomputed logprobs must reach it. Defaults to 0.99.
	MinPearson float64 `json:"min_pearson"`
	// GateMode is what a failed gate does. Defaults to abort.
	GateMode GateMode `json:"gate_mode"`
	// MaxSegmentKL is the per-segment k3 KL above which the mask mode drops
	// a segment. Defaults to 0.01.
	MaxSegmentKL float64 `json:"max_segment_kl"`
	// NoReplay recomputes MoE logprobs with the trainer's own routing
	// instead of replaying the recorded experts. Defaults to false
	// (replay on).
	NoReplay bool `json:"no_replay"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Loss == "" {
		c.Loss = LossPPO
	}
	if c.ClipLow == 0 && c.ClipHigh == 0 {
		if c.Loss == LossGSPO {
			c.ClipLow, c.ClipHigh = 3e-4, 4e-4
		} else {
			c.ClipLow, c.ClipHigh = 0.2, 0.2
		}
	}
	setF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	setF(&c.TISCap, 2)
	setF(&c.LR, 1e-6)
	setF(&c.Beta1, 0.9)
	setF(&c.Beta2, 0.999)
	setF(&c.Eps, 1e-8)
	setF(&c.MaxGradNorm, 1)
	setF(&c.MinPearson, 0.99)
	setF(&c.MaxSegmentKL, 0.01)
	if c.Steps == 0 {
		c.Steps = 1
	}
	if c.MicroBatchTokens == 0 {
		c.MicroBatchTokens = 16384
	}
	if c.GateMode == "" {
		c.GateMode = GateAbort
	}
	if c.Baseline == BaselineGroup {
		c.Baseline = ""
	}
	return c
}

// Validate checks a config after WithDefaults.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case c.Loss != LossPPO && c.Loss != LossGSPO:
		return bad("loss %q: want ppo or gspo", c.Loss)
	case c.Baseline != "" && c.Baseline != BaselineGroup && c.Baseline != BaselineNone:
		return bad("baseline %q: want group or none", c.Baseline)
	case c.Baseline == BaselineNone && c.ScaleByStd:
		return bad("baseline none with scale_by_std: there is no group statistic to scale by")
	case c.GateMode != GateAbort && c.GateMode != GateMask:
		return bad("gate_mode %q: want abort or mask", c.GateMode)
	case !(c.ClipLow > 0 && c.ClipLow < 1) || !(c.ClipHigh > 0) || !finite(c.ClipHigh):
		return bad("clip range [1-%g, 1+%g]: want 0 < clip_low < 1 and clip_high > 0", c.ClipLow, c.ClipHigh)
	case !(c.TISCap >= 1) || !finite(c.TISCap):
		return bad("tis_cap %g: want >= 1", c.TISCap)
	case !(c.LR > 0) || !finite(c.LR):
		return bad("lr %g: want > 0", c.LR)
	case c.WarmupSteps < 0:
		return bad("warmup_steps %d is negative", c.WarmupSteps)
	case !(c.MaxGradNorm > 0) || !finite(c.MaxGradNorm):
		return bad("max_grad_norm %g: want > 0", c.MaxGradNorm)
	case !(c.WeightDecay >= 0) || !finite(c.WeightDecay):
		return bad("weight_decay %g is negative", c.WeightDecay)
	case c.Steps < 1 || c.Steps > 1<<16:
		return bad("steps %d: want 1..65536", c.Steps)
	case c.Epochs < 0 || c.Epochs > 64:
		return bad("epochs %d: want 1..64 (0 means 1)", c.Epochs)
	case c.MicroBatchTokens < 1:
		return bad("micro_batch_tokens %d: want > 0", c.MicroBatchTokens)
	case !(c.MinPearson >= -1 && c.MinPearson <= 1):
		return bad("min_pearson %g: want a correlation in [-1, 1]", c.MinPearson)
	case !(c.MaxSegmentKL > 0) || !finite(c.MaxSegmentKL):
		return bad("max_segment_kl %g: want > 0", c.MaxSegmentKL)
	}
	return nil
}

// Hash returns the hex sha256 of the config's canonical JSON (defaults
// applied, fields in declaration order): the config hash of lineage files
// and Parquet footers.
func (c Config) Hash() string {
	b, err := json.Marshal(c.WithDefaults())
	if err != nil {
		panic(err) // a struct of numbers and strings always encodes
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// lrAt returns the learning rate of the optimizer's step number step
// (0-based, counted over the whole run).
func (c Config) lrAt(step int) float64 {
	if c.WarmupSteps > 0 && step < c.WarmupSteps {
		return c.LR * float64(step+1) / float64(c.WarmupSteps)
	}
	return c.LR
}
