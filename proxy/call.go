package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/tokenizer"
)

// idPrefixer is implemented by wire formats whose reply ids have their own
// prefix (resp_, msg_); the default is OpenAI's chatcmpl-.
type idPrefixer interface{ idPrefix() string }

// call runs one call of rollout ro, which the caller holds locked: render,
// place in a segment, generate (streaming if asked), check, record, parse,
// reply. It returns the error the caller got (nil on success) and notes in
// c what the metrics count.
//
// memo is the call's memo from decode and base the earlier one it started
// from (nil for none): the render starts from base's and the rollout
// remembers memo.
func (p *Proxy) call(ctx context.Context, w http.ResponseWriter, f wireFormat, ro *rollout, turn Turn, memo, base *callMemo, c *callStats) *apiError {
	defer func() {
		if v := recover(); v != nil {
			ro.m.Panics++
			panic(v) // guard answers it
		}
	}()
	prompt, err := p.render(ro, turn, memo, base,
		chat.Options{AddGenerationPrompt: true, DisableThinking: turn.DisableThinking})
	if err != nil {
		e := badRequest("messages", "proxy: the conversation cannot be rendered: %v", err)
		f.fail(w, e)
		return e
	}
	if !memo.toolsKnown { // with memos on, render set it before the rollout kept memo
		memo.tools, memo.toolsKnown = toolsFingerprint(turn.Tools), true
	}
	pl := ro.rec.place(describeWith(prompt, turn, memo.tools), p.encode)

	index := ro.calls
	ro.calls++
	ro.m.Calls++
	sampling := ro.sampling
	sampling.Seed = callSeed(ro.opt.Seed, index)
	ids := pl.prompt[:len(pl.prompt):len(pl.prompt)] // see placement.prompt
	req := infer.Request{Session: ro.id, Prompt: ids, MaxTokens: turn.MaxTokens, StopTokens: p.stops, Sampling: sampling}
	if pl.side {
		req.Session = ro.id + sideSession
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = p.opt.MaxTokens
	}
	reply := &Reply{ID: p.replyID(f, ro.id, index), Model: p.opt.ModelName, Created: p.opt.Clock(), StreamUsage: turn.StreamUsage}
	if turn.Model != "" {
		reply.Model = turn.Model
	}
	out := &responder{f: f, w: w, reply: reply}
	if turn.Stream {
		out.dec = p.tok.NewStreamDecoder()
	}

	started := time.Now()
	gen, err := p.generate(ctx, req, out)
	c.generating = time.Since(started)
	if err == nil {
		err = p.check(gen)
	}
	if err != nil {
		ro.m.Failed++
		e, overlong, bad := engineError(err)
		ro.m.Overlong = ro.m.Overlong || overlong
		if bad {
			ro.m.BadOutput = true
			ro.m.BadOutputs++
		}
		out.fail(e)
		return e
	}
	textBytes, _ := p.tok.Decode(gen.Tokens) // ids were checked
	text := string(textBytes)
	if gen.Finish == infer.FinishContext {
		ro.m.Overlong = true
	}
	_, gap := ro.rec.commit(pl, index, gen, text)
	c.fork = ro.count(pl, gap)

	parsed := p.parse(text, turn)
	for i := range parsed.ToolCalls {
		parsed.ToolCalls[i].ID = fmt.Sprintf("call_%016x", callSeed(hashString(ro.id)+uint64(i)<<32, index))
	}
	ro.m.ToolCalls += len(parsed.ToolCalls)
	if parsed.Failed {
		ro.m.ParseFailures++
		if strings.Contains(parsed.Content, "tool_call>") {
			ro.m.ToolParseFailures++
		}
	}
	reply.Content, reply.Reasoning, reply.ToolCalls = parsed.Content, parsed.Reasoning, parsed.ToolCalls
	reply.Finish = FinishStop
	switch {
	case len(parsed.ToolCalls) > 0:
		reply.Finish = FinishToolCalls
	case gen.Finish != infer.FinishStop:
		reply.Finish = FinishLength
	}
	reply.Usage = Usage{PromptTokens: len(pl.prompt), CompletionTokens: len(gen.Tokens), CachedTokens: gen.CachedTokens}
	ro.m.PromptTokens += reply.Usage.PromptTokens
	ro.m.CompletionTokens += reply.Usage.CompletionTokens
	ro.m.CachedTokens += reply.Usage.CachedTokens
	c.usage = reply.Usage
	if !out.done(parsed) {
		ro.m.StreamMismatches++
	}
	return nil
}

// encode tokenizes rendered text, special tokens recognised.
func (p *Proxy) encode(s string) []int32 { return p.tok.EncodeSpecial(s) }

// describe sums up a call for the recorder.
func describe(prompt string, turn Turn) callInfo {
	return describeWith(prompt, turn, toolsFingerprint(turn.Tools))
}

// describeWith is describe with the turn's toolsFingerprint known.
func describeWith(prompt string, turn Turn, tools string) callInfo {
	c := callInfo{Prompt: prompt, Messages: len(turn.Messages), Tools: tools}
	if len(turn.Messages) > 0 && turn.Messages[0].Role == chat.RoleSystem {
		c.System = turn.Messages[0].Content
		c.Messages--
	}
	return c
}

// count adds a recorded call to the rollout's metrics. It returns the fork
// reason of a call that began a new main-thread segment, "" for any other.
func (ro *rollout) count(pl placement, routingGap bool) (fork string) {
	switch {
	case pl.retry:
		ro.m.Retries++
	case pl.side:
	case pl.seg >= 0:
		ro.m.PrefixChecks++
		ro.m.PrefixConsistent++
	case pl.fork():
		ro.m.PrefixChecks++
		ro.m.Forks[pl.reason]++
		fork = pl.reason
	}
	if pl.side {
		ro.m.SideRequests++
	}
	if pl.promote >= 0 {
		ro.m.SideRequests++ // the call re-tagged as a side request
	}
	if routingGap {
		ro.m.RoutingGaps++
	}
	return fork
}

