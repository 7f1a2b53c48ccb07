package trainer

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// readFile opens a committed file (size and sha256 checked) and calls fn
// on each record batch with the file row of the batch's first row.
func readFile(ctx context.Context, st storage.Getter, fe storage.FileEntry, mem memory.Allocator, fn func(arrow.RecordBatch, int64) error) error {
	f, err := storage.OpenFile(ctx, st, fe, mem)
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	defer f.Close()
	var row0 int64
	for rec, err := range f.Batches(ctx, 0) {
		if err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
		if err := fn(rec, row0); err != nil {
			return err
		}
		row0 += rec.NumRows()
	}
	return nil
}

// column returns the named column of rec as array type A.
func column[A arrow.Array](rec arrow.RecordBatch, key, name string) (A, error) {
	var zero A
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, fmt.Errorf("%w: %s: no column %s", ErrData, key, name)
	}
	a, ok := rec.Column(idx[0]).(A)
	if !ok {
		return zero, fmt.Errorf("%w: %s: column %s has type %s", ErrData, key, name, rec.Column(idx[0]).DataType())
	}
	return a, nil
}

// listColumn is a list column whose elements are a numeric array.
type listColumn[T any] struct {
	l    *array.List
	vals []T
}

func listOf[T any, A interface {
	arrow.Array
	Values() []T
}](rec arrow.RecordBatch, key, name string) (listColumn[T], error) {
	l, err := column[*array.List](rec, key, name)
	if err != nil {
		return listColumn[T]{}, err
	}
	v, ok := l.ListValues().(A)
	if !ok {
		return listColumn[T]{}, fmt.Errorf("%w: %s: column %s has elements of type %s", ErrData, key, name, l.ListValues().DataType())
	}
	return listColumn[T]{l: l, vals: v.Values()}, nil
}

// at returns a copy of row i's list (the batch's memory is released later).
func (c listColumn[T]) at(i int) []T {
	lo, hi := c.l.ValueOffsets(i)
	return append(make([]T, 0, hi-lo), c.vals[lo:hi]...)
}

// decodeRollouts reads the rollout rows of a batch, validated.
func decodeRollouts(rec arrow.RecordBatch, key string, row0 int64, runID string, iteration int) ([]rolloutRow, error) {
	var (
		errs    error
		strs    = map[string]*array.String{}
		iterCol *array.Int32
		reward  *array.Float64
	)
	for _, n := range []string{"run_id", "task_id", "group_id", "rollout_id", "harness", "status", "termination"} {
		if strs[n], errs = column[*array.String](rec, key, n); errs != nil {
			return nil, errs
		}
	}
	if iterCol, errs = column[*array.Int32](rec, key, "iteration"); errs != nil {
		return nil, errs
	}
	if reward, errs = column[*array.Float64](rec, key, "reward"); errs != nil {
		return nil, errs
	}
	out := make([]rolloutRow, 0, rec.NumRows())
	for i := 0; i < int(rec.NumRows()); i++ {
		src := fmt.Sprintf("%s row %d", key, row0+int64(i))
		r := schemas.Rollout{
			RunID: strs["run_id"].Value(i), Iteration: iterCol.Value(i), TaskID: strs["task_id"].Value(i),
			GroupID: strs["group_id"].Value(i), RolloutID: strs["rollout_id"].Value(i), Harness: strs["harness"].Value(i),
			Status: schemas.Status(strs["status"].Value(i)), Termination: schemas.Termination(strs["termination"].Value(i)),
			Reward: reward.Value(i),
		}
		if err := r.Validate(); err != nil {
			return out, fmt.Errorf("trainer: %s: %w", src, err)
		}
		if r.RunID != runID || int(r.Iteration) != iteration {
			return out, fmt.Errorf("%w: %s: rollout %s is of run %s iteration %d, not of the manifest's run %s iteration %d",
				ErrData, src, r.RolloutID, r.RunID, r.Iteration, runID, iteration)
		}
		out = append(out, rolloutRow{
			RolloutReward: RolloutReward{RolloutID: r.RolloutID, GroupID: r.GroupID, Reward: r.Reward},
			status:        r.Status, termination: r.Termination, source: src,
		})
	}
	return out, nil
}

