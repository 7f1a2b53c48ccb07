package trainer

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/legorl/legorl/policy/model"
)

// Recompute returns the logprob of every completion token of every sample
// under m's current weights, at the sample's temperature, replaying the
// recorded MoE routes when replay is set. Samples run in micro-batches of
// at most budget tokens; progress, when not nil, is called after each with
// the samples done so far. A sample of an MoE model without recorded routes
// cannot be replayed: that is an ErrData error naming its row.
func Recompute(m *model.Model, samples []Sample, budget int, replay bool, progress func(done, total int)) ([][]float32, error) {
	return recompute(m, samples, budget, replay, false, progress)
}

// recompute is Recompute; with shared, each micro-batch's common leading
// tokens run once (model.LogprobsSharedPrefix, Config.SharedPrefix).
func recompute(m *model.Model, samples []Sample, budget int, replay, shared bool, progress func(done, total int)) ([][]float32, error) {
	logprobs := m.Logprobs
	if shared {
		logprobs = m.LogprobsSharedPrefix
	}
	moe := m.Config().MoELayers() > 0
	tokens := make([]int, len(samples))
	for i := range samples {
		tokens[i] = samples[i].Tokens()
		if replay && moe && samples[i].Routes.Empty() {
			return nil, fmt.Errorf("%w: %s: segment %s/%d has no recorded routing to replay (recompute without replay to use the trainer's own routing)",
				ErrData, samples[i].Source, samples[i].RolloutID, samples[i].SegmentIndex)
		}
	}
	out := make([][]float32, len(samples))
	done := 0
	for _, mb := range Pack(tokens, budget) {
		seqs := make([]model.Sequence, len(mb))
		for j, i := range mb {
			seqs[j] = samples[i].sequence(replay)
		}
		res, err := logprobs(seqs)
		if err != nil {
			return nil, fmt.Errorf("trainer: recompute (micro-batch starting with %s): %w", samples[mb[0]].Source, err)
		}
		for j, i := range mb {
			out[i] = res[j].Logprobs
		}
		done += len(mb)
		if progress != nil {
			progress(done, len(samples))
		}
	}
	return out, nil
}

// TokenDiff locates one compared token.
type TokenDiff struct {
	RolloutID    string  `json:"rollout_id"`
	SegmentIndex int32   `json:"segment_index"`
	Token        int     `json:"token"` // index in the completion
	Rollout      float32 `json:"rollout"`
	Recomputed   float32 `json:"recomputed"`
}

// RolloutAgreement is the agreement of one rollout's sampled tokens.
type RolloutAgreement struct {
	RolloutID string    `json:"rollout_id"`
	Agreement Agreement `json:"agreement"`
}

// MaskedSegment is a segment the mask mode dropped.
type MaskedSegment struct {
	RolloutID    string  `json:"rollout_id"`
	SegmentIndex int32   `json:"segment_index"`
	Tokens       int     `json:"tokens"`
	KL           float64 `json:"kl"`
}

// GateReport is the train-inference check of an update.
type GateReport struct {
	// Overall covers every compared token of the segments kept.
	Overall Agreement `json:"overall"`
	// PerRollout is sorted by rollout id.
	PerRollout []RolloutAgreement `json:"per_rollout"`
	// Worst is the token with the largest absolute difference.
	Worst      TokenDiff `json:"worst"`
	MinPearson float64   `json:"min_pearson"`
	Replay     bool      `json:"replay"`
	// StaleTokens were sampled by another policy version than the weights
	// checked: they are trained on (importance sampling corrects them) but
	// not compared, since other weights cannot be expected to agree.
	StaleTokens int `json:"stale_tokens"`
	// Before is the overall agreement before the mask mode dropped
	// segments; nil when nothing was dropped.
	Before *Agreement      `json:"before,omitempty"`
	Masked []MaskedSegment `json:"masked,omitempty"`
	Passed bool            `json:"passed"`
}

