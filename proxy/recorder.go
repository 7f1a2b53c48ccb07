package proxy

import (
	"slices"
	"strings"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/schemas"
)

// Why a segment began (SegmentInfo.Reason). A fork is a new main-thread
// segment whose prompt does not extend the previous one.
const (
	// ReasonFirst: the rollout's first main-thread call.
	ReasonFirst = "first"
	// ReasonSide: a side request (see recorder.place).
	ReasonSide = "side"
	// ReasonReasoningDropped: the prompt re-renders history without a
	// <think> block the model generated (a harness that drops
	// reasoning_content, Qwen3's template dropping reasoning before the
	// last user query, or thinking switched off), and differs in nothing
	// else.
	ReasonReasoningDropped = "reasoning_dropped"
	// ReasonSystemChanged: the first turn (system prompt, with Qwen3 the
	// tool list inside it) changed, the tools did not.
	ReasonSystemChanged = "system_changed"
	// ReasonToolsChanged: the tool list changed.
	ReasonToolsChanged = "tools_changed"
	// ReasonCompletionRerendered: history matches up to the last
	// completion, which the harness sent back in another form (tool-call
	// arguments in another JSON spacing, a completion cut by the length
	// limit without its end token, an edited answer).
	ReasonCompletionRerendered = "completion_rerendered"
	// ReasonRewrite: anything else, earlier in the history (condensation,
	// injected reminders, edited messages).
	ReasonRewrite = "rewrite"
)

// callInfo is what the recorder needs to know about one call.
type callInfo struct {
	// Prompt is the call's rendered prompt, generation prompt included.
	Prompt string
	// Tools is a fingerprint of the call's tool list ("" for none).
	Tools string
	// System is the content of the leading system message ("" for none).
	System string
	// Messages counts the non-system messages.
	Messages int
}

// segment is one segment being recorded. Tokens are the prompt's then the
// completion's; text is the rendered prompt plus the completion text, the
// prefix the next call's prompt must have for the segment to grow.
type segment struct {
	index  int32
	side   bool
	reason string

	firstCall, lastCall int
	calls               int

	// ids holds the prompt's ids then the completion's, in one array
	// that grows in place, so that a call extending the segment hands the
	// engine the recorded ids plus its suffix without copying them all;
	// prompt and completion are views of it (setIDs).
	ids        []int32
	prompt     []int32
	completion []int32
	mask       []int8
	logprobs   []float32
	versions   []int64
	// routes has one entry per token (prompt then completion) while the
	// engine reports routing; routesBroken drops it for good when a
	// generation came without.
	routes       [][][]int16
	routesBroken bool
	finish       string

	text string
	// lastPrompt is the last call's rendered prompt, and lastGen how many
	// completion tokens came before its sampled ones: a retry of the call
	// rolls back to there.
	lastPrompt string
	lastGen    int
	tools      string
	system     string
}

// setIDs makes ids the segment's ids; the prompt's length is kept.
func (s *segment) setIDs(ids []int32) {
	n := len(s.prompt)
	s.ids, s.prompt, s.completion = ids, ids[:n:n], ids[n:]
}

// withRoom returns ids with room for n more and then some: the next
// call's suffix goes in place, and the array is copied once per quarter of
// growth rather than on some calls twice.
func withRoom(ids []int32, n int) []int32 {
	if cap(ids)-len(ids) >= n+len(ids)/8 {
		return ids
	}
	return slices.Grow(ids, n+len(ids)/4)
}

// tokens returns the segment's prompt and completion ids as one new slice.
func (s *segment) tokens() []int32 {
	out := make([]int32, 0, len(s.prompt)+len(s.completion))
	return append(append(out, s.prompt...), s.completion...)
}

// recorder turns a rollout's calls into segments. It is pure state: place
// decides where a call goes (and which prompt ids the engine gets) without
// changing anything; commit records the generation. Calls of one rollout
// are serialized, so a place is always followed by its own commit or by
// nothing (a failed generation records nothing).
//
// Tokens are never re-tokenized. A segment keeps its token ids and the text
// they stand for (rendered prompt plus decoded completion); a call whose
// rendered prompt extends that text byte for byte sends the engine the
// recorded ids plus the suffix tokenized alone, so the engine, the segment
// and the trainer see the same ids. Cutting there is clean when the text
// ends with the end token (<|im_end|>, a special token no merge crosses);
// a completion cut by the length limit ends inside a turn, and the next
// prompt closes that turn (and usually drops its reasoning), so it forks
// rather than extends. When it does extend mid-text, the ids differ from
// what tokenizing the whole text would give (a token boundary at the cut),
// which is harmless: they are the ids the model read. Bytes that are not
// UTF-8 reach a JSON client as U+FFFD, so a harness that echoes such a
// completion back forks the segment (completion_rerendered).
type recorder struct {
	segs    []*segment
	main    int   // the main thread's current segment; -1 before the first call
	sides   []int // side segments, oldest first
	retries []Retry
}

