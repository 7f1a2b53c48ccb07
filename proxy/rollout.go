package proxy

import (
	"context"
	"fmt"
	"sync"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/schemas"
)

// RolloutOptions identify a rollout's rows and fix its sampling.
type RolloutOptions struct {
	// RunID and Iteration go into every row. RunID defaults to "default"
	// (rows need one; legorl serve has no run).
	RunID     string
	Iteration int32
	// Seed seeds the rollout: call i samples with a seed derived from Seed
	// and i, so a rollout replayed with the same requests and weights
	// samples the same tokens.
	Seed uint64
	// Sampling is the rollout's sampling (its Seed is ignored). Defaults
	// to the proxy's Options.Sampling.
	Sampling infer.Sampling
}

// Record is what a finished rollout produced.
type Record struct {
	RolloutID string
	// Segments are the rollout's segments in the order they began, main
	// thread and side requests together, ready to write (RunID, Iteration
	// and RolloutID filled).
	Segments []schemas.Segment
	// Info says, for each of Segments, whether it is a side request and
	// why it began.
	Info []SegmentInfo
	// Retries are audit copies of generations a retried call rolled back.
	Retries []Retry
	Metrics Metrics
}

// SegmentInfo describes one segment of a Record. The segments table has no
// column for it: a consumer that trains on the main thread only filters on
// Side here before writing (see docs/ARCHITECTURE.md).
type SegmentInfo struct {
	// Side marks a side request (a title or summary request beside the
	// agent's own conversation).
	Side bool
	// Reason is why the segment began: ReasonFirst, ReasonSide, or a fork
	// reason (ReasonRewrite, ...).
	Reason string
}

// Retry is a generation rolled back because the harness sent the same call
// again (a client timeout, a dropped connection).
type Retry struct {
	Call      int   // the call whose generation was rolled back
	RetriedBy int   // the call that replaced it
	Segment   int32 // the segment it belonged to
	Tokens    []int32
	Logprobs  []float32
	Versions  []int64
	Finish    string
}

// Metrics count what happened in one rollout.
type Metrics struct {
	// Calls is the number of requests that reached generation; Failed
	// how many of them ended in an error.
	Calls, Failed int
	// Forks counts new main-thread segments by reason (the first segment
	// is not a fork).
	Forks map[string]int
	// SideRequests counts calls recorded on side segments.
	SideRequests int
	// Retries counts rolled-back generations.
	Retries int
	// PrefixChecks counts main-thread calls after the first (retries
	// excluded); PrefixConsistent how many of them extended the segment
	// token for token.
	PrefixChecks, PrefixConsistent int
	// ToolCalls counts parsed tool calls; ToolParseFailures completions
	// with tool-call markup that did not parse; ParseFailures every
	// completion the template could not parse (an unclosed <think> too).
	ToolCalls, ToolParseFailures, ParseFailures int
	// StreamMismatches counts streamed replies whose deltas are not a
	// prefix of the final parse (malformed markup; see stream.go).
	StreamMismatches int
	// Overlong: a prompt or generation hit the context limit.
	Overlong bool
	// BadOutput: the engine produced a NaN/Inf/positive logprob or an id
	// outside the vocabulary; BadOutputs counts such generations.
	BadOutput  bool
	BadOutputs int
	// RoutingGaps counts generations whose MoE routing did not cover their
	// tokens; their segment carries no routing.
	RoutingGaps int
	// Panics counts handler panics recovered into 500s.
	Panics int
	// PromptTokens, CompletionTokens and CachedTokens add up the usage of
	// every successful call.
	PromptTokens, CompletionTokens, CachedTokens int
}

// PrefixConsistency is the fraction of main-thread calls that extended
// their segment; 1 when there were none to check.
func (m Metrics) PrefixConsistency() float64 {
	if m.PrefixChecks == 0 {
		return 1
	}
	return float64(m.PrefixConsistent) / float64(m.PrefixChecks)
}

// rollout is the state of one open rollout. Its calls are serialized by
// sem (a one-slot channel, so a waiting request can give up when its
// client goes away); everything below sem is guarded by it.
type rollout struct {
	id       string
	opt      RolloutOptions
	sampling infer.Sampling
	sem      chan struct{}

	closed bool
	calls  int // calls that reached generation, the next call's index
	rec    recorder
	m      Metrics

	// memoMu guards memos, which decode reads before the call's turn
	// comes (and without sem). memos are the last calls' memos, newest
	// first, at most rolloutMemos; Finish and Rotate drop them.
	memoMu sync.Mutex
	memos  []*callMemo
}

