package monitor

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/legorl/legorl/storage"
)

// segSummary is what the panels keep of a segment row: counts, not tokens.
type segSummary struct {
	RunID            string
	RolloutID        string
	Iteration        int32
	SegmentIndex     int32
	FirstCall        int32
	LastCall         int32
	PromptTokens     int
	CompletionTokens int
	Sampled          int     // loss mask 1
	LogprobSum       float64 // over sampled tokens
	Responses        []int32 // lengths of the runs of sampled tokens: one per LLM call's response
	PolicyVersion    int64
	FinishReason     string
}

// decodeSegSummaries reads the segments of a batch as summaries, without
// copying token lists.
func decodeSegSummaries(rec arrow.RecordBatch) ([]segSummary, error) {
	type meta struct {
		RunID        string `parquet:"run_id"`
		Iteration    int32  `parquet:"iteration"`
		RolloutID    string `parquet:"rollout_id"`
		SegmentIndex int32  `parquet:"segment_index"`
		FirstCall    int32  `parquet:"first_call"`
		LastCall     int32  `parquet:"last_call"`
		Policy       int64  `parquet:"policy_version"`
		FinishReason string `parquet:"finish_reason"`
	}
	metas, err := storage.DecodeBatch[meta](rec, nil)
	if err != nil {
		return nil, err
	}
	prompt, err := storage.ListOf[int32, *array.Int32](rec, "prompt_token_ids")
	if err != nil {
		return nil, err
	}
	completion, err := storage.ListOf[int32, *array.Int32](rec, "completion_token_ids")
	if err != nil {
		return nil, err
	}
	mask, err := storage.ListOf[int8, *array.Int8](rec, "loss_mask")
	if err != nil {
		return nil, err
	}
	lps, err := storage.ListOf[float32, *array.Float32](rec, "logprobs")
	if err != nil {
		return nil, err
	}
	out := make([]segSummary, len(metas))
	for i, m := range metas {
		s := segSummary{RunID: m.RunID, RolloutID: m.RolloutID, Iteration: m.Iteration, SegmentIndex: m.SegmentIndex,
			FirstCall: m.FirstCall, LastCall: m.LastCall, PolicyVersion: m.Policy, FinishReason: m.FinishReason,
			PromptTokens: len(prompt.At(i)), CompletionTokens: len(completion.At(i))}
		mk, lp := mask.At(i), lps.At(i)
		run := int32(0)
		for t, v := range mk {
			if v == 1 {
				s.Sampled++
				run++
				if t < len(lp) {
					s.LogprobSum += float64(lp[t])
				}
				continue
			}
			if run > 0 {
				s.Responses = append(s.Responses, run)
				run = 0
			}
		}
		if run > 0 {
			s.Responses = append(s.Responses, run)
		}
		out[i] = s
	}
	return out, nil
}
