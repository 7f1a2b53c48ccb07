package schemas

// Table names one dataset.
type Table string

const (
	TableRollouts   Table = "rollouts"
	TableSegments   Table = "segments"
	TableSteps      Table = "steps"
	TableTrainSteps Table = "train_steps"
	TableReplay     Table = "replay"
)

// Tables lists every table in a stable order.
func Tables() []Table {
	return []Table{TableRollouts, TableSegments, TableSteps, TableTrainSteps, TableReplay}
}

// Valid reports whether t names a known table.
func (t Table) Valid() bool {
	for _, k := range Tables() {
		if t == k {
			return true
		}
	}
	return false
}

// Rollout is one row of the rollouts table: one agent episode on one task.
//
// Rewards of masked rollouts are stored as 0 but carry no meaning: readers
// filter on Status before using Reward.
type Rollout struct {
	RunID         string      `parquet:"run_id"`
	Iteration     int32       `parquet:"iteration"`
	TaskID        string      `parquet:"task_id"`
	GroupID       string      `parquet:"group_id"`   // the G rollouts of one task in one iteration share it
	RolloutID     string      `parquet:"rollout_id"` // deterministic: hash of run, iteration, task and index
	Harness       string      `parquet:"harness"`
	PolicyVersion int64       `parquet:"policy_version"`
	Seed          int64       `parquet:"seed"`
	Status        Status      `parquet:"status"`
	Termination   Termination `parquet:"termination"`
	Reward        float64     `parquet:"reward"`
	// Hidden-test results by test id.
	F2PPassed []string `parquet:"f2p_passed,list"`
	F2PFailed []string `parquet:"f2p_failed,list"`
	P2PPassed []string `parquet:"p2p_passed,list"`
	P2PFailed []string `parquet:"p2p_failed,list"`

	NumTurns          int32 `parquet:"num_turns"`
	NumLLMCalls       int32 `parquet:"num_llm_calls"`
	NumToolCalls      int32 `parquet:"num_tool_calls"`
	ToolParseFailures int32 `parquet:"tool_parse_failures"`

	// Wall-clock seconds per phase.
	SetupSeconds float64 `parquet:"setup_seconds"`
	AgentSeconds float64 `parquet:"agent_seconds"`
	LLMSeconds   float64 `parquet:"llm_seconds"`
	ToolsSeconds float64 `parquet:"tools_seconds"`
	GradeSeconds float64 `parquet:"grade_seconds"`

	DiffBytes   int64    `parquet:"diff_bytes"`
	Flags       []string `parquet:"flags,list"`    // e.g. "tamper_attempt"; "split:S" names the task's split (train, heldout, ...)
	Error       string   `parquet:"error"`         // why a masked rollout was masked; empty otherwise
	StartedAtMs int64    `parquet:"started_at_ms"` // Unix milliseconds
}

// Segment is one row of the segments table: a run of tokens that the policy
// saw and produced, recorded by the proxy at generation time.
//
// A segment grows while each request extends the previous prompt plus
// completion token for token; a rewritten prefix starts a new segment.
// CompletionTokenIDs holds everything after the first prompt: sampled tokens
// (LossMask 1, with their Logprobs) interleaved with tokens the harness added
// between calls, such as tool observations (LossMask 0, Logprob 0).
//
// Routing covers every token of the segment, prompt first then completion:
// RoutingExperts is the flat [tokens][layers][k] list of expert ids, empty
// for dense models. Use Routes for the 3-D view.
type Segment struct {
	RunID              string  `parquet:"run_id"`
	Iteration          int32   `parquet:"iteration"`
	RolloutID          string  `parquet:"rollout_id"`
	SegmentIndex       int32   `parquet:"segment_index"`
	FirstCall          int32   `parquet:"first_call"` // index of the first LLM call in the segment
	LastCall           int32   `parquet:"last_call"`  // index of the last LLM call in the segment
	PromptTokenIDs     []int32 `parquet:"prompt_token_ids,list"`
	CompletionTokenIDs []int32 `parquet:"completion_token_ids,list"`
	// LossMask is 1 for sampled tokens and 0 otherwise. It is stored as
	// list<int8>: parquet-go v0.32 silently writes []uint8 lists as empty.
	LossMask       []int8    `parquet:"loss_mask,list"`
	Logprobs       []float32 `parquet:"logprobs,list" parquet-element:",split"`
	RoutingExperts []int16   `parquet:"routing_experts,list" parquet-element:",dict"` // dictionary: ids repeat; 24% smaller, 3x faster writes (docs/PERFORMANCE.md)
	RoutingLayers  int32     `parquet:"routing_layers"`                               // MoE layers per token; 0 for dense models
	RoutingTopK    int32     `parquet:"routing_top_k"`                                // experts per token per layer; 0 for dense models
	// PolicyVersion is the oldest policy version that sampled a token of
	// the segment; PolicyVersions has one entry per completion token, the
	// version that sampled it (0 where the mask is 0). They differ only when
	// the engine swapped checkpoints during the segment.
	PolicyVersion  int64   `parquet:"policy_version"`
	PolicyVersions []int64 `parquet:"policy_versions,list" parquet-element:",dict"`
	FinishReason   string  `parquet:"finish_reason"`
	Temperature    float32 `parquet:"temperature"`
	TopP           float32 `parquet:"top_p"`
	TopK           int32   `parquet:"top_k"` // 0: no top-k cut
}