// lock waits for the rollout's turn, or for ctx to end.
func (ro *rollout) lock(ctx context.Context) error {
	select {
	case ro.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (ro *rollout) unlock() { <-ro.sem }

// Open starts recording a rollout under id, served at /rollout/<id>/v1.
func (p *Proxy) Open(id string, opt RolloutOptions) error {
	if id == "" {
		return fmt.Errorf("%w: empty rollout id", ErrOptions)
	}
	s := opt.Sampling
	if s == (infer.Sampling{}) {
		s = p.opt.Sampling
	}
	s, err := normalSampling(s)
	if err != nil {
		return fmt.Errorf("rollout %s: %w", id, err)
	}
	if opt.RunID == "" {
		opt.RunID = "default"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.rollouts[id]; ok {
		return fmt.Errorf("%w: %s", ErrRolloutExists, id)
	}
	p.rollouts[id] = newRollout(id, opt, s)
	return nil
}

// newRollout is an open rollout with nothing recorded yet.
func newRollout(id string, opt RolloutOptions, s infer.Sampling) *rollout {
	return &rollout{id: id, opt: opt, sampling: s, sem: make(chan struct{}, 1), rec: newRecorder(),
		m: Metrics{Forks: map[string]int{}}}
}

// end waits for the call in progress, if any, closes ro to later calls and
// returns what it recorded: the common end of Finish and Rotate, which have
// already taken ro out of (or replaced it in) the proxy's table.
func (ro *rollout) end() Record {
	ro.lock(context.Background())
	defer ro.unlock()
	ro.closed = true
	ro.forget()
	return ro.record()
}

// Finish stops serving rollout id and returns what it recorded. It waits
// for the call in progress, if any; later calls get a 404.
func (p *Proxy) Finish(id string) (Record, error) {
	p.mu.Lock()
	ro, ok := p.rollouts[id]
	delete(p.rollouts, id)
	p.mu.Unlock()
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNoRollout, id)
	}
	rec := ro.end()
	if e, ok := p.opt.Generator.(sessionEnder); ok {
		e.EndSession(ro.id)
		e.EndSession(ro.id + sideSession)
	}
	return rec, nil
}

// Rotate ends rollout id and opens a fresh one under the same id in one
// step, so no call falls between them (legorl serve records its default
// rollout this way, periodically). It returns what the old one recorded,
// after the call in progress, if any, has finished; later calls go to the
// new rollout, which keeps the old one's options.
func (p *Proxy) Rotate(id string) (Record, error) {
	p.mu.Lock()
	ro, ok := p.rollouts[id]
	if ok {
		p.rollouts[id] = newRollout(id, ro.opt, ro.sampling)
	}
	p.mu.Unlock()
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNoRollout, id)
	}
	return ro.end(), nil
}

// sessionEnder is implemented by generators that keep a KV cache per
// session (the local engine): Finish frees the rollout's.
type sessionEnder interface{ EndSession(id string) }

// sideSession suffixes the rollout id in the engine session of side
// requests, so that they do not evict the main thread's cache.
const sideSession = "/side"

// lookup returns the open rollout id, nil for none.
func (p *Proxy) lookup(id string) *rollout {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rollouts[id]
}

// lockRollout returns the open rollout id, locked for one call; the caller
// unlocks it. It fails with ErrNoRollout, or ctx's error.
func (p *Proxy) lockRollout(ctx context.Context, id string) (*rollout, error) {
	p.mu.Lock()
	ro, ok := p.rollouts[id]
	p.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoRollout, id)
	}
	if err := ro.lock(ctx); err != nil {
		return nil, err
	}
	if ro.closed { // finished while this call waited
		ro.unlock()
		return nil, fmt.Errorf("%w: %s", ErrNoRollout, id)
	}
	return ro, nil
}

// record builds the rollout's Record.
func (ro *rollout) record() Record {
	rec := Record{RolloutID: ro.id, Retries: ro.rec.retries, Metrics: ro.m}
	rec.Metrics.Forks = make(map[string]int, len(ro.m.Forks))
	for k, v := range ro.m.Forks {
		rec.Metrics.Forks[k] = v
	}
	for _, s := range ro.rec.segs {
		rec.Segments = append(rec.Segments, s.row(ro.opt.RunID, ro.opt.Iteration, ro.id, ro.sampling))
		rec.Info = append(rec.Info, SegmentInfo{Side: s.side, Reason: s.reason})
	}
	return rec
}

// callSeed derives call i's sampling seed from the rollout seed
// (splitmix64 of both), so calls of one rollout never share a seed and
// rollouts with nearby seeds share none either.
func callSeed(seed uint64, call int) uint64 {
	z := seed + 0x9E3779B97F4A7C15*uint64(call+1)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