// parse reads a completion with the template. With tool_choice "none"
// tool-call markup stays text: parsing against no tools leaves the text
// after the reasoning unchanged, and that is not a parse failure.
func (p *Proxy) parse(text string, turn Turn) chat.Parsed {
	if turn.ToolChoice != "none" || len(turn.Tools) == 0 {
		return p.opt.Template.Parse(text, turn.Tools)
	}
	parsed := p.opt.Template.Parse(text, nil)
	unclosedThink := parsed.Reasoning == "" && strings.HasPrefix(strings.TrimSpace(parsed.Content), "<think>")
	if parsed.Failed && !unclosedThink {
		parsed.Failed, parsed.Reason = false, ""
	}
	return parsed
}

// generate runs req, streaming deltas through out as tokens come when out
// streams. An id outside the vocabulary stops the generation as bad output.
func (p *Proxy) generate(ctx context.Context, req infer.Request, out *responder) (infer.Generation, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu   sync.Mutex
		done bool
	)
	emit := func(t infer.Token) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		defer func() { // a bug here must not kill the engine's goroutine
			if v := recover(); v != nil {
				done = true
				cancel(fmt.Errorf("proxy: streaming token %d: panic: %v", t.ID, v))
			}
		}()
		if t.ID < 0 || int(t.ID) >= p.tok.VocabSize() {
			done = true
			cancel(fmt.Errorf("%w: token id %d outside the vocabulary of %d", infer.ErrBadOutput, t.ID, p.tok.VocabSize()))
			return
		}
		if out.dec == nil || p.isStop(t.ID) {
			return
		}
		piece, err := out.dec.Add(t.ID)
		if err != nil {
			done = true
			cancel(fmt.Errorf("%w: %v", infer.ErrBadOutput, err))
			return
		}
		out.send(piece)
	}
	gen, err := p.opt.Generator.Generate(ctx, req, emit)
	mu.Lock()
	done = true
	mu.Unlock()
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		err = cause // our own cancel (bad output): say why
	}
	if err == nil && out.dec != nil {
		out.send(out.dec.Flush())
	}
	return gen, err
}

// check refuses a generation with an id outside the vocabulary, a NaN,
// infinite or positive logprob, or lists of the wrong length.
func (p *Proxy) check(g infer.Generation) error {
	if len(g.Logprobs) != len(g.Tokens) || (g.Versions != nil && len(g.Versions) != len(g.Tokens)) {
		return fmt.Errorf("%w: %d tokens, %d logprobs, %d versions", infer.ErrBadOutput, len(g.Tokens), len(g.Logprobs), len(g.Versions))
	}
	for i, id := range g.Tokens {
		if id < 0 || int(id) >= p.tok.VocabSize() {
			return fmt.Errorf("%w: token %d is id %d, vocabulary has %d", infer.ErrBadOutput, i, id, p.tok.VocabSize())
		}
		if lp := float64(g.Logprobs[i]); math.IsNaN(lp) || math.IsInf(lp, 0) || lp > 0 {
			return fmt.Errorf("%w: token %d has logprob %v", infer.ErrBadOutput, i, lp)
		}
	}
	return nil
}

func (p *Proxy) isStop(id int32) bool {
	for _, s := range p.stops {
		if s == id {
			return true
		}
	}
	return false
}

// replyID is the wire id of call index of rollout id: unique per call,
// and the same when a rollout is replayed.
func (p *Proxy) replyID(f wireFormat, id string, index int) string {
	prefix := "chatcmpl-"
	if x, ok := f.(idPrefixer); ok {
		prefix = x.idPrefix()
	}
	return fmt.Sprintf("%s%016x", prefix, callSeed(hashString(id), index))
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return binary.LittleEndian.Uint64(h.Sum(nil)[:8]) // any fixed mapping
}

// responder answers one call: a whole reply, or a stream begun at the
// first delta (so that errors before any token still get their own HTTP
// status).
type responder struct {
	f     wireFormat
	w     http.ResponseWriter
	reply *Reply
	dec   *tokenizer.StreamDecoder // nil when not streaming
	split splitter
	sw    streamWriter // nil until the stream begins
	err   error        // the first failed write; later writes are skipped
}

// send streams decoded text.
func (o *responder) send(text string) {
	if text == "" {
		return
	}
	o.deltas(o.split.feed(text))
}

func (o *responder) deltas(reasoning, content string) {
	if o.err != nil || (reasoning == "" && content == "") {
		return
	}
	o.begin()
	if reasoning != "" {
		o.err = o.sw.reasoning(reasoning)
	}
	if content != "" && o.err == nil {
		o.err = o.sw.text(content)
	}
}

func (o *responder) begin() {
	if o.sw == nil {
		o.sw = o.f.stream(o.w, o.reply)
	}
}

// fail answers with e: an error response, or an error event once the
// stream began.
func (o *responder) fail(e *apiError) {
	if o.sw != nil {
		o.sw.fail(e)
		return
	}
	o.f.fail(o.w, e)
}

// done sends the reply (whose fields are final); for a stream, the rest of
// the parse beyond what was streamed, then the finish. It reports false
// when the streamed deltas were not a prefix of the parse.
func (o *responder) done(parsed chat.Parsed) bool {
	if o.dec == nil {
		o.f.reply(o.w, o.reply)
		return true
	}
	r, c, ok := o.split.rest(parsed)
	o.deltas(r, c)
	o.begin()
	if o.err == nil {
		o.err = o.sw.finish(o.reply)
	}
	return ok
}
