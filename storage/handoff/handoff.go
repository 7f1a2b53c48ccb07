// Package handoff writes a run's stored trajectories in the layouts of
// trainers built for big models, so that a run's rollouts can train a
// model legorl's own trainer does not fit: slime (THUDM/slime, Megatron)
// and verl (volcengine/verl, FSDP or Megatron). Each segment of a rollout
// (prompt and completion tokens, loss mask, logprobs, routing) becomes one
// training sample with its rollout's reward. docs/DEPLOY.md maps every
// field to the trainer's source. The layouts were checked against those
// projects' code, not run with their trainers.
package handoff

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/legorl/legorl/schemas"
)

// Format names a trainer layout.
type Format string

// The layouts.
const (
	// Slime is slime's debug rollout data: one torch.save file per
	// iteration, {"rollout_id": N, "samples": [Sample.to_dict(), ...]},
	// which `--load-debug-rollout-data DIR/{rollout_id}.pt` trains on.
	Slime Format = "slime"
	// Verl is verl's agent-loop output: JSON Lines, one AgentLoopOutput
	// per line, one file per iteration.
	Verl Format = "verl"
)

// ErrFormat is returned for an unknown format.
var ErrFormat = errors.New("handoff: unknown format")

// ErrJoin is returned when a segment has no rollout row.
var ErrJoin = errors.New("handoff: segment without a rollout")

// ParseFormat checks a format name.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case Slime, Verl:
		return Format(s), nil
	}
	return "", fmt.Errorf("%w %q: want slime or verl", ErrFormat, s)
}

// Ext is the file extension of a format's files.
func (f Format) Ext() string {
	if f == Slime {
		return ".pt"
	}
	return ".jsonl"
}

// Sample is one segment with its rollout.
type Sample struct {
	Rollout *schemas.Rollout
	Segment *schemas.Segment
	// Group numbers the rollout's group within its iteration (0, 1, ...),
	// Rollout numbers the rollout within its iteration, and Index the
	// sample: in the order Join sorts them.
	Group, RolloutIndex, Index int
}

// Join pairs each segment with its rollout and orders the samples of each
// iteration by group, rollout and segment, so the samples of a group are
// adjacent (slime normalizes rewards over adjacent samples). It returns
// the samples per iteration, in ascending order of iteration.
func Join(rollouts []schemas.Rollout, segments []schemas.Segment) ([][]Sample, error) {
	byID := make(map[string]*schemas.Rollout, len(rollouts))
	for i := range rollouts {
		r := &rollouts[i]
		byID[key(r.Iteration, r.RolloutID)] = r
	}
	var all []Sample
	for i := range segments {
		s := &segments[i]
		r, ok := byID[key(s.Iteration, s.RolloutID)]
		if !ok {
			return nil, fmt.Errorf("%w: rollout %s of iteration %d", ErrJoin, s.RolloutID, s.Iteration)
		}
		all = append(all, Sample{Rollout: r, Segment: s})
	}
	slices.SortStableFunc(all, func(a, b Sample) int {
		return cmp.Or(cmp.Compare(a.Segment.Iteration, b.Segment.Iteration),
			cmp.Compare(a.Rollout.GroupID, b.Rollout.GroupID),
			cmp.Compare(a.Rollout.RolloutID, b.Rollout.RolloutID),
			cmp.Compare(a.Segment.SegmentIndex, b.Segment.SegmentIndex))
	})
	var out [][]Sample
	for i := range all {
		s := &all[i]
		if i == 0 || s.Segment.Iteration != all[i-1].Segment.Iteration {
			out = append(out, nil)
		} else {
			prev := &all[i-1]
			s.Group, s.RolloutIndex = prev.Group, prev.RolloutIndex
			if s.Rollout.GroupID != prev.Rollout.GroupID {
				s.Group++
			}
			if s.Rollout != prev.Rollout {
				s.RolloutIndex++
			}
		}
		s.Index = len(out[len(out)-1])
		out[len(out)-1] = append(out[len(out)-1], *s)
	}
	return out, nil
}

func key(it int32, id string) string { return fmt.Sprintf("%d/%s", it, id) }

// tokens is the segment's prompt then completion.
func (s Sample) tokens() []int32 {
	return append(slices.Clip(s.Segment.PromptTokenIDs), s.Segment.CompletionTokenIDs...)
}

// masked reports whether the rollout may not be trained on.
func (s Sample) masked() bool { return s.Rollout.Status != schemas.StatusCompleted }

// routes returns the segment's routing as [tokens][layers][k], its first
// rows tokens; nil for a dense model.
func (s Sample) routes(rows int) ([]any, error) {
	r, err := s.Segment.Routes()
	if err != nil || r.Empty() {
		return nil, err
	}
	out := make([]any, 0, rows)
	for t := 0; t < rows && t < r.Tokens; t++ {
		layers := make([]any, r.Layers)
		for l := range layers {
			layers[l] = anys(r.At(t, l))
		}
		out = append(out, layers)
	}
	return out, nil
}

// meta is what legorl knows of a sample that the trainer has no field
// for, under the keys both layouts carry it.
func (s Sample) meta() map[string]any {
	return map[string]any{
		"legorl_run_id":         s.Segment.RunID,
		"legorl_iteration":      int64(s.Segment.Iteration),
		"legorl_rollout_id":     s.Rollout.RolloutID,
		"legorl_segment_index":  int64(s.Segment.SegmentIndex),
		"legorl_task_id":        s.Rollout.TaskID,
		"legorl_group_id":       s.Rollout.GroupID,
		"legorl_status":         string(s.Rollout.Status),
		"legorl_termination":    string(s.Rollout.Termination),
		"legorl_policy_version": s.Segment.PolicyVersion,
		"legorl_finish_reason":  s.Segment.FinishReason,
	}
}
