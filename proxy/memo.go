package proxy

import (
	"encoding/json"

	"github.com/legorl/legorl/policy/chat"
)

// callMemo is what a call leaves its rollout so that the next calls, which
// repeat its conversation and add a few messages, decode and render only
// what is new: the decoded Chat Completions body, the rendering, and the
// tools' fingerprint. Nothing here decides where a call goes: the recorder
// still compares each call's whole prompt with the segment's text, so a
// rewritten history forks exactly as it would without memos. A memo is
// never changed once remembered.
type callMemo struct {
	chat      *chatMemo       // nil unless scanChat decoded the body
	rendering *chat.Rendering // nil unless the template is a chat.Appender
	// tools is the tools' fingerprint (callInfo.Tools); toolsKnown says
	// it is set.
	tools      string
	toolsKnown bool
}

// rolloutMemos is how many calls' memos a rollout keeps: one for the main
// thread and one for a side thread (a title or summary request) calling
// in between. Each holds about twice the request body.
const rolloutMemos = 2

// recall returns the rollout's memos, newest first.
func (ro *rollout) recall() []*callMemo {
	ro.memoMu.Lock()
	defer ro.memoMu.Unlock()
	return append([]*callMemo(nil), ro.memos...)
}

// remember keeps m, in place of base (the memo m's call started from,
// which m supersedes: the same thread) or else of the oldest.
func (ro *rollout) remember(m, base *callMemo) {
	ro.memoMu.Lock()
	defer ro.memoMu.Unlock()
	if ro.closed {
		return
	}
	kept := []*callMemo{m}
	for _, old := range ro.memos {
		if old != base && len(kept) < rolloutMemos {
			kept = append(kept, old)
		}
	}
	ro.memos = kept
}

// forget drops the rollout's memos (a finished rollout).
func (ro *rollout) forget() {
	ro.memoMu.Lock()
	defer ro.memoMu.Unlock()
	ro.memos = nil
}

// decode decodes body with f. A Chat Completions body is decoded from the
// memos of ro's earlier calls (ro may be nil: an unknown rollout, whose
// call fails after decoding). It returns the call's new memo and the
// earlier one it started from (nil for none).
func (p *Proxy) decode(f wireFormat, body []byte, ro *rollout) (Turn, *callMemo, *callMemo, *apiError) {
	memo := &callMemo{}
	var prev []*callMemo
	if ro != nil && !p.noMemos {
		prev = ro.recall()
	}
	cf, ok := f.(chatFormat)
	if !ok {
		t, e := f.decode(body)
		var base *callMemo
		if len(prev) > 0 {
			base = prev[0]
		}
		return t, memo, base, e
	}
	chats := make([]*chatMemo, len(prev))
	for i, m := range prev {
		chats[i] = m.chat
	}
	t, out, e := cf.decodeFrom(body, chats)
	memo.chat = out.memo
	var base *callMemo
	switch {
	case out.base >= 0:
		base = prev[out.base]
		if out.toolsReused && base.toolsKnown {
			memo.tools, memo.toolsKnown = base.tools, true
		}
	case len(prev) > 0:
		base = prev[0]
	}
	return t, memo, base, e
}

// render renders turn's prompt, with a chat.Appender from base's
// rendering; then the rollout remembers memo.
func (p *Proxy) render(ro *rollout, turn Turn, memo, base *callMemo, opt chat.Options) (string, error) {
	a, ok := p.opt.Template.(chat.Appender)
	if p.noMemos {
		return p.opt.Template.Render(turn.Messages, turn.Tools, opt)
	}
	var prompt string
	if ok {
		var prev *chat.Rendering
		if base != nil {
			prev = base.rendering
		}
		r, err := a.RenderAppend(prev, turn.Messages, turn.Tools, opt)
		if err != nil {
			return "", err
		}
		memo.rendering, prompt = r, r.Prompt
	} else {
		var err error
		if prompt, err = p.opt.Template.Render(turn.Messages, turn.Tools, opt); err != nil {
			return "", err
		}
	}
	if !memo.toolsKnown {
		memo.tools, memo.toolsKnown = toolsFingerprint(turn.Tools), true
	}
	ro.remember(memo, base)
	return prompt, nil
}

// toolsFingerprint is a tool list as callInfo.Tools holds it ("" for none).
func toolsFingerprint(tools []chat.Tool) string {
	if len(tools) == 0 {
		return ""
	}
	b, _ := json.Marshal(tools) // plain strings and raw JSON that decode checked
	return string(b)
}
