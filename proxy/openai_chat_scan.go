package proxy

import (
	"bytes"

	"github.com/legorl/legorl/policy/chat"
)

// chatMemo is a Chat Completions body as scanChat decoded it, kept by the
// rollout (see callMemo) so that the next call, whose messages usually
// repeat these byte for byte and add a few, decodes only the new ones.
// It is never changed once made.
type chatMemo struct {
	// msgsRaw is the body's messages array from its '[' to the end of its
	// last message; ends[i] is where message i ends in it.
	msgsRaw []byte
	ends    []int
	// msgs are the messages, converted; tools the tools, converted from
	// toolsRaw, the tools value's bytes (nil when absent).
	msgs     []chat.Message
	toolsRaw []byte
	tools    []chat.Tool
}

// match returns how many leading messages of m the messages array at the
// start of b repeats byte for byte (separators included), and where the
// last of them ends in b.
func (m *chatMemo) match(b []byte) (k, end int) {
	if n := len(m.msgsRaw); n > 0 && len(b) >= n && bytes.Equal(b[:n], m.msgsRaw) {
		return len(m.ends), n
	}
	lo, hi := 0, len(m.ends)-1 // the answer lies in [lo, hi]; 0 always holds
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if e := m.ends[mid-1]; len(b) >= e && bytes.Equal(b[:e], m.msgsRaw[:e]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return 0, 0
	}
	return lo, m.ends[lo-1]
}

// chatScanned is what scanChat returns besides the Turn.
type chatScanned struct {
	memo *chatMemo
	// base is the index in prev of the memo whose messages the body
	// repeats (the most of them), -1 for none; toolsReused says that the
	// body's tools are base's, byte for byte.
	base        int
	toolsReused bool
	// reused counts the messages taken from base.
	reused int
}