// degenerateTol is how far constant logprobs may differ and still pass
// when the correlation is undefined (every token equally likely on both
// sides, e.g. greedy decoding).
const degenerateTol = 1e-3

func (r *GateReport) pass() bool {
	p := r.Overall.Pearson
	if math.IsNaN(p) {
		return r.Overall.Tokens > 0 && r.Overall.MaxAbsDiff <= degenerateTol
	}
	return p >= r.MinPearson
}

// Summary is the report in one line: the verdict, the overall figures,
// where the largest difference is, and the rollouts with the largest KL.
func (r *GateReport) Summary() string {
	var b strings.Builder
	o := r.Overall
	verdict := "passed"
	if !r.Passed {
		verdict = "FAILED"
	}
	cmp := ">="
	if !(o.Pearson >= r.MinPearson) {
		cmp = "<"
	}
	replay := "on"
	if !r.Replay {
		replay = "off"
	}
	fmt.Fprintf(&b, "%s: pearson %.4f %s %g over %d sampled tokens (spearman %.4f, mean |diff| %.3g, max |diff| %.3g at rollout %s segment %d token %d: rollout %.4f vs recomputed %.4f, KL %.3g, routing replay %s",
		verdict, o.Pearson, cmp, r.MinPearson, o.Tokens, o.Spearman, o.MeanAbsDiff, o.MaxAbsDiff,
		r.Worst.RolloutID, r.Worst.SegmentIndex, r.Worst.Token, r.Worst.Rollout, r.Worst.Recomputed, o.KL, replay)
	if r.StaleTokens > 0 {
		fmt.Fprintf(&b, ", %d tokens of other policy versions not compared", r.StaleTokens)
	}
	b.WriteString(")")
	if r.Before != nil {
		fmt.Fprintf(&b, "; masked %d segments (pearson before %.4f over %d tokens)", len(r.Masked), r.Before.Pearson, r.Before.Tokens)
	}
	worst := append([]RolloutAgreement(nil), r.PerRollout...)
	sort.SliceStable(worst, func(i, j int) bool { return worst[i].Agreement.KL > worst[j].Agreement.KL })
	if len(worst) > 3 {
		worst = worst[:3]
	}
	if len(worst) > 0 {
		b.WriteString("; largest KL: ")
		for i, w := range worst {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %.3g", w.RolloutID, w.Agreement.KL)
		}
	}
	return b.String()
}

// GateError is the error of a failed check; it wraps ErrGate.
type GateError struct{ Report *GateReport }

func (e *GateError) Error() string { return ErrGate.Error() + ": " + e.Report.Summary() }
func (e *GateError) Unwrap() error { return ErrGate }

