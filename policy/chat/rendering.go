package chat

import "bytes"

// Appender is a Renderer that renders a grown conversation without
// rendering again the messages whose text cannot have changed: an agent's
// next request repeats the whole conversation and adds a few messages, and
// rendering it all again costs as much as the conversation is long. Qwen3
// is an Appender.
type Appender interface {
	Renderer
	// RenderAppend returns the rendering of msgs, tools and opt, whose
	// Prompt is exactly what Render returns (or Render's error). prev is
	// an earlier rendering by the same Appender, of any conversation, or
	// nil: the text of the leading messages that msgs shares with prev's
	// conversation (compared field by field) is taken from prev where the
	// template guarantees it is the same.
	RenderAppend(prev *Rendering, msgs []Message, tools []Tool, opt Options) (*Rendering, error)
}

// Rendering is a rendered conversation that a later RenderAppend can
// extend. It holds the conversation's messages and tools (not copied: the
// caller must not change them afterwards) and where each message's text
// begins. It is never changed once returned, so it may be shared.
type Rendering struct {
	// Prompt is the rendered text, Render's result.
	Prompt string
	msgs   []Message
	tools  []Tool
	// starts[i] is where message i's text begins in Prompt;
	// starts[len(msgs)] is where the generation prompt begins.
	starts []int
	// lastQuery is Qwen3's last user query (qwen3LastQuery).
	lastQuery int
}

// keep returns how many leading messages of a rendering of msgs, tools
// (whose last user query is lastQuery) can take their text from r: 0 when
// r is nil or the tools or first message differ. A message's text depends
// on itself, its neighbours' roles, whether it is last, and whether it
// comes after the last user query (qwen3Message); so with the first k
// messages equal, the text of messages 0..k-2 is the same in both
// renderings as long as they sit on the same side of the last user query
// in both. Message k-1, last in r's conversation, is always rendered
// again: being last changes a tool result's closing and an assistant's
// <think> block.
func (r *Rendering) keep(msgs []Message, tools []Tool, lastQuery int) int {
	if r == nil || !equalTools(r.tools, tools) {
		return 0
	}
	k := 0
	for k < len(r.msgs) && k < len(msgs) && equalMessage(r.msgs[k], msgs[k]) {
		k++
	}
	keep := k - 1
	if lastQuery != r.lastQuery {
		keep = min(keep, min(lastQuery, r.lastQuery)+1)
	}
	return max(keep, 0)
}

// equalMessage reports whether a and b are the same message. Strings that
// share their bytes (a decoder that reuses earlier messages) compare in
// constant time.
func equalMessage(a, b Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ReasoningContent != b.ReasoningContent ||
		a.ToolCallID != b.ToolCallID || a.Name != b.Name || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i, c := range a.ToolCalls {
		d := b.ToolCalls[i]
		if c.ID != d.ID || c.Name != d.Name || !bytes.Equal(c.Arguments, d.Arguments) {
			return false
		}
	}
	return true
}

// equalTools reports whether a and b are the same tool list.
func equalTools(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i, t := range a {
		u := b[i]
		if t.Name != u.Name || t.Description != u.Description || !bytes.Equal(t.Parameters, u.Parameters) {
			return false
		}
	}
	return true
}
