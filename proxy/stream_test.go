package proxy

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/chat"
)

var splitTools = []chat.Tool{{Name: "bash"}, {Name: "edit"}}

// splitCases are completions (end token already dropped, as the proxy
// feeds them) and whether streaming them must match the final parse.
var splitCases = []struct {
	name, text string
	exact      bool // the deltas are a prefix of the parse
}{
	{"plain", "Hello, world.", true},
	{"reasoning and answer", "<think>\nLet me think.\nTwo lines.\n</think>\n\nThe answer is 4.", true},
	{"empty reasoning", "<think>\n\n</think>\n\nJust text.", true},
	{"reasoning then tool call", "<think>\nrun ls\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>", true},
	{"text then two tool calls", "<think>\nx\n</think>\n\nI will look.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"edit\", \"arguments\": {\"p\": 1}}\n</tool_call>", true},
	{"text around a tool call", "Before.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}\n</tool_call>\nAfter.", true},
	{"thinking disabled", "Answer without thinking.\n\nSecond paragraph.  ", true},
	{"almost markup", "a <tool and <think but not </thin>, <tool_cal> end", true},
	{"markup lookalike inside reasoning", "<think>\nmaybe </thin> or <tool_call> here\n</think>\n\nok", true},
	{"unknown function", "<think>\nr\n</think>\n\n<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", true},
	{"unclosed tool call", "<think>\nr\n</think>\n\ntext <tool_call>\n{\"name\": \"bash\"", true},
	{"stray close", "text </tool_call> more", true},
	{"unicode", "<think>\n日本語の推論 🎉\n</think>\n\nRésumé: ✓ done", true},
	{"trailing newlines in content", "<think>\nr\n</think>\n\nanswer\n\n", true},
	{"reasoning with inner blank lines", "<think>\n\na\n\nb\n\n</think>\n\n\nc", true},
	// Malformed: the stream cannot know in advance; rest says so.
	{"unclosed think", "<think>\nnever closed", false},
	{"close without open", "some reasoning</think>\n\nanswer", false},
	{"leading space before a tool call", "  Hi <tool_call>\n{\"name\": \"bash\", \"arguments\": {}}\n</tool_call>", false},
}

// stream feeds text in the given pieces and returns what a client would
// hold at the end: the deltas plus rest.
func stream(t *testing.T, pieces []string, parsed chat.Parsed) (reasoning, content string, ok bool) {
	t.Helper()
	var sp splitter
	var rb, cb strings.Builder
	for _, p := range pieces {
		r, c := sp.feed(p)
		rb.WriteString(r)
		cb.WriteString(c)
		if strings.Contains(c, "<tool_call>") || strings.Contains(r, "</think>") {
			t.Fatalf("markup leaked into a delta: reasoning %q content %q", r, c)
		}
	}
	r, c, ok := sp.rest(parsed)
	return rb.String() + r, cb.String() + c, ok
}

// splits returns ways to cut s: whole, every cut in two, every byte alone,
// and random chunkings (always at byte offsets: the decoder works on
// characters, but the splitter must not care).
func splits(s string, rng *rand.Rand) [][]string {
	out := [][]string{{s}}
	for i := 1; i < len(s); i++ {
		out = append(out, []string{s[:i], s[i:]})
	}
	bytes := make([]string, len(s))
	for i := 0; i < len(s); i++ {
		bytes[i] = s[i : i+1]
	}
	out = append(out, bytes)
	for k := 0; k < 20; k++ {
		var pieces []string
		for rest := s; rest != ""; {
			n := min(len(rest), 1+rng.IntN(6))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		out = append(out, pieces)
	}
	return out
}

func TestSplitter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range splitCases {
		t.Run(tt.name, func(t *testing.T) {
			parsed := chat.Qwen3{}.Parse(tt.text, splitTools)
			for _, pieces := range splits(tt.text, rng) {
				r, c, ok := stream(t, pieces, parsed)
				if ok != tt.exact {
					t.Fatalf("pieces %q: rest ok %v, want %v", pieces, ok, tt.exact)
				}
				if !tt.exact {
					continue
				}
				if r != parsed.Reasoning || c != parsed.Content {
					t.Fatalf("pieces %q:\nstreamed reasoning %q content %q\nparsed   reasoning %q content %q", pieces, r, c, parsed.Reasoning, parsed.Content)
				}
			}
		})
	}
}

// TestSplitterHoldsToolCalls: nothing of a tool call goes out before the
// end, and text before it goes out as it comes.
func TestSplitterHoldsToolCalls(t *testing.T) {
	var sp splitter
	steps := []struct{ in, wantC string }{
		{"Let me check", "Let me check"},
		{" the file.\n", " the file."},
		{"<tool", ""},
		{"_call>\n{\"name\"", ""},
		{": \"bash\"}\n</tool_call>", ""},
	}
	for i, st := range steps {
		if _, c := sp.feed(st.in); c != st.wantC {
			t.Errorf("step %d: content %q, want %q", i, c, st.wantC)
		}
	}
}

// TestSplitterReasoningLive: reasoning streams as it comes, holding back
// only what may be "</think>" or trailing newlines.
func TestSplitterReasoningLive(t *testing.T) {
	var sp splitter
	steps := []struct{ in, wantR, wantC string }{
		{"<thi", "", ""},
		{"nk>\n", "", ""},
		{"First", "First", ""},
		{" step\n", " step", ""},
		{"</", "", ""},
		{"think>\n\nAns", "", "Ans"},
		{"wer", "", "wer"},
	}
	for i, st := range steps {
		r, c := sp.feed(st.in)
		if r != st.wantR || c != st.wantC {
			t.Errorf("step %d (%q): reasoning %q content %q, want %q %q", i, st.in, r, c, st.wantR, st.wantC)
		}
	}
}

func TestPartialSuffix(t *testing.T) {
	tests := []struct {
		s, marker string
		want      int
	}{
		{"abc<tool_", "<tool_call>", 6},
		{"abc<tool_call>", "<tool_call>", 0}, // whole marker: not partial
		{"abc", "<tool_call>", 0},
		{"<", "<tool_call>", 1},
		{"x</thi", "</think>", 5},
		{"", "</think>", 0},
	}
	for _, tt := range tests {
		if got := partialSuffix(tt.s, tt.marker); got != tt.want {
			t.Errorf("partialSuffix(%q, %q) = %d, want %d", tt.s, tt.marker, got, tt.want)
		}
	}
}