// Check compares the rollout logprobs of every sampled token that the
// policy version checked sampled with the recomputed ones. When the
// overall Pearson correlation is below cfg.MinPearson, the abort mode
// returns a *GateError; the mask mode drops each segment whose own k3 KL
// exceeds cfg.MaxSegmentKL, checks the rest again and returns a *GateError
// only if they still fail. keep[i] reports whether sample i survived. The
// report is returned in every case. No compared token at all (every token
// sampled by other versions) is an ErrData error.
func Check(samples []Sample, recomputed [][]float32, version int64, cfg Config) (*GateReport, []bool, error) {
	cfg = cfg.WithDefaults()
	r := &GateReport{MinPearson: cfg.MinPearson, Replay: !cfg.NoReplay}
	keep := make([]bool, len(samples))
	if len(recomputed) != len(samples) {
		return r, keep, fmt.Errorf("trainer: check: %d recomputed rows for %d samples", len(recomputed), len(samples))
	}
	for i := range samples {
		if err := samples[i].checkLengths(recomputed[i]); err != nil {
			return r, keep, err
		}
	}
	segKL := make([]Agreement, len(samples))
	versions := map[int64]int{}
	for i := range samples {
		keep[i] = true
		a, b := comparedTokens(&samples[i], recomputed[i], version, versions)
		segKL[i] = Agree(a, b)
		r.StaleTokens += samples[i].Sampled() - len(a)
	}
	if n := sumSampled(samples); n == 0 {
		return r, keep, fmt.Errorf("%w: the iteration's segments hold no sampled token", ErrData)
	} else if r.StaleTokens == n {
		seen := make([]string, 0, len(versions))
		for v, n := range versions {
			seen = append(seen, fmt.Sprintf("v%d: %d tokens", v, n))
		}
		sort.Strings(seen)
		return r, keep, fmt.Errorf("%w: no sampled token to check: none was sampled by policy version %d, the weights being trained (seen %s)",
			ErrData, version, strings.Join(seen, ", "))
	}
	r.fill(samples, recomputed, keep, version)
	r.Passed = r.pass()
	if !r.Passed && cfg.GateMode == GateMask {
		before := r.Overall
		for i := range samples {
			if segKL[i].Tokens > 0 && segKL[i].KL > cfg.MaxSegmentKL {
				keep[i] = false
				r.Masked = append(r.Masked, MaskedSegment{RolloutID: samples[i].RolloutID, SegmentIndex: samples[i].SegmentIndex,
					Tokens: segKL[i].Tokens, KL: segKL[i].KL})
			}
		}
		if len(r.Masked) > 0 {
			r.Before = &before
			r.fill(samples, recomputed, keep, version)
			r.Passed = r.Overall.Tokens > 0 && r.pass()
		}
	}
	if !r.Passed {
		return r, keep, &GateError{Report: r}
	}
	return r, keep, nil
}

// fill computes the overall and per-rollout agreement of the kept samples.
func (r *GateReport) fill(samples []Sample, recomputed [][]float32, keep []bool, version int64) {
	var all, allB []float64
	per := map[string][2][]float64{}
	r.Worst = TokenDiff{}
	worst := -1.0
	for i := range samples {
		if !keep[i] {
			continue
		}
		s := &samples[i]
		a, b := comparedTokens(s, recomputed[i], version, nil)
		all, allB = append(all, a...), append(allB, b...)
		p := per[s.RolloutID]
		p[0], p[1] = append(p[0], a...), append(p[1], b...)
		per[s.RolloutID] = p
		for t, m := range s.Mask {
			if m == 1 && s.Versions[t] == version {
				if d := math.Abs(float64(recomputed[i][t]) - float64(s.Logprobs[t])); d > worst {
					worst = d
					r.Worst = TokenDiff{RolloutID: s.RolloutID, SegmentIndex: s.SegmentIndex, Token: t, Rollout: s.Logprobs[t], Recomputed: recomputed[i][t]}
				}
			}
		}
	}
	r.Overall = Agree(all, allB)
	r.PerRollout = r.PerRollout[:0]
	for id, p := range per {
		r.PerRollout = append(r.PerRollout, RolloutAgreement{RolloutID: id, Agreement: Agree(p[0], p[1])})
	}
	sort.Slice(r.PerRollout, func(i, j int) bool { return r.PerRollout[i].RolloutID < r.PerRollout[j].RolloutID })
}

// comparedTokens returns the rollout and recomputed logprobs of a sample's
// tokens sampled by version, counting the others' versions in seen.
func comparedTokens(s *Sample, rec []float32, version int64, seen map[int64]int) (a, b []float64) {
	for t, m := range s.Mask {
		if m != 1 {
			continue
		}
		if s.Versions[t] != version {
			if seen != nil {
				seen[s.Versions[t]]++
			}
			continue
		}
		a = append(a, float64(s.Logprobs[t]))
		b = append(b, float64(rec[t]))
	}
	return a, b
}

func sumSampled(samples []Sample) int {
	n := 0
	for i := range samples {
		n += samples[i].Sampled()
	}
	return n
}
