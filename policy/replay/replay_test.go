package replay

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/schemas"
)

const stop = 9

// segments are a rollout of three main-thread calls in two segments (the
// second a fork) and one side request, recorded as the proxy does.
func segments() []schemas.Segment {
	return []schemas.Segment{
		{RolloutID: "r", SegmentIndex: 0, FirstCall: 0, LastCall: 1, PromptTokenIDs: []int32{1, 2, 3},
			CompletionTokenIDs: []int32{4, 5, stop, 6, 7, 8, stop},
			LossMask:           []int8{1, 1, 1, 0, 0, 1, 1},
			Logprobs:           []float32{-.1, -.2, -.3, 0, 0, -.4, -.5},
			PolicyVersions:     []int64{3, 3, 3, 0, 0, 4, 4},
			FinishReason:       infer.FinishStop},
		{RolloutID: "r", SegmentIndex: 2, FirstCall: 3, LastCall: 3, PromptTokenIDs: []int32{1, 2, 7},
			CompletionTokenIDs: []int32{5, 5}, LossMask: []int8{1, 1}, Logprobs: []float32{-1, -2},
			PolicyVersions: []int64{4, 4}, FinishReason: infer.FinishLength},
		{RolloutID: "r", SegmentIndex: 1, FirstCall: 2, LastCall: 2, PromptTokenIDs: []int32{11},
			CompletionTokenIDs: []int32{12, stop}, LossMask: []int8{1, 1}, Logprobs: []float32{-1, -1},
			PolicyVersions: []int64{4, 4}, FinishReason: infer.FinishStop},
	}
}

func TestCalls(t *testing.T) {
	calls, err := Calls(segments())
	if err != nil {
		t.Fatal(err)
	}
	want := []Call{
		{Segment: 0, Prompt: []int32{1, 2, 3}, Tokens: []int32{4, 5, stop}, Logprobs: []float32{-.1, -.2, -.3}, Versions: []int64{3, 3, 3}},
		{Segment: 0, Prompt: []int32{1, 2, 3, 4, 5, stop, 6, 7}, Tokens: []int32{8, stop}, Logprobs: []float32{-.4, -.5}, Versions: []int64{4, 4}, Finish: infer.FinishStop},
		{Segment: 1, Prompt: []int32{11}, Tokens: []int32{12, stop}, Logprobs: []float32{-1, -1}, Versions: []int64{4, 4}, Finish: infer.FinishStop},
		{Segment: 2, Prompt: []int32{1, 2, 7}, Tokens: []int32{5, 5}, Logprobs: []float32{-1, -2}, Versions: []int64{4, 4}, Finish: infer.FinishLength},
	}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls\n got %+v\nwant %+v", calls, want)
	}
	for _, c := range []struct {
		name string
		edit func(*schemas.Segment)
	}{
		{"no sampled token", func(s *schemas.Segment) { s.LossMask = []int8{0, 0} }},
		{"mask length", func(s *schemas.Segment) { s.LossMask = []int8{1} }},
		{"no prompt", func(s *schemas.Segment) { s.PromptTokenIDs = nil }},
		{"routing shape", func(s *schemas.Segment) { s.RoutingExperts, s.RoutingLayers, s.RoutingTopK = []int16{1}, 1, 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			segs := segments()
			c.edit(&segs[1])
			if _, err := Calls(segs); !errors.Is(err, ErrSegments) {
				t.Fatalf("got %v, want ErrSegments", err)
			}
		})
	}
}

