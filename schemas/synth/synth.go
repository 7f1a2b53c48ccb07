// Package synth makes synthetic, valid rows of every table, shaped like real
// runs (multi-turn segments with interleaved observation tokens, MoE routing,
// masked rollouts), for tests, benchmarks and the foundation demo.
//
// The rows are random: they are not training data and no model produced them.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/legorl/legorl/schemas"
)

// Config sizes a synthetic run. Zero fields take the defaults in Defaults.
type Config struct {
	RunID        string
	Seed         uint64
	Iterations   int // defaults to 2
	Tasks        int // tasks per iteration; defaults to 4
	GroupSize    int // rollouts per task; defaults to 4
	Turns        int // LLM calls per rollout; defaults to 4
	PromptTokens int // first prompt length; defaults to 512
	TurnTokens   int // sampled tokens per call; defaults to 128
	ObsTokens    int // observation tokens between calls; defaults to 96
	VocabSize    int // defaults to 151936 (Qwen3)
	MoELayers    int // 0: dense model, no routing; defaults to 0
	TopK         int // experts per token when MoELayers > 0; defaults to 8
	Experts      int // experts per layer; defaults to 128
}

// Defaults fills zero fields.
func (c Config) Defaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.RunID == "" {
		c.RunID = "synthetic"
	}
	def(&c.Iterations, 2)
	def(&c.Tasks, 4)
	def(&c.GroupSize, 4)
	def(&c.Turns, 4)
	def(&c.PromptTokens, 512)
	def(&c.TurnTokens, 128)
	def(&c.ObsTokens, 96)
	def(&c.VocabSize, 151936)
	def(&c.TopK, 8)
	def(&c.Experts, 128)
	return c
}

// Iteration holds the rows of one synthetic iteration.
type Iteration struct {
	Rollouts   []schemas.Rollout
	Segments   []schemas.Segment
	Steps      []schemas.Step
	TrainSteps []schemas.TrainStep
	// Replays replay every scored rollout once, drawn without the random
	// source (adding them changed no other row): every fifth is a
	// mismatch, of each kind in turn.
	Replays []schemas.Replay
}

// Run makes every iteration of a synthetic run. The same config gives the
// same rows.
func Run(c Config) []Iteration {
	c = c.Defaults()
	rng := rand.New(rand.NewPCG(c.Seed, 0x1e60))
	out := make([]Iteration, c.Iterations)
	for it := range out {
		out[it] = iteration(c, rng, it)
	}
	return out
}

func iteration(c Config, rng *rand.Rand, it int) Iteration {
	var out Iteration
	terms := schemas.Terminations()
	for task := 0; task < c.Tasks; task++ {
		taskID := fmt.Sprintf("synth__task-%03d", task)
		group := fmt.Sprintf("%s/%d/%s", c.RunID, it, taskID)
		// Easier tasks and later iterations solve more often.
		pSolve := math.Min(0.9, 0.2+0.1*float64(task%4)+0.1*float64(it))
		for g := 0; g < c.GroupSize; g++ {
			id := fmt.Sprintf("%s-i%d-t%03d-g%d", c.RunID, it, task, g)
			term := schemas.TerminationAgentCompleted
			if r := rng.Float64(); r < 0.1 {
				term = terms[2+rng.IntN(len(terms)-2)] // an infrastructure failure
			} else if r < 0.2 {
				term = schemas.TerminationMaxTurns
			}
			r := schemas.Rollout{
				RunID: c.RunID, Iteration: int32(it), TaskID: taskID, GroupID: group,
				RolloutID: id, Harness: []string{"bash", "tools"}[g%2], PolicyVersion: int64(it),
				Seed: rng.Int64(), Termination: term, Status: term.Status(),
				NumTurns: int32(c.Turns), NumLLMCalls: int32(c.Turns), NumToolCalls: int32(c.Turns - 1),
				SetupSeconds: 0.05 + rng.Float64()*0.1, AgentSeconds: 5 + rng.Float64()*20,
				LLMSeconds: 3 + rng.Float64()*10, ToolsSeconds: rng.Float64() * 5, GradeSeconds: 0.5 + rng.Float64(),
				DiffBytes: int64(rng.IntN(4000)), StartedAtMs: 1_780_000_000_000 + int64(it)*600_000 + int64(task*c.GroupSize+g)*1000,
				F2PPassed: []string{}, F2PFailed: []string{}, P2PPassed: []string{"tests/test_ok.py::test_base"}, P2PFailed: []string{},
				Flags: []string{},
			}
			if r.Status == schemas.StatusMasked {
				r.Error = "synthetic " + string(term)
			} else if term == schemas.TerminationAgentCompleted && rng.Float64() < pSolve {
				r.Reward = 1
				r.F2PPassed = []string{"tests/test_bug.py::test_fix"}
			} else {
				r.F2PFailed = []string{"tests/test_bug.py::test_fix"}
			}
			if rng.Float64() < 0.05 {
				r.ToolParseFailures = 1
			}
			out.Rollouts = append(out.Rollouts, r)
			out.Segments = append(out.Segments, segment(c, rng, r))
			for turn := 0; turn < c.Turns; turn++ {
				tool := []string{"bash", "str_replace", "view", "submit"}[turn%4]
				out.Steps = append(out.Steps, schemas.Step{
					RunID: c.RunID, Iteration: int32(it), RolloutID: id, Turn: int32(turn),
					ToolName: tool, Arguments: fmt.Sprintf(`{"command":"step %d"}`, turn),
					ObservationBytes: int64(rng.IntN(8000)), ExitCode: int32(rng.IntN(2)),
					Seconds: rng.Float64() * 3,
				})
			}
		}
	}
	for step := 0; step < 2; step++ {
		out.TrainSteps = append(out.TrainSteps, schemas.TrainStep{
			RunID: c.RunID, Iteration: int32(it), Step: int32(step), PolicyVersion: int64(it),
			Loss: 0.1 * rng.NormFloat64(), GradNorm: 0.5 + rng.Float64(), LR: 1e-6,
			ClipFraction: 0.02 * rng.Float64(), Entropy: 0.8 + 0.1*rng.Float64(), KL: 1e-3 * rng.Float64(),
			LogprobPearson: 0.995 + 0.004*rng.Float64(), LogprobSpearman: 0.99 + 0.009*rng.Float64(),
			LogprobMeanAbsDiff: 0.01 * rng.Float64(), LogprobMaxAbsDiff: 0.2 * rng.Float64(),
			ISRatioMean: 1, ISRatioMin: 0.8, ISRatioMax: 1.3, ESS: 0.95,
			Tokens: int64(len(out.Segments) * (c.Turns * (c.TurnTokens + c.ObsTokens))), Sequences: int32(len(out.Segments)),
			TokensPerSecond: 1000 + 100*rng.Float64(),
		})
	}
	out.Replays = replays(out.Rollouts)
	return out
}

