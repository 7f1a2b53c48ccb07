// Package replay is an engine that samples nothing: it serves, call by
// call, the completions a rollout recorded in its segments, so that a
// harness can be run again on the same task with the same model output
// (the rollout audit, loop/replay). It implements the generation contract
// (policy/infer) beside the local engine and the remote adapters, and sits
// behind the proxy like them.
//
// Every request must carry exactly the prompt token ids the recorded call
// had: the harness must render the same conversation. When it does not,
// the engine keeps the first divergence (the call, the prompt position
// and the two token ids there) and refuses the call with ErrDiverged; the
// proxy answers the harness with an API error, and the rollout ends.
//
// The calls of a rollout are read from its segments: a segment's first
// call has the segment's prompt; each later call's prompt is the prompt
// plus the completion up to that call's sampled tokens, which are a run of
// loss-mask-1 tokens. A call whose prompt extended the previous call's
// text with no new token (never the case with chat templates, whose next
// prompt opens a new turn) is read as one call.
package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/schemas"
)

// Sentinel errors. Each wraps infer.ErrInput, so the proxy answers the
// harness with a well-formed 400.
var (
	// ErrDiverged: a request's prompt is not the recorded prompt of any
	// call left to serve.
	ErrDiverged = fmt.Errorf("%w: replay: the prompt diverged from the recorded one", infer.ErrInput)
	// ErrUnknown: a request's session is no rollout Add was given.
	ErrUnknown = fmt.Errorf("%w: replay: no recorded rollout for this session", infer.ErrInput)
	// ErrSegments: segments that do not describe calls (Calls).
	ErrSegments = errors.New("replay: bad segments")
)

// Call is one recorded call: the prompt the engine was given and what it
// generated.
type Call struct {
	// Segment is the segment the call was recorded in.
	Segment int32
	Prompt  []int32
	// Tokens, Logprobs and Versions have one entry per sampled token.
	Tokens   []int32
	Logprobs []float32
	Versions []int64
	// PromptRouting and Routing are the MoE routes of the prompt's and
	// the completion's tokens, [tokens][layers][k]; nil for a dense model.
	PromptRouting, Routing [][][]int16
	// Finish is the recorded finish reason of the segment's last call;
	// "" for the others (Generate tells stop from length by the last
	// token).
	Finish string
}

// Calls reads the calls of one rollout from its segments, in the order
// they were recorded: by segment index, then by position in the segment.
func Calls(segs []schemas.Segment) ([]Call, error) {
	segs = slices.Clone(segs)
	slices.SortFunc(segs, func(a, b schemas.Segment) int { return int(a.SegmentIndex) - int(b.SegmentIndex) })
	var calls []Call
	for i := range segs {
		s := &segs[i]
		n := len(s.CompletionTokenIDs)
		if len(s.PromptTokenIDs) == 0 || len(s.LossMask) != n || len(s.Logprobs) != n || (len(s.PolicyVersions) != 0 && len(s.PolicyVersions) != n) {
			return nil, fmt.Errorf("%w: rollout %s segment %d: %d prompt ids, %d completion ids, %d mask, %d logprobs, %d versions",
				ErrSegments, s.RolloutID, s.SegmentIndex, len(s.PromptTokenIDs), n, len(s.LossMask), len(s.Logprobs), len(s.PolicyVersions))
		}
		routes, err := s.Routes()
		if err != nil {
			return nil, fmt.Errorf("%w: rollout %s segment %d: %w", ErrSegments, s.RolloutID, s.SegmentIndex, err)
		}
		first := len(calls)
		for at := 0; at < n; {
			if s.LossMask[at] != 1 {
				at++
				continue
			}
			end := at
			for end < n && s.LossMask[end] == 1 {
				end++
			}
			p := len(s.PromptTokenIDs) + at
			c := Call{Segment: s.SegmentIndex,
				Prompt:   append(slices.Clip(s.PromptTokenIDs), s.CompletionTokenIDs[:at]...),
				Tokens:   slices.Clone(s.CompletionTokenIDs[at:end]),
				Logprobs: slices.Clone(s.Logprobs[at:end]),
			}
			if len(s.PolicyVersions) == n {
				c.Versions = slices.Clone(s.PolicyVersions[at:end])
			}
			if !routes.Empty() {
				c.PromptRouting = view(routes, 0, p)
				c.Routing = view(routes, p, len(s.PromptTokenIDs)+end)
			}
			calls = append(calls, c)
			at = end
		}
		if len(calls) == first {
			return nil, fmt.Errorf("%w: rollout %s segment %d has no sampled token", ErrSegments, s.RolloutID, s.SegmentIndex)
		}
		calls[len(calls)-1].Finish = s.FinishReason
	}
	return calls, nil
}

// view returns tokens [from, to) of routes as [tokens][layers][k].
func view(r schemas.Routes, from, to int) [][][]int16 {
	out := make([][][]int16, 0, to-from)
	for t := from; t < to; t++ {
		layers := make([][]int16, r.Layers)
		for l := range layers {
			layers[l] = r.At(t, l)
		}
		out = append(out, layers)
	}
	return out
}

// Divergence is where a replayed harness first asked for something the
// recorded rollout did not.
type Divergence struct {
	// Call is the index of the call, in the order the harness made them
	// (0 is the first).
	Call int
	// Segment is the recorded segment of the call the request was
	// compared with; -1 when every recorded call was served already.
	Segment int32
	// Token is the first prompt position where the two differ (the
	// shorter length when one is a prefix of the other).
	Token int
	// Want and Got are the recorded and requested ids at Token; -1 past
	// the end of a prompt.
	Want, Got int32
	// WantLen and GotLen are the two prompts' lengths.
	WantLen, GotLen int
}