func newRecorder() recorder { return recorder{main: -1} }

// placement says where a call goes.
type placement struct {
	// seg is the segment the call extends or retries; -1 for a new one.
	seg    int
	side   bool
	reason string // a new segment's reason
	// retry: the call repeats seg's last call, whose generation is rolled
	// back.
	retry bool
	// promote is a main segment to re-tag as a side request when this
	// call begins the real main thread; -1 for none.
	promote int
	// suffix is the new prompt tokens appended to seg (mask 0) before the
	// generation; for a new segment, nil.
	suffix []int32
	// prompt is the engine's full prompt. For a call that extends or
	// retries seg it shares seg's ids array (the suffix written past the
	// recorded ids, where nothing reads): hand the engine a copy or a
	// slice capped at its length.
	prompt []int32
	call   callInfo
}

// fork reports a new main-thread segment after the first (a metric).
func (pl placement) fork() bool { return pl.seg < 0 && !pl.side && pl.reason != ReasonFirst }

// place decides where call c goes. encode tokenizes rendered text with
// special tokens recognised; it sees only the first prompt of a segment and
// the suffix a later call adds, never history that is already recorded.
//
// In order: a call whose prompt is exactly the last prompt of the main
// thread or of a side segment retries it; a call whose prompt extends a
// segment's text grows it (main thread first); a call with tools after a
// main thread of one tool-less call makes that call a side request and
// begins the real main thread; a call that looks like a side request (no
// tools while the main thread has them, or another system prompt and at
// most two messages) begins a side segment; anything else forks the main
// thread, with a reason from forkReason.
func (r *recorder) place(c callInfo, encode func(string) []int32) placement {
	pl := placement{seg: -1, promote: -1, call: c}
	if r.main < 0 {
		pl.reason, pl.prompt = ReasonFirst, encode(c.Prompt)
		return pl
	}
	threads := append([]int{r.main}, r.sides...)
	for _, i := range threads {
		s := r.segs[i]
		if c.Prompt == s.lastPrompt {
			pl.seg, pl.side, pl.retry = i, s.side, true
			pl.prompt = s.ids[:len(s.prompt)+s.lastGen]
			return pl
		}
	}
	for _, i := range threads {
		s := r.segs[i]
		if rest, ok := strings.CutPrefix(c.Prompt, s.text); ok {
			pl.seg, pl.side = i, s.side
			pl.suffix = encode(rest)
			pl.prompt = append(s.ids, pl.suffix...)
			return pl
		}
	}
	main := r.segs[r.main]
	switch {
	case main.calls == 1 && main.tools == "" && c.Tools != "":
		pl.reason, pl.promote = ReasonFirst, r.main
	case looksSide(c, main):
		pl.side, pl.reason = true, ReasonSide
	default:
		pl.reason = forkReason(main, c)
	}
	pl.prompt = encode(c.Prompt)
	return pl
}

// looksSide reports whether c, which does not extend the main thread,
// looks like a side request rather than a rewrite of the main thread.
func looksSide(c callInfo, main *segment) bool {
	if main.tools != "" && c.Tools == "" {
		return true
	}
	return c.System != main.system && c.Messages <= 2
}

// forkReason classifies why c's prompt does not extend main's text.
func forkReason(main *segment, c callInfo) string {
	if strings.HasPrefix(stripThink(c.Prompt), stripThink(main.text)) {
		return ReasonReasoningDropped
	}
	if c.Tools != main.tools {
		return ReasonToolsChanged
	}
	at := commonPrefix(c.Prompt, main.text)
	if end := strings.Index(main.text, "<|im_end|>"); end >= 0 && at < end {
		return ReasonSystemChanged
	}
	if at >= len(main.lastPrompt) {
		return ReasonCompletionRerendered
	}
	return ReasonRewrite
}