// TestCallsRouting: an MoE segment's routes are split between the calls'
// prompts and completions.
func TestCallsRouting(t *testing.T) {
	s := schemas.Segment{RolloutID: "m", PromptTokenIDs: []int32{1, 2}, CompletionTokenIDs: []int32{3, 4, 5},
		LossMask: []int8{1, 0, 1}, Logprobs: []float32{-1, 0, -1}}
	routes := make([][][]int16, 5)
	for i := range routes {
		routes[i] = [][]int16{{int16(i), 10}, {int16(i), 20}} // 2 layers, k 2
	}
	if err := s.SetRoutes(routes); err != nil {
		t.Fatal(err)
	}
	calls, err := Calls([]schemas.Segment{s})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || !reflect.DeepEqual(calls[1].PromptRouting, routes[:4]) || !reflect.DeepEqual(calls[1].Routing, routes[4:]) ||
		!reflect.DeepEqual(calls[0].PromptRouting, routes[:2]) || !reflect.DeepEqual(calls[0].Routing, routes[2:3]) {
		t.Fatalf("calls %+v", calls)
	}
}

func TestGenerate(t *testing.T) {
	ctx := context.Background()
	e := New()
	if err := e.Add("r", segments()); err != nil {
		t.Fatal(err)
	}
	gen := func(session string, prompt ...int32) (infer.Generation, []int32, error) {
		var streamed []int32
		g, err := e.Generate(ctx, infer.Request{Session: session, Prompt: prompt, StopTokens: []int32{stop}},
			func(tk infer.Token) { streamed = append(streamed, tk.ID) })
		return g, streamed, err
	}
	g, streamed, err := gen("r", 1, 2, 3)
	if err != nil || !reflect.DeepEqual(g.Tokens, []int32{4, 5, stop}) || !reflect.DeepEqual(streamed, g.Tokens) || g.Finish != infer.FinishStop {
		t.Fatalf("first call: %+v %v %v", g, streamed, err)
	}
	// The side request out of recorded order, on its own session.
	if g, _, err = gen("r/side", 11); err != nil || !reflect.DeepEqual(g.Tokens, []int32{12, stop}) {
		t.Fatalf("side call: %+v %v", g, err)
	}
	if g, _, err = gen("r", 1, 2, 3, 4, 5, stop, 6, 7); err != nil || !reflect.DeepEqual(g.Logprobs, []float32{-.4, -.5}) {
		t.Fatalf("second call: %+v %v", g, err)
	}
	// The fork's prompt differs at position 2.
	_, _, err = gen("r", 1, 2, 8, 9)
	if !errors.Is(err, ErrDiverged) || !errors.Is(err, infer.ErrInput) {
		t.Fatalf("diverged call: %v", err)
	}
	if _, _, err = gen("nobody", 1); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown session: %v", err)
	}
	rep, ok := e.Done("r")
	want := Report{Calls: 4, Served: 3, Requests: 4,
		Divergence: &Divergence{Call: 3, Segment: 2, Token: 2, Want: 7, Got: 8, WantLen: 3, GotLen: 4}}
	if !ok || !reflect.DeepEqual(rep, want) {
		t.Fatalf("report %+v, want %+v", rep, want)
	}
	if _, ok := e.Done("r"); ok {
		t.Fatal("Done twice")
	}
}

// TestGenerateExtra: a call past the recorded ones diverges with no
// recorded prompt to compare; a length-cut last call finishes "length".
func TestGenerateExtra(t *testing.T) {
	e := New()
	segs := segments()[2:]
	if err := e.Add("x", segs); err != nil {
		t.Fatal(err)
	}
	g, err := e.Generate(context.Background(), infer.Request{Session: "x", Prompt: []int32{11}}, func(infer.Token) {})
	if err != nil || g.Finish != infer.FinishStop {
		t.Fatalf("%+v %v", g, err)
	}
	if _, err := e.Generate(context.Background(), infer.Request{Session: "x", Prompt: []int32{11, 12, stop, 3}}, func(infer.Token) {}); !errors.Is(err, ErrDiverged) {
		t.Fatal(err)
	}
	rep, _ := e.Done("x")
	if d := rep.Divergence; d == nil || d.Segment != -1 || d.Call != 1 || d.GotLen != 4 {
		t.Fatalf("%+v", rep)
	}
	if err := New().Add("y", nil); !errors.Is(err, ErrSegments) {
		t.Fatalf("no segments: %v", err)
	}
}
