package schemas_test

import (
	"errors"
	"math"
	"testing"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
)

const vocab = 1000

func goodSegment() schemas.Segment {
	return schemas.Segment{
		RunID: "r", RolloutID: "r-0", SegmentIndex: 0, FirstCall: 0, LastCall: 1,
		PromptTokenIDs:     []int32{1, 2, 3},
		CompletionTokenIDs: []int32{4, 5, 6, 7},
		LossMask:           []int8{1, 1, 0, 1},
		PolicyVersions:     []int64{3, 3, 0, 4},
		Logprobs:           []float32{-0.5, -0.01, 0, -2},
		RoutingExperts:     make([]int16, 7*2*2), // 7 tokens x 2 layers x top-2
		RoutingLayers:      2, RoutingTopK: 2,
		Temperature: 1, TopP: 1,
	}
}

func TestSegmentValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*schemas.Segment)
		want   error
	}{
		{"valid", func(*schemas.Segment) {}, nil},
		{"dense model without routing", func(s *schemas.Segment) { s.RoutingExperts, s.RoutingLayers, s.RoutingTopK = nil, 0, 0 }, nil},
		{"logprobs shorter than completion", func(s *schemas.Segment) { s.Logprobs = s.Logprobs[:3] }, schemas.ErrLogprobLength},
		{"logprobs longer than completion", func(s *schemas.Segment) { s.Logprobs = append(s.Logprobs, -1) }, schemas.ErrLogprobLength},
		{"NaN logprob", func(s *schemas.Segment) { s.Logprobs[1] = float32(math.NaN()) }, schemas.ErrNonFiniteLogprob},
		{"-Inf logprob", func(s *schemas.Segment) { s.Logprobs[0] = float32(math.Inf(-1)) }, schemas.ErrNonFiniteLogprob},
		{"+Inf logprob", func(s *schemas.Segment) { s.Logprobs[0] = float32(math.Inf(1)) }, schemas.ErrNonFiniteLogprob},
		{"positive logprob", func(s *schemas.Segment) { s.Logprobs[3] = 0.1 }, schemas.ErrPositiveLogprob},
		{"negative prompt token", func(s *schemas.Segment) { s.PromptTokenIDs[0] = -1 }, schemas.ErrTokenRange},
		{"completion token == vocab", func(s *schemas.Segment) { s.CompletionTokenIDs[2] = vocab }, schemas.ErrTokenRange},
		{"completion token > vocab", func(s *schemas.Segment) { s.CompletionTokenIDs[2] = vocab + 7 }, schemas.ErrTokenRange},
		{"loss mask short", func(s *schemas.Segment) { s.LossMask = s.LossMask[:2] }, schemas.ErrLossMaskLength},
		{"loss mask value 2", func(s *schemas.Segment) { s.LossMask[0] = 2 }, schemas.ErrLossMaskValue},
		{"policy versions short", func(s *schemas.Segment) { s.PolicyVersions = s.PolicyVersions[:3] }, schemas.ErrVersionLength},
		{"routing too short", func(s *schemas.Segment) { s.RoutingExperts = s.RoutingExperts[:27] }, schemas.ErrRoutingShape},
		{"routing without shape", func(s *schemas.Segment) { s.RoutingLayers = 0 }, schemas.ErrRoutingShape},
		{"negative expert", func(s *schemas.Segment) { s.RoutingExperts[5] = -3 }, schemas.ErrRoutingShape},
		{"missing rollout id", func(s *schemas.Segment) { s.RolloutID = "" }, schemas.ErrEmpty},
		{"last call before first", func(s *schemas.Segment) { s.FirstCall = 2 }, schemas.ErrNegativeCount},
		{"top_p zero", func(s *schemas.Segment) { s.TopP = 0 }, schemas.ErrSampling},
		{"NaN temperature", func(s *schemas.Segment) { s.Temperature = float32(math.NaN()) }, schemas.ErrSampling},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := goodSegment()
			tt.mutate(&s)
			err := s.Validate(vocab)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate: got %v, want %v", err, tt.want)
			}
		})
	}
}

func goodRollout() schemas.Rollout {
	return schemas.Rollout{
		RunID: "r", TaskID: "t", GroupID: "g", RolloutID: "r-0", Harness: "bash",
		Status: schemas.StatusCompleted, Termination: schemas.TerminationAgentCompleted, Reward: 1,
	}
}

func TestRolloutValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*schemas.Rollout)
		want   error
	}{
		{"valid", func(*schemas.Rollout) {}, nil},
		{"max turns is scored", func(r *schemas.Rollout) { r.Termination, r.Reward = schemas.TerminationMaxTurns, 0 }, nil},
		{"timeout is masked", func(r *schemas.Rollout) { r.Termination, r.Status = schemas.TerminationTimeout, schemas.StatusMasked }, nil},
		{"unknown termination", func(r *schemas.Rollout) { r.Termination = "crashed" }, schemas.ErrUnknownTermination},
		{"unknown status", func(r *schemas.Rollout) { r.Status = "done" }, schemas.ErrUnknownStatus},
		{"infra failure scored as completed", func(r *schemas.Rollout) { r.Termination = schemas.TerminationSandboxCrash }, schemas.ErrStatusMismatch},
		{"agent completion masked", func(r *schemas.Rollout) { r.Status = schemas.StatusMasked }, schemas.ErrStatusMismatch},
		{"reward above 1", func(r *schemas.Rollout) { r.Reward = 1.5 }, schemas.ErrReward},
		{"NaN reward", func(r *schemas.Rollout) { r.Reward = math.NaN() }, schemas.ErrReward},
		{"negative turns", func(r *schemas.Rollout) { r.NumTurns = -1 }, schemas.ErrNegativeCount},
		{"missing harness", func(r *schemas.Rollout) { r.Harness = "" }, schemas.ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := goodRollout()
			tt.mutate(&r)
			err := r.Validate()
			if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Validate: got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestTerminationStatus(t *testing.T) {
	masked := 0
	for _, term := range schemas.Terminations() {
		if !term.Valid() {
			t.Errorf("%s not valid", term)
		}
		if term.Status() == schemas.StatusMasked {
			masked++
		}
	}
	// Everything but agent_completed and max_turns is an infrastructure failure.
	if want := len(schemas.Terminations()) - 2; masked != want {
		t.Fatalf("%d masked terminations, want %d", masked, want)
	}
	if schemas.Termination("").Valid() {
		t.Fatal("empty termination is valid")
	}
}

func TestStepAndTrainStepValidate(t *testing.T) {
	st := schemas.Step{RunID: "r", RolloutID: "x", Turn: 1}
	if err := st.Validate(); err != nil {
		t.Fatal(err)
	}
	st.Turn = -1
	if err := st.Validate(); !errors.Is(err, schemas.ErrNegativeCount) {
		t.Fatalf("got %v", err)
	}
	ts := schemas.TrainStep{RunID: "r", Loss: 0.1}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	ts.Loss = math.NaN()
	if err := ts.Validate(); err == nil {
		t.Fatal("NaN loss accepted")
	}
}

func TestSynthRowsAreValid(t *testing.T) {
	for _, moe := range []int{0, 3} {
		its := synth.Run(synth.Config{RunID: "r", MoELayers: moe, PromptTokens: 16, TurnTokens: 8, ObsTokens: 4})
		cfg := synth.Config{}.Defaults()
		for _, it := range its {
			for i := range it.Rollouts {
				if err := it.Rollouts[i].Validate(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range it.Segments {
				if err := it.Segments[i].Validate(cfg.VocabSize); err != nil {
					t.Fatal(err)
				}
				if r, _ := it.Segments[i].Routes(); r.Empty() != (moe == 0) {
					t.Fatalf("moe=%d: routes empty=%v", moe, r.Empty())
				}
			}
			for i := range it.Steps {
				if err := it.Steps[i].Validate(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range it.TrainSteps {
				if err := it.TrainSteps[i].Validate(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range it.Replays {
				if err := it.Replays[i].Validate(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestReplayValidate(t *testing.T) {
	ok := schemas.Replay{RunID: "r", RolloutID: "x", TaskID: "t", JobID: "j", Reproduced: true, DivergentCall: -1, DivergentToken: -1, Reward: 1, ReplayedReward: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*schemas.Replay)
		want error
	}{
		{"no job", func(r *schemas.Replay) { r.JobID = "" }, schemas.ErrEmpty},
		{"reproduced with a mismatch", func(r *schemas.Replay) { r.Mismatch = schemas.MismatchDiff }, schemas.ErrUnknownMismatch},
		{"not reproduced without one", func(r *schemas.Replay) { r.Reproduced = false }, schemas.ErrUnknownMismatch},
		{"unknown kind", func(r *schemas.Replay) { r.Reproduced, r.Mismatch = false, "clock" }, schemas.ErrUnknownMismatch},
		{"reward", func(r *schemas.Replay) { r.ReplayedReward = 2 }, schemas.ErrReward},
		{"served", func(r *schemas.Replay) { r.CallsServed = -1 }, schemas.ErrNegativeCount},
		{"divergent token", func(r *schemas.Replay) { r.DivergentToken = -2 }, schemas.ErrNegativeCount},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ok
			c.edit(&r)
			if err := r.Validate(); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}
