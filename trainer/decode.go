package trainer

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
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

// decodeRollouts reads the rollout rows of a batch, validated.
func decodeRollouts(rec arrow.RecordBatch, key string, row0 int64, runID string, iteration int) ([]rolloutRow, error) {
	// The columns the trainer uses, a projection of schemas.Rollout.
	type cols struct {
		RunID       string  `parquet:"run_id"`
		Iteration   int32   `parquet:"iteration"`
		TaskID      string  `parquet:"task_id"`
		GroupID     string  `parquet:"group_id"`
		RolloutID   string  `parquet:"rollout_id"`
		Harness     string  `parquet:"harness"`
		Status      string  `parquet:"status"`
		Termination string  `parquet:"termination"`
		Reward      float64 `parquet:"reward"`
	}
	rows, err := storage.DecodeBatch[cols](rec, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrData, key, err)
	}
	out := make([]rolloutRow, 0, len(rows))
	for i, c := range rows {
		src := fmt.Sprintf("%s row %d", key, row0+int64(i))
		r := schemas.Rollout{
			RunID: c.RunID, Iteration: c.Iteration, TaskID: c.TaskID, GroupID: c.GroupID, RolloutID: c.RolloutID, Harness: c.Harness,
			Status: schemas.Status(c.Status), Termination: schemas.Termination(c.Termination), Reward: c.Reward,
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
	segs, err := storage.DecodeBatch[schemas.Segment](rec, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrData, key, err)
	}
	out := make([]Sample, 0, len(segs))
	for i, s := range segs {
		src := fmt.Sprintf("%s row %d", key, row0+int64(i))
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
