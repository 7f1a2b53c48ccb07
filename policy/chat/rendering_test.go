package chat

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestRenderAppend checks that RenderAppend's prompt is Render's for every
// way a conversation can follow an earlier one: grown by messages (the
// agent loop), cut, edited at any message (an early one, the system
// prompt, a tool call's arguments), with other tools, other options, or
// from an unrelated conversation.
func TestRenderAppend(t *testing.T) {
	type conv struct {
		msgs  []Message
		tools []Tool
		opt   Options
	}
	var convs []conv
	for _, path := range randomConversations(t, t.TempDir(), 200) {
		msgs, tools, opt := loadFixture(t, path)
		convs = append(convs, conv{msgs, tools, opt})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	edit := func(msgs []Message, i int) []Message {
		out := append([]Message(nil), msgs...)
		m := out[i]
		switch k := rng.IntN(5); {
		case k == 0 && len(m.ToolCalls) > 0:
			m.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
			m.ToolCalls[0].Arguments = json.RawMessage(`{"edited": true}`)
		case k == 1:
			m.ReasoningContent += "more"
		case k == 2:
			m.Role = RoleUser
		default:
			m.Content += " edited"
		}
		out[i] = m
		return out
	}
	check := func(t *testing.T, prev *Rendering, c conv, what string) *Rendering {
		t.Helper()
		want, werr := Qwen3{}.Render(c.msgs, c.tools, c.opt)
		got, gerr := Qwen3{}.RenderAppend(prev, c.msgs, c.tools, c.opt)
		if (werr != nil) != (gerr != nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("%s: error %v, Render's %v", what, gerr, werr)
		}
		if werr != nil {
			return nil
		}
		if got.Prompt != want {
			t.Fatalf("%s: differs from Render at byte %d\n got: %q\nwant: %q", what, firstDiff(got.Prompt, want), got.Prompt, want)
		}
		return got
	}
	for ci, c := range convs {
		n := len(c.msgs)
		for cut := 1; cut <= n; cut++ {
			head := conv{c.msgs[:cut], c.tools, Options{AddGenerationPrompt: true}}
			prev := check(t, nil, head, "head")
			if prev == nil {
				continue
			}
			check(t, prev, c, "grown")
			check(t, prev, conv{c.msgs, c.tools, Options{AddGenerationPrompt: true, DisableThinking: true}}, "other options")
			check(t, prev, conv{c.msgs[:max(cut-1, 1)], c.tools, c.opt}, "cut")
			check(t, prev, conv{edit(c.msgs, rng.IntN(cut)), c.tools, c.opt}, "edited")
			check(t, prev, conv{c.msgs, c.tools[:len(c.tools)/2], c.opt}, "other tools")
			other := convs[(ci+1)%len(convs)]
			check(t, prev, other, "unrelated")
			// A chain: each render extends the one before.
			for k := cut + 1; k <= n && prev != nil; k++ {
				prev = check(t, prev, conv{c.msgs[:k], c.tools, Options{AddGenerationPrompt: true}}, "chain")
			}
		}
	}
}

// TestRenderAppendKeeps checks that an agent loop's next call renders
// only its new messages and the one before them.
func TestRenderAppendKeeps(t *testing.T) {
	msgs, tools, opt := loadFixture(t, benchFixture)
	n := len(msgs)
	prev, err := Qwen3{}.RenderAppend(nil, msgs[:n-2], tools, opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := prev.keep(msgs, tools, qwen3LastQuery(msgs)); got != n-3 {
		t.Errorf("keeps %d messages, want %d", got, n-3)
	}
	// An edit of message 2 keeps message 0 and 1 only.
	edited := append([]Message(nil), msgs...)
	edited[2].Content += "x"
	if got := prev.keep(edited, tools, qwen3LastQuery(edited)); got != 1 {
		t.Errorf("after an edit of message 2: keeps %d messages, want 1", got)
	}
	// Another tool list keeps nothing.
	if got := prev.keep(msgs, tools[:1], qwen3LastQuery(msgs)); got != 0 {
		t.Errorf("with other tools: keeps %d messages, want 0", got)
	}
}
