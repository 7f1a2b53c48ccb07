package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// MaskRun is a run of completion tokens with one loss-mask value.
type MaskRun struct {
	Sampled bool `json:"sampled"` // loss mask 1: the policy sampled them
	N       int  `json:"n"`
}

// TrajSegment is one segment of a trajectory.
type TrajSegment struct {
	Index            int     `json:"segment_index"`
	FirstCall        int     `json:"first_call"`
	LastCall         int     `json:"last_call"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	Sampled          int     `json:"sampled"`     // loss mask 1
	Observation      int     `json:"observation"` // loss mask 0: tool output and template tokens
	MeanLogprob      Num     `json:"mean_logprob"`
	PolicyVersion    int64   `json:"policy_version"`
	FinishReason     string  `json:"finish_reason"`
	Temperature      float32 `json:"temperature"`
	TopP             float32 `json:"top_p"`
	TopK             int32   `json:"top_k"`
	RoutingLayers    int32   `json:"routing_layers"`
	RoutingTopK      int32   `json:"routing_top_k"`
	// A fork: the segment's prompt is not the previous segment's prompt
	// plus completion (the harness rewrote its history). SharedPrefix is
	// the tokens the two share from the start.
	Fork         bool      `json:"fork"`
	SharedPrefix int       `json:"shared_prefix"`
	Runs         []MaskRun `json:"mask_runs"`
}

// Trajectory is one rollout: its row, its steps and its segments.
type Trajectory struct {
	Rollout  schemas.Rollout `json:"rollout"`
	Steps    []schemas.Step  `json:"steps"`
	Segments []TrajSegment   `json:"segments"`
	Forks    int             `json:"forks"`
	Tokens   int             `json:"tokens"`  // prompt + completion, every segment
	Sampled  int             `json:"sampled"` // loss mask 1, every segment
	Problems []Problem       `json:"problems,omitempty"`
}

// Trajectory returns one rollout of a run. The rollout must be in the
// rollouts table; steps and segments that cannot be read are Problems.
func (m *Monitor) Trajectory(ctx context.Context, run, id string) (*Trajectory, error) {
	if err := m.checkRun(run); err != nil {
		return nil, err
	}
	s, err := m.snapshot(ctx, run)
	if s == nil {
		return nil, err
	}
	rt := s.table(ctx, m, schemas.TableRollouts)
	tr := &Trajectory{}
	found := false
	for _, r := range rt.rollouts {
		if r.RolloutID == id {
			tr.Rollout, found = r, true
			break
		}
	}
	if !found {
		if rt.missing() {
			return nil, fmt.Errorf("%w: %q: the rollouts table could not be read: %v", ErrRollout, id, rt.Problems)
		}
		return nil, fmt.Errorf("%w: %q is not in run %s", ErrRollout, id, run)
	}
	st := s.table(ctx, m, schemas.TableSteps)
	tr.Problems = append(tr.Problems, st.Problems...)
	for _, x := range st.steps {
		if x.RolloutID == id {
			tr.Steps = append(tr.Steps, x)
		}
	}
	segs, probs := m.rolloutSegments(ctx, s, tr.Rollout)
	tr.Problems = append(tr.Problems, probs...)
	for i, sg := range segs {
		ts := TrajSegment{Index: int(sg.SegmentIndex), FirstCall: int(sg.FirstCall), LastCall: int(sg.LastCall),
			PromptTokens: len(sg.PromptTokenIDs), CompletionTokens: len(sg.CompletionTokenIDs), PolicyVersion: sg.PolicyVersion,
			FinishReason: sg.FinishReason, Temperature: sg.Temperature, TopP: sg.TopP, TopK: sg.TopK,
			RoutingLayers: sg.RoutingLayers, RoutingTopK: sg.RoutingTopK, MeanLogprob: none()}
		var sum float64
		for t, v := range sg.LossMask {
			sampled := v == 1
			if sampled {
				ts.Sampled++
				if t < len(sg.Logprobs) {
					sum += float64(sg.Logprobs[t])
				}
			}
			if n := len(ts.Runs); n > 0 && ts.Runs[n-1].Sampled == sampled {
				ts.Runs[n-1].N++
			} else {
				ts.Runs = append(ts.Runs, MaskRun{Sampled: sampled, N: 1})
			}
		}
		ts.Observation = len(sg.LossMask) - ts.Sampled
		if ts.Sampled > 0 {
			ts.MeanLogprob = Num(sum / float64(ts.Sampled))
		}
		if i > 0 {
			prev := append(append([]int32(nil), segs[i-1].PromptTokenIDs...), segs[i-1].CompletionTokenIDs...)
			ts.SharedPrefix = commonPrefix(prev, sg.PromptTokenIDs)
			ts.Fork = ts.SharedPrefix < len(prev)
			if ts.Fork {
				tr.Forks++
			}
		}
		tr.Tokens += ts.PromptTokens + ts.CompletionTokens
		tr.Sampled += ts.Sampled
		tr.Segments = append(tr.Segments, ts)
	}
	tr.Problems = dedup(tr.Problems)
	return tr, nil
}

// MarshalJSON writes the rollout and step rows with their column names.
func (tr *Trajectory) MarshalJSON() ([]byte, error) {
	steps := make([]map[string]any, len(tr.Steps))
	for i, s := range tr.Steps {
		steps[i] = columns(s)
	}
	type plain Trajectory
	return json.Marshal(struct {
		Rollout map[string]any   `json:"rollout"`
		Steps   []map[string]any `json:"steps"`
		*plain
	}{columns(tr.Rollout), steps, (*plain)(tr)})
}

// columns maps a row's parquet column names to its values.
func columns(row any) map[string]any {
	v := reflect.ValueOf(row)
	out := make(map[string]any, v.NumField())
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("parquet"), ",")
		val := v.Field(i).Interface()
		if f, ok := val.(float64); ok {
			val = Num(f)
		}
		out[name] = val
	}
	return out
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// rolloutSegments reads the segments of one rollout from the segments files
// of its iteration.
func (m *Monitor) rolloutSegments(ctx context.Context, s *snapshot, r schemas.Rollout) ([]schemas.Segment, []Problem) {
	var out []schemas.Segment
	var probs []Problem
	files := 0
	for _, fe := range s.files[schemas.TableSegments] {
		if s.iterOf[fe.Key] != int(r.Iteration) {
			continue
		}
		files++
		segs, err := m.readSegments(ctx, fe, r.RolloutID)
		if err != nil {
			probs = append(probs, Problem{Table: string(schemas.TableSegments), Key: fe.Key, Reason: err.Error()})
			continue
		}
		out = append(out, segs...)
	}
	if files == 0 {
		probs = append(probs, Problem{Table: string(schemas.TableSegments),
			Reason: fmt.Sprintf("iteration %d of run %s has no committed segments files", r.Iteration, s.RunID)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SegmentIndex < out[j].SegmentIndex })
	return out, probs
}

func (m *Monitor) readSegments(ctx context.Context, fe storage.FileEntry, id string) (out []schemas.Segment, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: %s: %v", ErrData, fe.Key, r)
		}
	}()
	lctx, cancel := context.WithTimeout(ctx, m.opts.LoadTimeout)
	defer cancel()
	f, err := storage.OpenFile(lctx, m.st, fe, m.mem)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for b, err := range f.Batches(lctx, 0) {
		if err != nil {
			return nil, err
		}
		ids, err := storage.DecodeBatch[struct {
			RolloutID string `parquet:"rollout_id"`
		}](b, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fe.Key, err)
		}
		rows, err := storage.DecodeBatch[schemas.Segment](b, func(i int) bool { return ids[i].RolloutID == id })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fe.Key, err)
		}
		out = append(out, rows...)
	}
	return out, nil
}
