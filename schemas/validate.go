package schemas

import (
	"errors"
	"fmt"
	"math"
)

// Sentinel errors of Validate. Each returned error wraps exactly one of them
// and names the row and the offending position.
var (
	ErrEmpty              = errors.New("schemas: required field is empty")
	ErrUnknownTable       = errors.New("schemas: unknown table")
	ErrSchemaVersion      = errors.New("schemas: unsupported schema version")
	ErrUnknownStatus      = errors.New("schemas: unknown status")
	ErrUnknownTermination = errors.New("schemas: unknown termination")
	ErrStatusMismatch     = errors.New("schemas: status does not match termination")
	ErrReward             = errors.New("schemas: reward out of range")
	ErrNegativeCount      = errors.New("schemas: negative count")
	ErrLogprobLength      = errors.New("schemas: logprobs and completion lengths differ")
	ErrVersionLength      = errors.New("schemas: policy_versions and completion lengths differ")
	ErrLossMaskLength     = errors.New("schemas: loss mask and completion lengths differ")
	ErrLossMaskValue      = errors.New("schemas: loss mask value is not 0 or 1")
	ErrNonFiniteLogprob   = errors.New("schemas: logprob is NaN or Inf")
	ErrPositiveLogprob    = errors.New("schemas: logprob is positive")
	ErrTokenRange         = errors.New("schemas: token id out of range")
	ErrRoutingShape       = errors.New("schemas: routing shape does not match tokens")
	ErrSampling           = errors.New("schemas: invalid sampling parameters")
	ErrUnknownMismatch    = errors.New("schemas: unknown mismatch")
)

// Validate checks a rollout row: identity fields present, a known status and
// termination that agree, a finite reward in [0, 1] and no negative counts.
func (r *Rollout) Validate() error {
	where := "rollout " + r.RolloutID
	for _, f := range []struct{ name, v string }{
		{"run_id", r.RunID}, {"task_id", r.TaskID}, {"group_id", r.GroupID},
		{"rollout_id", r.RolloutID}, {"harness", r.Harness},
	} {
		if f.v == "" {
			return fmt.Errorf("%w: %s: %s", ErrEmpty, where, f.name)
		}
	}
	if !r.Status.Valid() {
		return fmt.Errorf("%w: %s: %q", ErrUnknownStatus, where, string(r.Status))
	}
	if !r.Termination.Valid() {
		return fmt.Errorf("%w: %s: %q", ErrUnknownTermination, where, string(r.Termination))
	}
	if want := r.Termination.Status(); r.Status != want {
		return fmt.Errorf("%w: %s: termination %s must be %s, got %s", ErrStatusMismatch, where, r.Termination, want, r.Status)
	}
	if math.IsNaN(r.Reward) || r.Reward < 0 || r.Reward > 1 {
		return fmt.Errorf("%w: %s: %v not in [0, 1]", ErrReward, where, r.Reward)
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"iteration", int64(r.Iteration)}, {"num_turns", int64(r.NumTurns)},
		{"num_llm_calls", int64(r.NumLLMCalls)}, {"num_tool_calls", int64(r.NumToolCalls)},
		{"tool_parse_failures", int64(r.ToolParseFailures)}, {"diff_bytes", r.DiffBytes},
	} {
		if c.v < 0 {
			return fmt.Errorf("%w: %s: %s=%d", ErrNegativeCount, where, c.name, c.v)
		}
	}
	return nil
}

// Validate checks a segment row against a vocabulary of vocabSize tokens:
// every token id in [0, vocabSize), one logprob, one loss-mask value and one policy
// version per completion token, finite non-positive logprobs, mask values 0 or 1, and a
// routing list of exactly tokens x layers x k expert ids.
func (s *Segment) Validate(vocabSize int) error {
	where := fmt.Sprintf("segment %s/%d", s.RolloutID, s.SegmentIndex)
	if s.RunID == "" || s.RolloutID == "" {
		return fmt.Errorf("%w: %s: run_id and rollout_id are required", ErrEmpty, where)
	}
	if s.SegmentIndex < 0 || s.FirstCall < 0 || s.LastCall < s.FirstCall {
		return fmt.Errorf("%w: %s: segment_index=%d first_call=%d last_call=%d", ErrNegativeCount, where, s.SegmentIndex, s.FirstCall, s.LastCall)
	}
	n := len(s.CompletionTokenIDs)
	if len(s.Logprobs) != n {
		return fmt.Errorf("%w: %s: %d logprobs, %d completion tokens", ErrLogprobLength, where, len(s.Logprobs), n)
	}
	if len(s.LossMask) != n {
		return fmt.Errorf("%w: %s: %d mask values, %d completion tokens", ErrLossMaskLength, where, len(s.LossMask), n)
	}
	if len(s.PolicyVersions) != n {
		return fmt.Errorf("%w: %s: %d policy versions, %d completion tokens", ErrVersionLength, where, len(s.PolicyVersions), n)
	}
	if err := checkTokens(where, "prompt", s.PromptTokenIDs, vocabSize); err != nil {
		return err
	}
	if err := checkTokens(where, "completion", s.CompletionTokenIDs, vocabSize); err != nil {
		return err
	}
	for i, m := range s.LossMask {
		if m != 0 && m != 1 {
			return fmt.Errorf("%w: %s: loss_mask[%d]=%d", ErrLossMaskValue, where, i, m)
		}
	}
	for i, lp := range s.Logprobs {
		switch {
		case math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0):
			return fmt.Errorf("%w: %s: logprobs[%d]=%v", ErrNonFiniteLogprob, where, i, lp)
		case lp > 0:
			return fmt.Errorf("%w: %s: logprobs[%d]=%v", ErrPositiveLogprob, where, i, lp)
		}
	}
	if _, err := s.Routes(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if !(s.Temperature >= 0) || !(s.TopP > 0 && s.TopP <= 1) || s.TopK < 0 {
		return fmt.Errorf("%w: %s: temperature=%v top_p=%v top_k=%d", ErrSampling, where, s.Temperature, s.TopP, s.TopK)
	}
	return nil
}