// stripThink removes every <think>...</think> block and the newlines that
// follow it: how Qwen3's template renders an assistant turn whose
// reasoning it drops.
func stripThink(s string) string {
	if !strings.Contains(s, "<think>") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		s = strings.TrimLeft(s[i+j+len("</think>"):], "\n")
	}
	b.WriteString(s)
	return b.String()
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// commit records call's generation where pl says. text is the decoded
// completion (its end token included). gen must be checked already: one
// logprob per token, Versions empty or one per token.
func (r *recorder) commit(pl placement, call int, gen infer.Generation, text string) (*segment, bool) {
	var s *segment
	routed := gen.PromptRouting != nil || gen.Routing != nil
	gap := false
	if pl.seg < 0 {
		s = &segment{index: int32(len(r.segs)), side: pl.side, reason: pl.reason, firstCall: call,
			prompt: pl.prompt}
		s.setIDs(pl.prompt) // the engine got a slice capped at its length
		if routed {
			if len(gen.PromptRouting) == len(pl.prompt) {
				s.routes = append(s.routes, gen.PromptRouting...)
			} else {
				s.routesBroken, gap = true, true
			}
		}
		r.segs = append(r.segs, s)
		switch {
		case pl.side:
			r.sides = append(r.sides, int(s.index))
		default:
			if pl.promote >= 0 {
				old := r.segs[pl.promote]
				old.side, old.reason = true, ReasonSide
				r.sides = append(r.sides, pl.promote)
			}
			r.main = int(s.index)
		}
	} else {
		s = r.segs[pl.seg]
		if pl.retry {
			r.rollback(s, call)
		}
		n := len(s.ids)
		s.setIDs(pl.prompt) // the recorded ids and the suffix
		// One growth for the suffix and the generation.
		grow := len(pl.suffix) + len(gen.Tokens)
		s.mask, s.logprobs, s.versions = slices.Grow(s.mask, grow), slices.Grow(s.logprobs, grow), slices.Grow(s.versions, grow)
		for range pl.suffix {
			s.mask = append(s.mask, 0)
			s.logprobs = append(s.logprobs, 0)
			s.versions = append(s.versions, 0)
		}
		if routed && !s.routesBroken && len(s.routes) == n && len(gen.PromptRouting) == len(pl.prompt) {
			s.routes = append(s.routes, gen.PromptRouting[n:]...)
		} else if routed || len(s.routes) > 0 {
			s.routesBroken, gap = true, !s.routesBroken
		}
	}
	s.lastGen = len(s.completion)
	s.setIDs(append(withRoom(s.ids, len(gen.Tokens)), gen.Tokens...))
	for i := range gen.Tokens {
		s.mask = append(s.mask, 1)
		s.logprobs = append(s.logprobs, gen.Logprobs[i])
		var v int64
		if i < len(gen.Versions) {
			v = gen.Versions[i]
		}
		s.versions = append(s.versions, v)
	}
	if !s.routesBroken && routed {
		if len(gen.Routing) == len(gen.Tokens) {
			s.routes = append(s.routes, gen.Routing...)
		} else {
			s.routesBroken, gap = true, true
		}
	}
	if s.routesBroken {
		s.routes = nil
	}
	s.finish = gen.Finish
	s.text = pl.call.Prompt + text
	s.lastPrompt = pl.call.Prompt
	s.lastCall = call
	s.calls++
	s.tools, s.system = pl.call.Tools, pl.call.System
	return s, gap
}

// rollback drops s's last generation, keeping an audit copy.
func (r *recorder) rollback(s *segment, by int) {
	k := s.lastGen
	r.retries = append(r.retries, Retry{
		Call: s.lastCall, RetriedBy: by, Segment: s.index, Finish: s.finish,
		Tokens:   append([]int32(nil), s.completion[k:]...),
		Logprobs: append([]float32(nil), s.logprobs[k:]...),
		Versions: append([]int64(nil), s.versions[k:]...),
	})
	s.setIDs(s.ids[:len(s.prompt)+k])
	s.mask, s.logprobs, s.versions = s.mask[:k], s.logprobs[:k], s.versions[:k]
	if len(s.routes) > len(s.prompt)+k {
		s.routes = s.routes[:len(s.prompt)+k]
	}
	s.text = s.lastPrompt
}

// row returns the segment as a row of the segments table.
func (s *segment) row(runID string, iteration int32, rolloutID string, sm infer.Sampling) schemas.Segment {
	row := schemas.Segment{
		RunID: runID, Iteration: iteration, RolloutID: rolloutID,
		SegmentIndex: s.index, FirstCall: int32(s.firstCall), LastCall: int32(s.lastCall),
		PromptTokenIDs:     append([]int32(nil), s.prompt...),
		CompletionTokenIDs: append([]int32(nil), s.completion...),
		LossMask:           append([]int8(nil), s.mask...),
		Logprobs:           append([]float32(nil), s.logprobs...),
		PolicyVersions:     append([]int64(nil), s.versions...),
		FinishReason:       s.finish,
		Temperature:        float32(sm.Temperature),
		TopP:               float32(sm.TopP),
		TopK:               int32(sm.TopK),
	}
	if row.TopP == 0 {
		row.TopP = 1
	}
	first := true
	for i, m := range s.mask {
		if m == 1 && (first || s.versions[i] < row.PolicyVersion) {
			row.PolicyVersion, first = s.versions[i], false
		}
	}
	if !s.routesBroken && len(s.routes) > 0 {
		// Shapes were checked token by token as they came; a ragged
		// table leaves the row without routing rather than invalid.
		if err := row.SetRoutes(s.routes); err != nil {
			row.RoutingExperts, row.RoutingLayers, row.RoutingTopK = nil, 0, 0
		}
	}
	return row
}