// scanChat decodes a Chat Completions body as decodeChatSlow does, without
// encoding/json's reflection and generic values, reusing the converted
// messages (and tools) of an earlier body in prev that this one repeats
// byte for byte. It reports false when it cannot vouch for the result:
// anything malformed, a rare field, a key that might match a field only
// ignoring case, a field given twice, any error; the caller then decodes
// with decodeChatSlow, which gives the answer (or the error) exactly.
func scanChat(body []byte, prev []*chatMemo) (Turn, chatScanned, bool) {
	out := chatScanned{base: -1}
	s := &jsonScan{b: body}
	var (
		req                chatRequest
		prefix             []chat.Message
		memo               = &chatMemo{}
		haveMsgs, toolsSet bool
		seen               uint32
	)
	// once reports the first sight of known field bit.
	once := func(bit uint32) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	s.ws()
	if s.peek() != '{' {
		return Turn{}, out, false
	}
	ok := s.object(func(key []byte) bool {
		if !plainKey(key) {
			return false
		}
		var ok bool
		switch string(key) {
		case "messages":
			if !once(1<<0) || s.peek() != '[' {
				return false
			}
			haveMsgs = true
			prefix, ok = scanChatMessages(s, prev, memo, &req, &out)
			return ok
		case "tools":
			if !once(1 << 1) {
				return false
			}
			start := s.i
			if s.peek() == 'n' {
				return s.literal("null")
			}
			if s.peek() != '[' {
				return false
			}
			toolsSet = true
			// The same bytes as the base memo's tools are the same value:
			// a JSON array ends at its closing bracket.
			if out.base >= 0 {
				if raw := prev[out.base].toolsRaw; len(raw) > 0 && bytes.HasPrefix(body[start:], raw) {
					s.i += len(raw)
					memo.toolsRaw = body[start:s.i:s.i]
					return true
				}
			}
			ok = s.array(func() bool {
				t, ok := scanChatTool(s)
				req.Tools = append(req.Tools, t)
				return ok
			})
			memo.toolsRaw = body[start:s.i:s.i]
			return ok
		case "model":
			req.Model, ok = s.stringValue()
			return once(1<<2) && ok
		case "tool_choice":
			req.ToolChoice, ok = s.value()
			return once(1<<3) && ok
		case "max_tokens":
			req.MaxTokens, ok = s.intPtr()
			return once(1<<4) && ok
		case "max_completion_tokens":
			req.MaxCompletionTokens, ok = s.intPtr()
			return once(1<<5) && ok
		case "stream":
			req.Stream, ok = s.boolPtr()
			return once(1<<6) && ok
		case "stream_options":
			if !once(1 << 7) {
				return false
			}
			if s.peek() == 'n' {
				return s.literal("null")
			}
			req.StreamOptions = &struct {
				IncludeUsage *bool `json:"include_usage"`
			}{}
			return s.fields(streamOptionKeys, func(int) (ok bool) {
				req.StreamOptions.IncludeUsage, ok = s.boolPtr()
				return ok
			})
		case "n":
			req.N, ok = s.intPtr()
			return once(1<<8) && ok
		case "chat_template_kwargs":
			if !once(1 << 9) {
				return false
			}
			if s.peek() == 'n' {
				return s.literal("null")
			}
			req.ChatTemplateKwargs = &struct {
				EnableThinking *bool `json:"enable_thinking"`
			}{}
			return s.fields(templateKwargKeys, func(int) (ok bool) {
				req.ChatTemplateKwargs.EnableThinking, ok = s.boolPtr()
				return ok
			})
		case "temperature", "top_p", "frequency_penalty", "presence_penalty":
			_, ok = s.floatPtr()
			return once(1<<(10+floatField(key))) && ok
		case "seed":
			_, ok = s.int64Ptr()
			return once(1<<14) && ok
		case "logprobs", "parallel_tool_calls":
			bit := uint32(1 << 15)
			if key[0] == 'p' {
				bit = 1 << 16
			}
			_, ok = s.boolPtr()
			return once(bit) && ok
		case "top_logprobs":
			_, ok = s.intPtr()
			return once(1<<17) && ok
		case "user":
			_, ok = s.stringPtr()
			return once(1<<18) && ok
		case "audio":
			req.Audio, ok = s.value()
			return once(1<<19) && ok
		case "response_format", "modalities", "logit_bias":
			// Rare: anything but null goes to encoding/json.
			return s.literal("null")
		}
		if foldsTo(key, "messages", "tools", "model", "tool_choice", "max_tokens", "max_completion_tokens",
			"stream", "stream_options", "n", "chat_template_kwargs", "temperature", "top_p",
			"frequency_penalty", "presence_penalty", "seed", "logprobs", "parallel_tool_calls",
			"top_logprobs", "user", "audio", "response_format", "modalities", "logit_bias") {
			return false
		}
		return s.skip()
	})
	if !ok || !haveMsgs {
		return Turn{}, out, false
	}
	if s.ws(); s.i != len(body) {
		return Turn{}, out, false
	}
	var reused []chat.Tool
	if out.base >= 0 && toolsSet && bytes.Equal(memo.toolsRaw, prev[out.base].toolsRaw) {
		reused, req.Tools, out.toolsReused = prev[out.base].tools, nil, true
	}
	t, e := chatTurn(&req, prefix)
	if e != nil {
		return Turn{}, out, false
	}
	if out.toolsReused {
		t.Tools = reused
	}
	memo.msgs, memo.tools = t.Messages, t.Tools
	out.memo = memo
	return t, out, true
}

// floatField numbers the ignored float fields for scanChat's bit set.
func floatField(key []byte) int {
	switch string(key) {
	case "temperature":
		return 0
	case "top_p":
		return 1
	case "frequency_penalty":
		return 2
	}
	return 3
}

