package proxy

import (
	"strings"
	"unicode"

	"github.com/legorl/legorl/policy/chat"
)

// Markup the splitter watches for.
const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	toolCallOpen  = "<tool_call>"
	spaceAndBreak = " \t\r\n"
)

// splitter turns a completion's text, fed as it is decoded, into reasoning
// and content deltas for a streamed reply, the way the template's Parse
// will read the whole text at the end: reasoning is the text inside
// <think>...</think> without its leading and trailing newlines, content
// follows the newlines after </think>. It holds back anything that may yet
// turn out to be markup or trimmed: a possible start of "</think>" or
// "<tool_call>", and white space at the end of what it has (Parse trims it
// before a tool call). From the first "<tool_call>" on, it holds back
// everything: tool calls go out whole, with the finish, once Parse has read
// the whole completion.
//
// rest reconciles what was streamed with the final parse: it returns what
// the parse holds beyond the streamed deltas. For a completion in the
// model's canonical format the deltas are always a prefix of the parse;
// malformed markup (a second <think>, a </think> with no <think>, spaces
// before the first tool call) can make them differ, which rest reports.
type splitter struct {
	state   splitState
	pending string // text not yet sent
	skipNL  bool   // drop newlines at the start of pending
	sentR   strings.Builder
	sentC   strings.Builder
}

type splitState int

const (
	splitStart     splitState = iota // before the first non-space text: is it <think>?
	splitReasoning                   // inside <think>
	splitContent                     // visible text
	splitHeld                        // after <tool_call>: everything waits for the end
)

// feed adds decoded text and returns the reasoning and content that can go
// out now.
func (s *splitter) feed(text string) (reasoning, content string) {
	s.pending += text
	for {
		r, c, again := s.step()
		reasoning += r
		content += c
		if !again {
			break
		}
	}
	s.sentR.WriteString(reasoning)
	s.sentC.WriteString(content)
	return reasoning, content
}

// step makes one move of the state machine; again reports that the state
// changed and pending may hold more to send.
func (s *splitter) step() (reasoning, content string, again bool) {
	if s.skipNL {
		s.pending = strings.TrimLeft(s.pending, "\n")
		if s.pending == "" {
			return "", "", false
		}
		s.skipNL = false
	}
	switch s.state {
	case splitStart:
		t := strings.TrimLeft(s.pending, spaceAndBreak)
		switch {
		case strings.HasPrefix(t, thinkOpen):
			s.pending, s.state, s.skipNL = t[len(thinkOpen):], splitReasoning, true
			return "", "", true
		case strings.HasPrefix(thinkOpen, t): // "" or a start of <think>: wait
			return "", "", false
		}
		s.state = splitContent
		return "", "", true
	case splitReasoning:
		if before, after, ok := strings.Cut(s.pending, thinkClose); ok {
			s.pending, s.state, s.skipNL = after, splitContent, true
			return strings.TrimRight(before, "\n"), "", true
		}
		keep := partialSuffix(s.pending, thinkClose)
		keep += trailing(s.pending[:len(s.pending)-keep], "\n")
		out := s.pending[:len(s.pending)-keep]
		s.pending = s.pending[len(out):]
		return out, "", false
	case splitContent:
		if before, _, ok := strings.Cut(s.pending, toolCallOpen); ok {
			s.state = splitHeld
			out := strings.TrimRightFunc(before, unicode.IsSpace)
			s.pending = s.pending[len(out):]
			return "", out, false
		}
		keep := partialSuffix(s.pending, toolCallOpen)
		keep += trailingSpace(s.pending[:len(s.pending)-keep])
		out := s.pending[:len(s.pending)-keep]
		s.pending = s.pending[len(out):]
		return "", out, false
	}
	return "", "", false
}

// rest returns what p holds beyond the deltas sent so far; ok is false when
// the deltas are not a prefix of p's reasoning and content (the client's
// view and the parse then differ).
func (s *splitter) rest(p chat.Parsed) (reasoning, content string, ok bool) {
	r, okR := strings.CutPrefix(p.Reasoning, s.sentR.String())
	c, okC := strings.CutPrefix(p.Content, s.sentC.String())
	if !okR {
		r = ""
	}
	if !okC {
		c = ""
	}
	return r, c, okR && okC
}

// partialSuffix returns the length of the longest suffix of s that is a
// proper prefix of marker: text that may become marker with more input.
func partialSuffix(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}

// trailing returns how many bytes at the end of s are in cutset.
func trailing(s, cutset string) int { return len(s) - len(strings.TrimRight(s, cutset)) }

// trailingSpace returns how many bytes of white space end s.
func trailingSpace(s string) int { return len(s) - len(strings.TrimRightFunc(s, unicode.IsSpace)) }