func (d Divergence) String() string {
	if d.Segment < 0 {
		return fmt.Sprintf("call %d: the harness asked for a call past the %d recorded (a prompt of %d tokens)", d.Call, d.Call, d.GotLen)
	}
	return fmt.Sprintf("call %d (segment %d): prompt token %d is %d, recorded %d (prompt of %d tokens, recorded %d)",
		d.Call, d.Segment, d.Token, d.Got, d.Want, d.GotLen, d.WantLen)
}

// Report is what a rollout's replay served.
type Report struct {
	// Calls is how many calls were recorded, Served how many of them a
	// request asked for with the recorded prompt.
	Calls, Served int
	// Requests counts the harness's requests, served or refused.
	Requests int
	// Divergence is the first divergence; nil when there was none.
	Divergence *Divergence
}

// Engine serves the recorded calls of the rollouts added to it. A
// request's Session names its rollout: the rollout id, or the id followed
// by "/" and a suffix (the proxy's side requests). It is safe for
// concurrent use by the rollouts it serves.
type Engine struct {
	mu       sync.Mutex
	rollouts map[string]*rollout
}

type rollout struct {
	calls    []Call
	served   []bool
	next     int // the first call not served
	requests int
	div      *Divergence
}

// New returns an Engine with no rollout.
func New() *Engine { return &Engine{rollouts: map[string]*rollout{}} }

// Add makes the engine serve the calls of rollout id, read from its
// segments (Calls). An id already added is replaced.
func (e *Engine) Add(id string, segs []schemas.Segment) error {
	calls, err := Calls(segs)
	if err != nil {
		return err
	}
	if len(calls) == 0 {
		return fmt.Errorf("%w: rollout %s has no segments", ErrSegments, id)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rollouts[id] = &rollout{calls: calls, served: make([]bool, len(calls))}
	return nil
}

// Done removes rollout id and returns what its replay served; false when
// it was never added.
func (e *Engine) Done(id string) (Report, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ro, ok := e.rollouts[id]
	if !ok {
		return Report{}, false
	}
	delete(e.rollouts, id)
	served := 0
	for _, s := range ro.served {
		if s {
			served++
		}
	}
	return Report{Calls: len(ro.calls), Served: served, Requests: ro.requests, Divergence: ro.div}, true
}

// lookup returns the rollout a session belongs to.
func (e *Engine) lookup(session string) *rollout {
	if ro, ok := e.rollouts[session]; ok {
		return ro
	}
	for i := strings.LastIndexByte(session, '/'); i > 0; i = strings.LastIndexByte(session[:i], '/') {
		if ro, ok := e.rollouts[session[:i]]; ok {
			return ro
		}
	}
	return nil
}

// Generate serves the recorded call whose prompt is req.Prompt: the next
// one in recorded order, else any call not served yet (side requests
// interleave with the main thread). It streams the recorded tokens to
// emit and returns them with their recorded logprobs, versions and
// routes. A prompt that matches none is a divergence (ErrDiverged).
func (e *Engine) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	if err := ctx.Err(); err != nil {
		return infer.Generation{}, err
	}
	e.mu.Lock()
	ro := e.lookup(req.Session)
	if ro == nil {
		e.mu.Unlock()
		return infer.Generation{}, fmt.Errorf("%w: session %q", ErrUnknown, req.Session)
	}
	call, div := ro.match(req.Prompt)
	e.mu.Unlock()
	if div != nil {
		return infer.Generation{}, fmt.Errorf("%w: %s", ErrDiverged, div)
	}
	gen := infer.Generation{
		Tokens: slices.Clone(call.Tokens), Logprobs: slices.Clone(call.Logprobs), Versions: slices.Clone(call.Versions),
		Routing: call.Routing, PromptRouting: call.PromptRouting, Finish: call.Finish,
		PromptTokens: len(req.Prompt),
	}
	if gen.Finish == "" {
		gen.Finish = infer.FinishLength
		if n := len(gen.Tokens); n > 0 && slices.Contains(req.StopTokens, gen.Tokens[n-1]) {
			gen.Finish = infer.FinishStop
		}
	}
	for i, id := range gen.Tokens {
		t := infer.Token{ID: id, Logprob: gen.Logprobs[i]}
		if i < len(gen.Versions) {
			t.Version = gen.Versions[i]
		}
		if i < len(gen.Routing) {
			t.Routing = gen.Routing[i]
		}
		emit(t)
	}
	return gen, nil
}

// match finds the call to serve for prompt and marks it served, or
// records and returns the divergence. The caller holds the engine's lock.
func (ro *rollout) match(prompt []int32) (*Call, *Divergence) {
	ro.requests++
	call := ro.requests - 1
	for i := ro.next; i < len(ro.calls); i++ {
		if !ro.served[i] && slices.Equal(ro.calls[i].Prompt, prompt) {
			ro.served[i] = true
			for ro.next < len(ro.calls) && ro.served[ro.next] {
				ro.next++
			}
			return &ro.calls[i], nil
		}
	}
	d := &Divergence{Call: call, Segment: -1, Token: -1, Want: -1, Got: -1, GotLen: len(prompt)}
	if ro.next < len(ro.calls) {
		want := ro.calls[ro.next]
		d.Segment, d.WantLen = want.Segment, len(want.Prompt)
		d.Token = min(len(want.Prompt), len(prompt))
		for i := range d.Token {
			if want.Prompt[i] != prompt[i] {
				d.Token = i
				break
			}
		}
		if d.Token < len(want.Prompt) {
			d.Want = want.Prompt[d.Token]
		}
		if d.Token < len(prompt) {
			d.Got = prompt[d.Token]
		}
	}
	if ro.div == nil {
		ro.div = d
	}
	return nil, d
}