func checkTokens(where, part string, ids []int32, vocab int) error {
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("%w: %s: %s token %d is %d, vocabulary has %d", ErrTokenRange, where, part, i, id, vocab)
		}
	}
	return nil
}

// Validate checks a step row.
func (s *Step) Validate() error {
	if s.RunID == "" || s.RolloutID == "" {
		return fmt.Errorf("%w: step %s/%d: run_id and rollout_id are required", ErrEmpty, s.RolloutID, s.Turn)
	}
	if s.Turn < 0 || s.ObservationBytes < 0 || s.Iteration < 0 {
		return fmt.Errorf("%w: step %s/%d", ErrNegativeCount, s.RolloutID, s.Turn)
	}
	return nil
}

// Validate checks a train-step row: counts are not negative and the metrics
// that gate training are not NaN (a NaN loss must stop a run, not be stored).
func (s *TrainStep) Validate() error {
	where := fmt.Sprintf("train step %d/%d", s.Iteration, s.Step)
	if s.RunID == "" {
		return fmt.Errorf("%w: %s: run_id", ErrEmpty, where)
	}
	if s.Iteration < 0 || s.Step < 0 || s.Tokens < 0 || s.Sequences < 0 {
		return fmt.Errorf("%w: %s", ErrNegativeCount, where)
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"loss", s.Loss}, {"grad_norm", s.GradNorm}, {"lr", s.LR}} {
		if math.IsNaN(m.v) || math.IsInf(m.v, 0) {
			return fmt.Errorf("schemas: %s: %s is %v", where, m.name, m.v)
		}
	}
	return nil
}

// Validate checks a replay row: identity fields present, a known mismatch
// that agrees with reproduced, rewards in [0, 1] and no negative counts.
func (r *Replay) Validate() error {
	where := "replay of rollout " + r.RolloutID
	for _, f := range []struct{ name, v string }{
		{"run_id", r.RunID}, {"rollout_id", r.RolloutID}, {"task_id", r.TaskID}, {"job_id", r.JobID},
	} {
		if f.v == "" {
			return fmt.Errorf("%w: %s: %s", ErrEmpty, where, f.name)
		}
	}
	if !r.Mismatch.Valid() || r.Reproduced != (r.Mismatch == MismatchNone) {
		return fmt.Errorf("%w: %s: %q with reproduced=%v", ErrUnknownMismatch, where, string(r.Mismatch), r.Reproduced)
	}
	for _, v := range []float64{r.Reward, r.ReplayedReward} {
		if math.IsNaN(v) || v < 0 || v > 1 {
			return fmt.Errorf("%w: %s: %v not in [0, 1]", ErrReward, where, v)
		}
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"iteration", int64(r.Iteration)}, {"calls_recorded", int64(r.CallsRecorded)}, {"calls_served", int64(r.CallsServed)},
		{"num_turns", int64(r.NumTurns)}, {"replayed_num_turns", int64(r.ReplayedNumTurns)},
		{"num_tool_calls", int64(r.NumToolCalls)}, {"replayed_num_tool_calls", int64(r.ReplayedToolCalls)},
		{"diff_bytes", r.DiffBytes}, {"replayed_diff_bytes", r.ReplayedDiffBytes},
	} {
		if c.v < 0 {
			return fmt.Errorf("%w: %s: %s=%d", ErrNegativeCount, where, c.name, c.v)
		}
	}
	if r.DivergentCall < -1 || r.DivergentToken < -1 { // -1: no prompt divergence
		return fmt.Errorf("%w: %s: divergent_call=%d divergent_token=%d", ErrNegativeCount, where, r.DivergentCall, r.DivergentToken)
	}
	if r.DivergentCall < -1 || r.DivergentToken < -1 { // -1: no prompt divergence
		return fmt.Errorf("%w: %s: divergent_call=%d divergent_token=%d", ErrNegativeCount, where, r.DivergentCall, r.DivergentToken)
	}
	return nil
}