// replays makes the replay rows of an iteration's scored rollouts.
func replays(rs []schemas.Rollout) []schemas.Replay {
	var out []schemas.Replay
	kinds := schemas.Mismatches()
	for i, r := range rs {
		if r.Status != schemas.StatusCompleted {
			continue
		}
		p := schemas.Replay{
			RunID: r.RunID, Iteration: r.Iteration, RolloutID: r.RolloutID, TaskID: r.TaskID, Harness: r.Harness,
			JobID: "synth-replay", Reproduced: true, DivergentCall: -1, DivergentToken: -1,
			CallsRecorded: r.NumLLMCalls, CallsServed: r.NumLLMCalls,
			Reward: r.Reward, ReplayedReward: r.Reward, Termination: r.Termination, ReplayedTermination: r.Termination,
			NumTurns: r.NumTurns, ReplayedNumTurns: r.NumTurns, NumToolCalls: r.NumToolCalls, ReplayedToolCalls: r.NumToolCalls,
			DiffBytes: r.DiffBytes, ReplayedDiffBytes: r.DiffBytes,
			DiffSHA256: fmt.Sprintf("%064x", r.DiffBytes), ReplayedDiffSHA256: fmt.Sprintf("%064x", r.DiffBytes),
			Seconds: 1 + float64(i%7)/10, ReplayedAtMs: r.StartedAtMs + 86_400_000,
		}
		if i%5 == 4 {
			p.Reproduced, p.Mismatch = false, kinds[(i/5)%len(kinds)]
			p.Detail = "synthetic " + string(p.Mismatch) + " mismatch"
			switch p.Mismatch {
			case schemas.MismatchPrompt:
				p.DivergentCall, p.DivergentToken, p.CallsServed = 1, 40, 1
			case schemas.MismatchDiff:
				p.ReplayedDiffBytes++
				p.ReplayedDiffSHA256 = fmt.Sprintf("%064x", p.ReplayedDiffBytes)
			case schemas.MismatchReward:
				p.ReplayedReward = 1 - p.Reward
			case schemas.MismatchOutcome:
				p.ReplayedNumTurns++
			}
		}
		out = append(out, p)
	}
	return out
}

// segment makes one segment: a prompt, then Turns sampled completions with
// observation tokens between them.
func segment(c Config, rng *rand.Rand, r schemas.Rollout) schemas.Segment {
	s := schemas.Segment{
		RunID: r.RunID, Iteration: r.Iteration, RolloutID: r.RolloutID,
		FirstCall: 0, LastCall: int32(c.Turns - 1), PolicyVersion: r.PolicyVersion,
		FinishReason: "stop", Temperature: 1, TopP: 1,
	}
	tok := func() int32 { return int32(rng.IntN(c.VocabSize)) }
	s.PromptTokenIDs = make([]int32, c.PromptTokens)
	for i := range s.PromptTokenIDs {
		s.PromptTokenIDs[i] = tok()
	}
	n := c.Turns*c.TurnTokens + (c.Turns-1)*c.ObsTokens
	s.CompletionTokenIDs = make([]int32, 0, n)
	s.LossMask = make([]int8, 0, n)
	s.Logprobs = make([]float32, 0, n)
	s.PolicyVersions = make([]int64, 0, n)
	for turn := 0; turn < c.Turns; turn++ {
		if turn > 0 {
			for i := 0; i < c.ObsTokens; i++ {
				s.CompletionTokenIDs = append(s.CompletionTokenIDs, tok())
				s.LossMask = append(s.LossMask, 0)
				s.Logprobs = append(s.Logprobs, 0)
				s.PolicyVersions = append(s.PolicyVersions, 0)
			}
		}
		for i := 0; i < c.TurnTokens; i++ {
			s.CompletionTokenIDs = append(s.CompletionTokenIDs, tok())
			s.LossMask = append(s.LossMask, 1)
			// Peaked like a real policy: most tokens near 0, a long tail.
			s.Logprobs = append(s.Logprobs, -float32(rng.ExpFloat64()*0.4))
			s.PolicyVersions = append(s.PolicyVersions, s.PolicyVersion)
		}
	}
	if c.MoELayers > 0 {
		tokens := len(s.PromptTokenIDs) + len(s.CompletionTokenIDs)
		s.RoutingExperts = make([]int16, tokens*c.MoELayers*c.TopK)
		for i := range s.RoutingExperts {
			s.RoutingExperts[i] = int16(rng.IntN(c.Experts))
		}
		s.RoutingLayers, s.RoutingTopK = int32(c.MoELayers), int32(c.TopK)
	}
	return s
}
