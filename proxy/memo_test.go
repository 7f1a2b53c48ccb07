package proxy

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/chat"
)

// TestMemos plays sequences of calls on two proxies, one that decodes and
// renders from the memos of earlier calls and one that decodes and renders
// every call whole, and requires the same records (segments, their
// reasons, retries, metrics) and the expected fork. The first call of each
// is the 20-turn conversation without its last assistant turn, answered
// with that turn, so that the whole conversation extends it; the next ones
// edit the history in every way the memos must notice.
func TestMemos(t *testing.T) {
	msgs, tools := wireConversation(t)
	last := len(msgs) - 1
	for msgs[last]["role"] != "assistant" {
		last--
	}
	head := msgs[:last]
	full := msgs[:last+1]
	headTurn, e1 := chatFormat{}.decode(wireBody(t, head, tools))
	fullTurn, e2 := chatFormat{}.decode(wireBody(t, full, tools))
	if e1 != nil || e2 != nil {
		t.Fatal(e1, e2)
	}
	answer := assistantTurn(t, headTurn.Messages, headTurn.Tools, fullTurn.Messages[last])
	call := firstToolCall(msgs)
	// more adds the answer of a call after the first, and a tool result.
	more := func(m []map[string]any) []map[string]any {
		return append(append([]map[string]any(nil), m...),
			map[string]any{"role": "assistant", "content": "Done.", "reasoning_content": "ok"},
			map[string]any{"role": "tool", "content": "out"})
	}
	otherTools := edited(t, []map[string]any{{"t": tools}}, func(m []map[string]any) {
		m[0]["t"].([]any)[0].(map[string]any)["function"].(map[string]any)["description"] = "changed"
	})[0]["t"].([]any)
	side := []map[string]any{{"role": "system", "content": "Write a title."}, {"role": "user", "content": "the chat"}}
	sideMore := append(append([]map[string]any(nil), side...), map[string]any{"role": "assistant", "content": "Done."},
		map[string]any{"role": "user", "content": "Shorter."})
	earlyEdit := edited(t, full, func(m []map[string]any) { m[3]["content"] = "edited" })
	tests := []struct {
		name   string
		bodies [][]byte
		fork   string // the one fork's reason, "" for none
	}{
		{"append", [][]byte{wireBody(t, head, tools), wireBody(t, full, tools)}, ""},
		{"append and more", [][]byte{wireBody(t, head, tools), wireBody(t, full, tools), wireBody(t, more(full), tools)}, ""},
		{"early message edited", [][]byte{wireBody(t, head, tools), wireBody(t, earlyEdit, tools), wireBody(t, more(earlyEdit), tools)}, ReasonRewrite},
		{"tool call arguments edited", [][]byte{wireBody(t, head, tools), wireBody(t, edited(t, full, func(m []map[string]any) {
			m[call]["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"] = `{"command": "edited"}`
		}), tools)}, ReasonRewrite},
		{"system prompt edited", [][]byte{wireBody(t, head, tools), wireBody(t, edited(t, full, func(m []map[string]any) {
			m[0]["content"] = "You are someone else."
		}), tools)}, ReasonSystemChanged},
		{"tools changed", [][]byte{wireBody(t, head, tools), wireBody(t, full, otherTools)}, ReasonToolsChanged},
		{"side request between", [][]byte{wireBody(t, head, tools), wireBody(t, side, nil), wireBody(t, full, tools), wireBody(t, sideMore, nil)}, ""},
		// The retry's answer is another, which the third call does not
		// carry.
		{"retry", [][]byte{wireBody(t, head, tools), wireBody(t, head, tools), wireBody(t, full, tools)}, ReasonCompletionRerendered},
		{"thinking switched off", [][]byte{wireBody(t, head, tools),
			[]byte(`{"chat_template_kwargs": {"enable_thinking": false}, ` + string(wireBody(t, full, tools))[1:])}, ""},
	}
	play := func(t *testing.T, memos bool, bodies [][]byte) Record {
		t.Helper()
		gen := newScripted(t, testTokenizer(t), answer, "<think>\nok\n</think>\n\nDone.<|im_end|>")
		p, err := New(Options{Generator: gen, Tokenizer: testTokenizer(t), Template: chat.Qwen3{}, ModelName: "tiny",
			Clock:  func() time.Time { return time.Unix(1700000000, 0) },
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		p.noMemos = !memos
		if err := p.Open("r1", RolloutOptions{Seed: 42}); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p)
		defer srv.Close()
		for _, body := range bodies {
			postChat(t, srv.URL+"/rollout/r1/v1/chat/completions", string(body))
		}
		if ro := p.lookup("r1"); memos && len(ro.recall()) == 0 {
			t.Error("no memo remembered")
		}
		rec := finish(t, p, "r1")
		if ro := p.lookup("r1"); ro != nil {
			t.Error("rollout still open")
		}
		return rec
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := play(t, true, tt.bodies), play(t, false, tt.bodies)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("with memos:\n%+v\n%+v\nwithout:\n%+v\n%+v", got.Info, got.Metrics, want.Info, want.Metrics)
			}
			forks := 0
			for _, n := range got.Metrics.Forks {
				forks += n
			}
			switch {
			case tt.fork == "" && forks != 0:
				t.Errorf("forks %v, want none", got.Metrics.Forks)
			case tt.fork != "" && got.Metrics.Forks[tt.fork] != 1:
				t.Errorf("forks %v, want one %s", got.Metrics.Forks, tt.fork)
			}
		})
	}
}

// TestMemosReleased: Finish drops a rollout's memos.
func TestMemosReleased(t *testing.T) {
	gen := newScripted(t, testTokenizer(t), "Done.<|im_end|>")
	p, srv := testProxy(t, gen)
	postChat(t, srv.URL+"/rollout/r1/v1/chat/completions", okBody)
	ro := p.lookup("r1")
	if len(ro.recall()) != 1 {
		t.Fatalf("%d memos after a call, want 1", len(ro.recall()))
	}
	finish(t, p, "r1")
	if n := len(ro.recall()); n != 0 {
		t.Errorf("%d memos after Finish, want 0", n)
	}
}