// scanChatMessages scans the messages array at s.i. The leading messages
// that the body repeats from the memo in prev that it repeats the most of
// are returned converted (out.base names that memo); the others are
// appended to req.Messages. It fills memo's msgsRaw and ends.
func scanChatMessages(s *jsonScan, prev []*chatMemo, memo *chatMemo, req *chatRequest, out *chatScanned) ([]chat.Message, bool) {
	start := s.i
	k, end := 0, 0
	for i, m := range prev {
		if m == nil {
			continue
		}
		if mk, me := m.match(s.b[start:]); mk > k {
			k, end, out.base = mk, me, i
		}
	}
	var prefix []chat.Message
	out.reused = k
	if k > 0 {
		base := prev[out.base]
		prefix = base.msgs[:k:k]
		memo.ends = append(make([]int, 0, k+4), base.ends[:k]...)
		s.i = start + end
		if !s.arrayNext() { // the array ends after the repeated messages
			memo.msgsRaw = s.b[start : start+end : start+end]
			return prefix, s.peek() == ']' && s.close()
		}
	} else {
		s.i++ // '['
		s.ws()
		if s.peek() == ']' {
			s.i++
			return nil, true
		}
	}
	ok := s.arrayRest(func() bool {
		in, ok := scanChatMessage(s)
		req.Messages = append(req.Messages, in)
		memo.ends = append(memo.ends, s.i-start)
		return ok
	})
	if n := len(memo.ends); n > 0 {
		e := start + memo.ends[n-1]
		memo.msgsRaw = s.b[start:e:e]
	}
	return prefix, ok
}

// The keys of the objects scanned below, in the order of their readers.
var (
	chatMessageKeys   = []string{"role", "content", "reasoning_content", "reasoning", "tool_calls", "tool_call_id", "name"}
	chatToolCallKeys  = []string{"id", "type", "function"}
	chatCallFuncKeys  = []string{"name", "arguments"}
	chatToolKeys      = []string{"type", "function"}
	chatToolFuncKeys  = []string{"name", "description", "parameters", "strict"}
	streamOptionKeys  = []string{"include_usage"}
	templateKwargKeys = []string{"enable_thinking"}
)

// scanChatMessage reads one message into the struct encoding/json fills.
func scanChatMessage(s *jsonScan) (chatMessageIn, bool) {
	var in chatMessageIn
	ok := s.fields(chatMessageKeys, func(k int) (ok bool) {
		switch k {
		case 0:
			in.Role, ok = s.stringValue()
		case 1:
			in.Content, ok = s.value()
		case 2:
			in.ReasoningContent, ok = s.stringPtr()
		case 3:
			in.Reasoning, ok = s.stringPtr()
		case 4:
			switch s.peek() {
			case 'n':
				ok = s.literal("null")
			case '[':
				ok = s.array(func() bool {
					tc, ok := scanChatToolCall(s)
					in.ToolCalls = append(in.ToolCalls, tc)
					return ok
				})
			}
		case 5:
			in.ToolCallID, ok = s.stringValue()
		case 6:
			in.Name, ok = s.stringValue()
		}
		return ok
	})
	return in, ok
}

// scanChatToolCall reads one tool call of an assistant message.
func scanChatToolCall(s *jsonScan) (chatToolCallIn, bool) {
	var tc chatToolCallIn
	ok := s.fields(chatToolCallKeys, func(k int) (ok bool) {
		switch k {
		case 0:
			tc.ID, ok = s.stringValue()
		case 1:
			tc.Type, ok = s.stringValue()
		case 2:
			ok = s.fields(chatCallFuncKeys, func(k int) (ok bool) {
				if k == 0 {
					tc.Function.Name, ok = s.stringValue()
				} else {
					tc.Function.Arguments, ok = s.value()
				}
				return ok
			})
		}
		return ok
	})
	return tc, ok
}

// scanChatTool reads one tool definition.
func scanChatTool(s *jsonScan) (chatToolIn, bool) {
	var in chatToolIn
	ok := s.fields(chatToolKeys, func(k int) (ok bool) {
		switch k {
		case 0:
			in.Type, ok = s.stringValue()
		case 1:
			in.Function = &chatFunctionIn{}
			ok = s.fields(chatToolFuncKeys, func(k int) (ok bool) {
				switch k {
				case 0:
					in.Function.Name, ok = s.stringValue()
				case 1:
					in.Function.Description, ok = s.stringValue()
				case 2:
					in.Function.Parameters, ok = s.value()
				case 3:
					in.Function.Strict, ok = s.boolPtr()
				}
				return ok
			})
		}
		return ok
	})
	return in, ok
}