// Step is one row of the steps table: one agent turn.
type Step struct {
	RunID            string  `parquet:"run_id"`
	Iteration        int32   `parquet:"iteration"`
	RolloutID        string  `parquet:"rollout_id"`
	Turn             int32   `parquet:"turn"`
	ToolName         string  `parquet:"tool_name"` // empty when the turn made no tool call
	Arguments        string  `parquet:"arguments"` // JSON as the harness sent it
	ObservationBytes int64   `parquet:"observation_bytes"`
	ExitCode         int32   `parquet:"exit_code"`
	ParseFailure     bool    `parquet:"parse_failure"` // the model's tool call could not be parsed
	Seconds          float64 `parquet:"seconds"`
}

// TrainStep is one row of the train_steps table: one optimizer step.
type TrainStep struct {
	RunID         string  `parquet:"run_id"`
	Iteration     int32   `parquet:"iteration"`
	Step          int32   `parquet:"step"`
	PolicyVersion int64   `parquet:"policy_version"` // the version the step updated
	Loss          float64 `parquet:"loss"`
	GradNorm      float64 `parquet:"grad_norm"`
	LR            float64 `parquet:"lr"`
	ClipFraction  float64 `parquet:"clip_fraction"`
	Entropy       float64 `parquet:"entropy"`
	KL            float64 `parquet:"kl"`
	// Train-inference agreement of the sampled tokens' logprobs.
	LogprobPearson     float64 `parquet:"logprob_pearson"`
	LogprobSpearman    float64 `parquet:"logprob_spearman"`
	LogprobMeanAbsDiff float64 `parquet:"logprob_mean_abs_diff"`
	LogprobMaxAbsDiff  float64 `parquet:"logprob_max_abs_diff"`
	// Importance-sampling ratio statistics and effective sample size.
	ISRatioMean     float64 `parquet:"is_ratio_mean"`
	ISRatioMin      float64 `parquet:"is_ratio_min"`
	ISRatioMax      float64 `parquet:"is_ratio_max"`
	ESS             float64 `parquet:"ess"`
	Tokens          int64   `parquet:"tokens"`
	Sequences       int32   `parquet:"sequences"`
	TokensPerSecond float64 `parquet:"tokens_per_second"`
}

// Replay is one row of the replay table: one stored rollout run again
// (legorl audit --replay) with its recorded completions served in place of
// the model, and what the replay found against the stored row. Columns
// without a prefix are the stored rollout's; replayed_* are the replay's.
type Replay struct {
	RunID     string `parquet:"run_id"`
	Iteration int32  `parquet:"iteration"`
	RolloutID string `parquet:"rollout_id"`
	TaskID    string `parquet:"task_id"`
	Harness   string `parquet:"harness"`
	JobID     string `parquet:"job_id"` // the replay job; a rollout replayed twice has two rows
	// Reproduced: the prompts, the diff, the reward, the termination, the
	// turns and the tool calls all matched.
	Reproduced bool     `parquet:"reproduced"`
	Mismatch   Mismatch `parquet:"mismatch"` // the first kind of difference; "" when reproduced
	Detail     string   `parquet:"detail"`   // one line: what differed
	// DivergentCall and DivergentToken locate a prompt divergence: the
	// harness's call (0-based) and the first prompt position that differs;
	// -1 otherwise.
	DivergentCall  int32 `parquet:"divergent_call"`
	DivergentToken int32 `parquet:"divergent_token"`
	// CallsRecorded is the calls the segments hold; CallsServed how many
	// of them the replayed harness asked for with the recorded prompt.
	CallsRecorded       int32       `parquet:"calls_recorded"`
	CallsServed         int32       `parquet:"calls_served"`
	Reward              float64     `parquet:"reward"`
	ReplayedReward      float64     `parquet:"replayed_reward"`
	Termination         Termination `parquet:"termination"`
	ReplayedTermination Termination `parquet:"replayed_termination"`
	NumTurns            int32       `parquet:"num_turns"`
	ReplayedNumTurns    int32       `parquet:"replayed_num_turns"`
	NumToolCalls        int32       `parquet:"num_tool_calls"`
	ReplayedToolCalls   int32       `parquet:"replayed_num_tool_calls"`
	DiffBytes           int64       `parquet:"diff_bytes"`
	ReplayedDiffBytes   int64       `parquet:"replayed_diff_bytes"`
	// DiffSHA256 is the stored rollout's diff hash ("" for a rollout
	// recorded before rollouts carried one: its diff is compared by size).
	DiffSHA256         string  `parquet:"diff_sha256"`
	ReplayedDiffSHA256 string  `parquet:"replayed_diff_sha256"`
	Seconds            float64 `parquet:"seconds"`        // wall-clock seconds of the replay
	ReplayedAtMs       int64   `parquet:"replayed_at_ms"` // Unix milliseconds
}
