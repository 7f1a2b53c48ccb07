package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
)

// chatReply is the part of a non-streamed reply the tests read.
type chatReply struct {
	ID      string `json:"id"`
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func postChat(t testing.TB, url, body string) chatReply {
	t.Helper()
	r := do(t, "POST", url, body)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var out chatReply
	if err := json.Unmarshal([]byte(r.body), &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("reply %s: %v", r.body, err)
	}
	return out
}

const toolsField = `"tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]`

func TestCompletionShapes(t *testing.T) {
	tok := testTokenizer(t)
	tests := []struct {
		name, completion, extra string
		content                 *string
		calls                   int
		finish                  string
		parseFailures, toolFail int
		cut                     int // with cut > 0, content is the first cut tokens' text
	}{
		{"tool call", "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call><|im_end|>", "", nil, 1, "tool_calls", 0, 0, 0},
		{"tool_choice none keeps markup as text", "<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}\n</tool_call><|im_end|>", `"tool_choice": "none",`,
			ptr("<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}\n</tool_call>"), 0, "stop", 0, 0, 0},
		{"tool_choice required is not enforced", "plain<|im_end|>", `"tool_choice": "required",`, ptr("plain"), 0, "stop", 0, 0, 0},
		{"broken tool call", "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\n</tool_call><|im_end|>", "",
			ptr("<tool_call>\n{\"name\": \"bash\", \"arguments\": {\n</tool_call>"), 0, "stop", 1, 1, 0},
		{"unknown function", "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call><|im_end|>", "",
			ptr("<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"), 0, "stop", 1, 1, 0},
		{"cut by max_tokens", "one two three four five<|im_end|>", `"max_tokens": 3,`, nil, 0, "length", 0, 0, 3},
		{"unclosed think", "<think>\nnever ends", `"max_tokens": 4,`, nil, 0, "length", 1, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := newScripted(t, tok, tt.completion)
			p, srv := testProxy(t, gen)
			body := `{` + tt.extra + toolsField + `, "messages": [{"role": "user", "content": "go"}]}`
			r := postChat(t, srv.URL+"/rollout/r1/v1/chat/completions", body)
			c := r.Choices[0]
			if tt.cut > 0 {
				tt.content = ptr(decode(t, tok, tok.EncodeSpecial(tt.completion)[:tt.cut]))
				if r.Usage.CompletionTokens != tt.cut {
					t.Errorf("%d completion tokens, want %d", r.Usage.CompletionTokens, tt.cut)
				}
			}
			if (c.Message.Content == nil) != (tt.content == nil) || (tt.content != nil && *c.Message.Content != *tt.content) {
				t.Errorf("content %v, want %v", deref(c.Message.Content), deref(tt.content))
			}
			if len(c.Message.ToolCalls) != tt.calls || c.FinishReason != tt.finish {
				t.Errorf("%d tool calls, finish %q; want %d %q", len(c.Message.ToolCalls), c.FinishReason, tt.calls, tt.finish)
			}
			for _, tc := range c.Message.ToolCalls {
				if !strings.HasPrefix(tc.ID, "call_") || !json.Valid([]byte(tc.Function.Arguments)) {
					t.Errorf("tool call %+v", tc)
				}
			}
			if reqs := gen.requests(); strings.Contains(tt.extra, "max_tokens") && reqs[0].MaxTokens == 0 {
				t.Error("max_tokens did not reach the engine")
			}
			m := finish(t, p, "r1").Metrics
			if m.ParseFailures != tt.parseFailures || m.ToolParseFailures != tt.toolFail || m.ToolCalls != tt.calls {
				t.Errorf("metrics parse %d tool %d calls %d", m.ParseFailures, m.ToolParseFailures, m.ToolCalls)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// TestSamplingInjected: whatever the harness sends, the engine samples with
// the rollout's settings and a seed derived from the rollout's seed and
// the call index; replaying a rollout gives the same seeds.
func TestSamplingInjected(t *testing.T) {
	tok := testTokenizer(t)
	gen := newScripted(t, tok, "a<|im_end|>")
	p, srv := testProxy(t, gen)
	top := infer.Sampling{Temperature: 0.7, TopP: 0.9, TopK: 20}
	if err := p.Open("r3", RolloutOptions{RunID: "run", Seed: 42, Sampling: top}); err != nil {
		t.Fatal(err)
	}
	body := `{"temperature": 0, "top_p": 0.1, "seed": 1, "messages": [{"role": "user", "content": "q%d"}]}`
	for _, id := range []string{"r1", "r3"} {
		for i := 0; i < 3; i++ {
			postChat(t, srv.URL+"/rollout/"+id+"/v1/chat/completions", strings.Replace(body, "%d", string(rune('0'+i)), 1))
		}
	}
	reqs := gen.requests()
	seen := map[uint64]bool{}
	for i, r := range reqs[:3] {
		if r.Sampling.Temperature != 1 || r.Sampling.TopP != 1 || r.Sampling.TopK != 0 {
			t.Errorf("call %d: sampling %+v, want the training default", i, r.Sampling)
		}
		if seen[r.Sampling.Seed] {
			t.Errorf("call %d reuses seed %d", i, r.Sampling.Seed)
		}
		seen[r.Sampling.Seed] = true
		if r3 := reqs[3+i]; r3.Sampling.Seed != r.Sampling.Seed || r3.Sampling.Temperature != 0.7 || r3.Sampling.TopK != 20 {
			t.Errorf("call %d of r3: %+v (r1 seed %d)", i, r3.Sampling, r.Sampling.Seed)
		}
		if r.Session != "r1" || reqs[3+i].Session != "r3" {
			t.Errorf("sessions %q %q", r.Session, reqs[3+i].Session)
		}
		if len(r.StopTokens) == 0 {
			t.Error("no stop tokens")
		}
	}
	rec := finish(t, p, "r3")
	if s := rec.Segments[0]; s.Temperature != 0.7 || s.TopP != float32(0.9) || s.TopK != 20 {
		t.Errorf("recorded sampling %v %v %d", s.Temperature, s.TopP, s.TopK)
	}
}

// TestSerialized: concurrent calls of one rollout run one at a time and
// all get answers; calls of different rollouts do not wait on each other.
func TestSerialized(t *testing.T) {
	tok := testTokenizer(t)
	gen := newScripted(t, tok, "ok<|im_end|>")
	gen.hook = func(ctx context.Context, call int, req infer.Request) error {
		time.Sleep(2 * time.Millisecond)
		return nil
	}
	p, srv := testProxy(t, gen)
	if err := p.Open("r2", RolloutOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := []string{"r1", "r2"}[i%2]
			body := `{"messages": [{"role": "user", "content": "q` + string(rune('a'+i)) + `"}]}`
			if r := do(t, "POST", srv.URL+"/rollout/"+id+"/v1/chat/completions", body); r.status != 200 {
				t.Errorf("call %d: status %d %s", i, r.status, r.body)
			}
		}()
	}
	wg.Wait()
	for _, id := range []string{"r1", "r2"} {
		if m := finish(t, p, id).Metrics; m.Calls != 8 {
			t.Errorf("%s: %d calls", id, m.Calls)
		}
	}
}

// TestClientGoesAway: a client that disconnects cancels its generation,
// nothing is recorded for it, and the rollout keeps serving.
func TestClientGoesAway(t *testing.T) {
	tok := testTokenizer(t)
	gen := newScripted(t, tok, "slow<|im_end|>", "fast<|im_end|>")
	canceled := make(chan error, 1)
	gen.hook = func(ctx context.Context, call int, req infer.Request) error {
		if call > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			canceled <- ctx.Err()
			return ctx.Err()
		case <-time.After(10 * time.Second):
			canceled <- nil
			return nil
		}
	}
	p, srv := testProxy(t, gen)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/rollout/r1/v1/chat/completions", strings.NewReader(okBody))
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if err := <-canceled; err == nil {
		t.Fatal("the generation was not canceled")
	}
	r := postChat(t, srv.URL+"/rollout/r1/v1/chat/completions", okBody)
	if got := deref(r.Choices[0].Message.Content); got != "fast" {
		t.Errorf("content %v", got)
	}
	rec := finish(t, p, "r1")
	if rec.Metrics.Calls != 2 || rec.Metrics.Failed != 1 || len(rec.Segments) != 1 || rec.Segments[0].FirstCall != 1 {
		t.Errorf("metrics %+v, segments %+v", rec.Metrics, rec.Info)
	}
}

// TestRolloutLifecycle: Open, Finish, 404 afterwards, the default rollout.
func TestRolloutLifecycle(t *testing.T) {
	tok := testTokenizer(t)
	p, srv := testProxy(t, newScripted(t, tok, "ok<|im_end|>"))
	if err := p.Open("r1", RolloutOptions{}); !errors.Is(err, ErrRolloutExists) {
		t.Errorf("Open twice: %v", err)
	}
	if err := p.Open("bad", RolloutOptions{Sampling: infer.Sampling{Temperature: -1}}); !errors.Is(err, ErrOptions) {
		t.Errorf("Open with temperature -1: %v", err)
	}
	postChat(t, srv.URL+"/v1/chat/completions", okBody)
	if rec := finish(t, p, DefaultRollout); len(rec.Segments) != 1 || rec.Segments[0].RolloutID != DefaultRollout {
		t.Errorf("default rollout record %+v", rec.Info)
	}
	finish(t, p, "r1")
	if _, err := p.Finish("r1"); !errors.Is(err, ErrNoRollout) {
		t.Errorf("Finish twice: %v", err)
	}
	if r := do(t, "POST", srv.URL+"/rollout/r1/v1/chat/completions", okBody); r.status != 404 {
		t.Errorf("after Finish: status %d", r.status)
	}
	if _, err := New(Options{}); !errors.Is(err, ErrOptions) {
		t.Errorf("New without options: %v", err)
	}
}

// TestRotate: Rotate hands back what the rollout recorded and leaves a
// fresh one open under the same id and options, with nothing lost between.
func TestRotate(t *testing.T) {
	tok := testTokenizer(t)
	p, srv := testProxy(t, newScripted(t, tok, "one<|im_end|>", "two<|im_end|>", "three<|im_end|>"))
	url := srv.URL + "/rollout/r1/v1/chat/completions"
	postChat(t, url, okBody)
	postChat(t, url, okBody) // a retry of the first call: rolled back, one segment
	rec, err := p.Rotate("r1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Metrics.Calls != 2 || len(rec.Segments) != 1 || rec.Segments[0].RunID != "run" {
		t.Fatalf("first record: calls %d, %d segments, %+v", rec.Metrics.Calls, len(rec.Segments), rec.Info)
	}
	postChat(t, url, okBody)
	rec2 := finish(t, p, "r1")
	if rec2.Metrics.Calls != 1 || len(rec2.Segments) != 1 || rec2.Segments[0].RunID != "run" || rec2.Segments[0].Iteration != 2 {
		t.Fatalf("second record: calls %d, %+v", rec2.Metrics.Calls, rec2.Segments)
	}
	if got := decode(t, tok, rec2.Segments[0].CompletionTokenIDs); got != "three<|im_end|>" {
		t.Errorf("second record completion %q", got)
	}
	if _, err := p.Rotate("nope"); !errors.Is(err, ErrNoRollout) {
		t.Errorf("Rotate of an unknown rollout: %v", err)
	}
}

// TestModelsSDK: the OpenAI SDK lists and retrieves the model.
func TestModelsSDK(t *testing.T) {
	_, srv := testProxy(t, newScripted(t, testTokenizer(t)))
	client := openaiClient(srv.URL, "r1")
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "tiny" || page.Data[0].OwnedBy != "legorl" {
		t.Errorf("models %+v", page.Data)
	}
	m, err := client.Models.Get(context.Background(), "tiny")
	if err != nil || m.ID != "tiny" {
		t.Errorf("get: %+v %v", m, err)
	}
}

// TestSideAndRetryOverHTTP: a title request beside the agent is a side
// segment, and a call sent twice rolls the first generation back.
func TestSideAndRetryOverHTTP(t *testing.T) {
	tok := testTokenizer(t)
	gen := newScripted(t, tok,
		"<think>\nlook\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}\n</tool_call><|im_end|>",
		"<think>\n\n</think>\n\nA title<|im_end|>",
		"<think>\nfirst\n</think>\n\nDone.<|im_end|>",
		"<think>\nsecond\n</think>\n\nDone!<|im_end|>")
	p, srv := testProxy(t, gen)
	url := srv.URL + "/rollout/r1/v1/chat/completions"
	first := postChat(t, url, `{`+toolsField+`, "messages": [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix it"}]}`)
	tc := first.Choices[0].Message.ToolCalls[0]
	postChat(t, url, `{"messages": [{"role": "system", "content": "Write a title."}, {"role": "user", "content": "fix it"}]}`)
	turn2 := `{` + toolsField + `, "messages": [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix it"},
		{"role": "assistant", "content": "", "reasoning_content": "look", "tool_calls": [{"id": "` + tc.ID + `", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "` + tc.ID + `", "content": "ok"}]}`
	postChat(t, url, turn2)
	last := postChat(t, url, turn2)
	if deref(last.Choices[0].Message.Content) != "Done!" {
		t.Errorf("retry answered %v", deref(last.Choices[0].Message.Content))
	}
	rec := finish(t, p, "r1")
	if len(rec.Segments) != 2 || rec.Info[0] != (SegmentInfo{Reason: ReasonFirst}) || rec.Info[1] != (SegmentInfo{Side: true, Reason: ReasonSide}) {
		t.Fatalf("segments %+v", rec.Info)
	}
	if len(rec.Retries) != 1 || rec.Retries[0].Call != 2 || rec.Retries[0].RetriedBy != 3 {
		t.Fatalf("retries %+v", rec.Retries)
	}
	if got := decode(t, tok, rec.Retries[0].Tokens); got != "<think>\nfirst\n</think>\n\nDone.<|im_end|>" {
		t.Errorf("audit copy %q", got)
	}
	runs := sampledRuns(rec.Segments[0].CompletionTokenIDs, rec.Segments[0].LossMask)
	if len(runs) != 2 || decode(t, tok, runs[1]) != "<think>\nsecond\n</think>\n\nDone!<|im_end|>" {
		t.Errorf("main segment runs %d", len(runs))
	}
	reqs := gen.requests()
	if reqs[1].Session != "r1"+sideSession || !slicesEqual(reqs[2].Prompt, reqs[3].Prompt) {
		t.Errorf("side session %q, retry prompt equal %v", reqs[1].Session, slicesEqual(reqs[2].Prompt, reqs[3].Prompt))
	}
	m := rec.Metrics
	if m.SideRequests != 1 || m.Retries != 1 || m.PrefixChecks != 1 || m.PrefixConsistent != 1 || len(m.Forks) != 0 {
		t.Errorf("metrics %+v", m)
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestForkOverHTTP: a harness that drops reasoning forks the segment and
// the metric names why.
func TestForkOverHTTP(t *testing.T) {
	tok := testTokenizer(t)
	gen := newScripted(t, tok, "<think>\nlook\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {}}\n</tool_call><|im_end|>", "<think>\nx\n</think>\n\nok<|im_end|>")
	p, srv := testProxy(t, gen)
	url := srv.URL + "/rollout/r1/v1/chat/completions"
	postChat(t, url, `{`+toolsField+`, "messages": [{"role": "user", "content": "fix it"}]}`)
	postChat(t, url, `{`+toolsField+`, "messages": [{"role": "user", "content": "fix it"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "c", "content": "ok"}]}`)
	rec := finish(t, p, "r1")
	if len(rec.Segments) != 2 || rec.Metrics.Forks[ReasonReasoningDropped] != 1 || rec.Metrics.PrefixConsistency() != 0 {
		t.Errorf("segments %+v metrics %+v", rec.Info, rec.Metrics)
	}
	// The forked segment's prompt is the new rendering, tokenized whole.
	want, _ := chat.Qwen3{}.Render([]chat.Message{{Role: chat.RoleUser, Content: "fix it"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{Name: "bash", Arguments: json.RawMessage("{}")}}},
		{Role: chat.RoleTool, Content: "ok"}}, []chat.Tool{{Name: "bash", Parameters: json.RawMessage(`{"type": "object"}`)}}, chat.Options{AddGenerationPrompt: true})
	if got := decode(t, tok, rec.Segments[1].PromptTokenIDs); got != want {
		t.Errorf("fork prompt\n%q\nwant\n%q", got, want)
	}
}