// decodeSegments reads the segment rows of a batch, validated against the
// model's vocabulary and MoE shape.
func decodeSegments(rec arrow.RecordBatch, key string, row0 int64, runID string, iteration int, cfg model.Config) ([]Sample, error) {
	var err error
	strs := map[string]*array.String{}
	for _, n := range []string{"run_id", "rollout_id", "finish_reason"} {
		if strs[n], err = column[*array.String](rec, key, n); err != nil {
			return nil, err
		}
	}
	i32 := map[string]*array.Int32{}
	for _, n := range []string{"iteration", "segment_index", "first_call", "last_call", "routing_layers", "routing_top_k", "top_k"} {
		if i32[n], err = column[*array.Int32](rec, key, n); err != nil {
			return nil, err
		}
	}
	f32 := map[string]*array.Float32{}
	for _, n := range []string{"temperature", "top_p"} {
		if f32[n], err = column[*array.Float32](rec, key, n); err != nil {
			return nil, err
		}
	}
	version, err := column[*array.Int64](rec, key, "policy_version")
	if err != nil {
		return nil, err
	}
	prompt, err := listOf[int32, *array.Int32](rec, key, "prompt_token_ids")
	if err != nil {
		return nil, err
	}
	completion, err := listOf[int32, *array.Int32](rec, key, "completion_token_ids")
	if err != nil {
		return nil, err
	}
	mask, err := listOf[int8, *array.Int8](rec, key, "loss_mask")
	if err != nil {
		return nil, err
	}
	logprobs, err := listOf[float32, *array.Float32](rec, key, "logprobs")
	if err != nil {
		return nil, err
	}
	experts, err := listOf[int16, *array.Int16](rec, key, "routing_experts")
	if err != nil {
		return nil, err
	}
	versions, err := listOf[int64, *array.Int64](rec, key, "policy_versions")
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, rec.NumRows())
	for i := 0; i < int(rec.NumRows()); i++ {
		src := fmt.Sprintf("%s row %d", key, row0+int64(i))
		s := schemas.Segment{
			RunID: strs["run_id"].Value(i), Iteration: i32["iteration"].Value(i), RolloutID: strs["rollout_id"].Value(i),
			SegmentIndex: i32["segment_index"].Value(i), FirstCall: i32["first_call"].Value(i), LastCall: i32["last_call"].Value(i),
			PromptTokenIDs: prompt.at(i), CompletionTokenIDs: completion.at(i), LossMask: mask.at(i),
			Logprobs: logprobs.at(i), RoutingExperts: experts.at(i),
			RoutingLayers: i32["routing_layers"].Value(i), RoutingTopK: i32["routing_top_k"].Value(i),
			PolicyVersion: version.Value(i), PolicyVersions: versions.at(i), FinishReason: strs["finish_reason"].Value(i),
			Temperature: f32["temperature"].Value(i), TopP: f32["top_p"].Value(i), TopK: i32["top_k"].Value(i),
		}
		if err := s.Validate(cfg.VocabSize); err != nil {
			return out, fmt.Errorf("trainer: %s: %w", src, err)
		}
		if s.RunID != runID || int(s.Iteration) != iteration {
			return out, fmt.Errorf("%w: %s: segment %s/%d is of run %s iteration %d, not of the manifest's run %s iteration %d",
				ErrData, src, s.RolloutID, s.SegmentIndex, s.RunID, s.Iteration, runID, iteration)
		}
		if n := len(s.PromptTokenIDs) + len(s.CompletionTokenIDs); cfg.MaxPositionEmbeddings > 0 && n > cfg.MaxPositionEmbeddings {
			return out, fmt.Errorf("%w: %s: segment %s/%d has %d tokens, the model's context is %d", ErrData, src, s.RolloutID, s.SegmentIndex, n, cfg.MaxPositionEmbeddings)
		}
		if len(s.PromptTokenIDs) == 0 {
			return out, fmt.Errorf("%w: %s: segment %s/%d has an empty prompt", ErrData, src, s.RolloutID, s.SegmentIndex)
		}
		routes, _ := s.Routes() // Validate checked the shape
		if err := checkRoutes(routes, cfg); err != nil {
			return out, fmt.Errorf("%w: %s: segment %s/%d: %v", ErrData, src, s.RolloutID, s.SegmentIndex, err)
		}
		out = append(out, Sample{
			RolloutID: s.RolloutID, SegmentIndex: s.SegmentIndex,
			Prompt: s.PromptTokenIDs, Completion: s.CompletionTokenIDs, Mask: s.LossMask,
			Logprobs: s.Logprobs, Versions: s.PolicyVersions, Routes: routes,
			Temperature: float64(s.Temperature), Source: src,
		})
	}
	return out, nil
}

// checkRoutes reports whether recorded routes fit the model: as many MoE
// layers and experts per token, expert ids in range and distinct per layer.
func checkRoutes(r schemas.Routes, cfg model.Config) error {
	if r.Empty() {
		return nil
	}
	if cfg.MoELayers() == 0 {
		return fmt.Errorf("routing recorded for %d MoE layers, but the model is dense", r.Layers)
	}
	if r.Layers != cfg.MoELayers() || r.K != cfg.NumExpertsPerTok {
		return fmt.Errorf("routing has %d layers x %d experts per token, the model %d x %d", r.Layers, r.K, cfg.MoELayers(), cfg.NumExpertsPerTok)
	}
	for t := 0; t < r.Tokens; t++ {
		for l := 0; l < r.Layers; l++ {
			ids := r.At(t, l)
			for j, e := range ids {
				if int(e) >= cfg.NumExperts {
					return fmt.Errorf("token %d layer %d names expert %d of %d", t, l, e, cfg.NumExperts)
				}
				for _, f := range ids[:j] {
					if f == e {
						return fmt.Errorf("token %d layer %d repeats expert %d", t, l, e)
					}
				}
			}
		}
	}
	return nil
}
