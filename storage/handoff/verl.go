package handoff

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// verlOutput is verl's AgentLoopOutput (verl/experimental/agent_loop/
// agent_loop.py), the per-trajectory record its agent loop hands to
// _agent_loop_postprocess, which pads a batch of them into the DataProto
// the PPO trainer trains on. AgentLoopOutput.model_validate_json reads a
// line. routed_experts is [tokens][layers][k] over prompt and response;
// verl wants it as an ndarray or tensor (np.asarray of the lists).
type verlOutput struct {
	PromptIDs        []int32        `json:"prompt_ids"`
	ResponseIDs      []int32        `json:"response_ids"`
	ResponseMask     []int8         `json:"response_mask"`
	ResponseLogprobs []float32      `json:"response_logprobs"`
	RoutedExperts    []any          `json:"routed_experts"`
	RewardScore      float64        `json:"reward_score"`
	NumTurns         int32          `json:"num_turns"`
	Metrics          map[string]any `json:"metrics"`
	ExtraFields      map[string]any `json:"extra_fields"`
}

// WriteVerl writes samples as JSON Lines of AgentLoopOutput. A masked
// rollout's response_mask is all zeros (verl trains on no token of it)
// and extra_fields.legorl_status says why.
func WriteVerl(w io.Writer, samples []Sample) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i, s := range samples {
		routes, err := s.routes(len(s.Segment.PromptTokenIDs) + len(s.Segment.CompletionTokenIDs))
		if err != nil {
			return fmt.Errorf("handoff: verl: sample %d: %w", i, err)
		}
		mask := s.Segment.LossMask
		if s.masked() {
			mask = make([]int8, len(mask))
		}
		o := verlOutput{PromptIDs: s.Segment.PromptTokenIDs, ResponseIDs: s.Segment.CompletionTokenIDs,
			ResponseMask: mask, ResponseLogprobs: s.Segment.Logprobs, RoutedExperts: routes,
			RewardScore: s.Rollout.Reward, NumTurns: s.Rollout.NumTurns,
			Metrics: map[string]any{}, ExtraFields: s.meta()}
		if err := enc.Encode(o); err != nil {
			return fmt.Errorf("handoff: verl: sample %d: %w", i, err)
		}
	}
	return bw.Flush()
}
