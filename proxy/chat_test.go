package proxy

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
)

// received is what a client got for one call, in the proxy's terms.
type received struct {
	msg    chat.Message
	finish string
	usage  Usage
	id     string
}

// openaiClient calls rollout id of srv.
func openaiClient(url, id string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/rollout/"+id+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

var bashTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "bash",
	Description: openai.String("Run a shell command."),
	Parameters: shared.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"cmd": map[string]any{"type": "string"}},
		"required":   []string{"cmd"},
	},
})

// extraString reads a string field the SDK does not model
// (reasoning_content).
func extraString(t testing.TB, raw string) string {
	t.Helper()
	if raw == "" || raw == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("extra field %s: %v", raw, err)
	}
	return s
}

// chatCall makes one call with the SDK, streamed or not, and returns what
// the client received and the message to append to the conversation.
func chatCall(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, stream bool) (received, openai.ChatCompletionMessageParamUnion) {
	t.Helper()
	ctx := context.Background()
	var (
		msg       openai.ChatCompletionMessage
		reasoning string
		got       received
	)
	if !stream {
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("%d choices", len(resp.Choices))
		}
		msg = resp.Choices[0].Message
		reasoning = extraString(t, msg.JSON.ExtraFields["reasoning_content"].Raw())
		got.finish, got.id = resp.Choices[0].FinishReason, resp.ID
		got.usage = Usage{PromptTokens: int(resp.Usage.PromptTokens), CompletionTokens: int(resp.Usage.CompletionTokens),
			CachedTokens: int(resp.Usage.PromptTokensDetails.CachedTokens)}
		if resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
			t.Errorf("usage total %d", resp.Usage.TotalTokens)
		}
	} else {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		sawUsage := false
		for s.Next() {
			c := s.Current()
			acc.AddChunk(c)
			if len(c.Choices) > 0 {
				reasoning += extraString(t, c.Choices[0].Delta.JSON.ExtraFields["reasoning_content"].Raw())
			} else if c.Usage.TotalTokens > 0 {
				sawUsage = true
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if !sawUsage {
			t.Error("no usage chunk")
		}
		msg = acc.Choices[0].Message
		got.finish, got.id = acc.Choices[0].FinishReason, acc.ID
		got.usage = Usage{PromptTokens: int(acc.Usage.PromptTokens), CompletionTokens: int(acc.Usage.CompletionTokens),
			CachedTokens: int(acc.Usage.PromptTokensDetails.CachedTokens)}
	}
	got.msg = chat.Message{Role: chat.RoleAssistant, Content: msg.Content, ReasoningContent: reasoning}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "function" || tc.ID == "" {
			t.Errorf("tool call %+v", tc)
		}
		got.msg.ToolCalls = append(got.msg.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
	}
	param := msg.ToAssistantMessageParam()
	param.SetExtraFields(map[string]any{"reasoning_content": reasoning})
	return got, openai.ChatCompletionMessageParamUnion{OfAssistant: &param}
}

// asText renders a received assistant message as the model must have
// written it: the template's rendering of the turn.
func asText(t testing.TB, m chat.Message) string {
	return assistantTurn(t, []chat.Message{{Role: chat.RoleUser, Content: "q"}}, nil, m)
}

func TestChatSDK(t *testing.T) {
	completions := []string{
		"<think>\nI should list the files.\n</think>\n\nLet me look.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls -la\"}}\n</tool_call><|im_end|>",
		"<think>\nTwo calls now.\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"cat a.py\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"pytest -q\"}}\n</tool_call><|im_end|>",
		"<think>\nThe tests pass — done ✓.\n</think>\n\nI fixed the off-by-one in `calc.py`.\n\nAll tests pass.\n<|im_end|>",
	}
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "non-streaming", true: "streaming"}[stream]
		t.Run(name, func(t *testing.T) {
			tok := testTokenizer(t)
			gen := newScripted(t, tok, completions...)
			p, srv := testProxy(t, gen)
			client := openaiClient(srv.URL, "r1")
			params := openai.ChatCompletionNewParams{
				Model: "tiny",
				Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("You are a coding agent."),
					openai.UserMessage("Fix the bug in calc.py."),
				},
				Tools: []openai.ChatCompletionToolUnionParam{bashTool},
			}
			var got []received
			for turn := 0; turn < 3; turn++ {
				r, asst := chatCall(t, client, params, stream)
				got = append(got, r)
				params.Messages = append(params.Messages, asst)
				for _, tc := range r.msg.ToolCalls {
					params.Messages = append(params.Messages, openai.ToolMessage("output of "+tc.Name, tc.ID))
				}
			}
			// What the clients saw.
			wantCalls := [][]string{{"bash", `{"cmd": "ls -la"}`}, {"bash", `{"cmd": "cat a.py"}`, "bash", `{"cmd": "pytest -q"}`}, nil}
			wantFinish := []string{"tool_calls", "tool_calls", "stop"}
			for i, r := range got {
				var calls []string
				for _, tc := range r.msg.ToolCalls {
					calls = append(calls, tc.Name, string(tc.Arguments))
				}
				if !slices.Equal(calls, wantCalls[i]) {
					t.Errorf("turn %d: tool calls %q, want %q", i, calls, wantCalls[i])
				}
				if r.finish != wantFinish[i] {
					t.Errorf("turn %d: finish %q, want %q", i, r.finish, wantFinish[i])
				}
			}
			if got[0].msg.Content != "Let me look." || got[0].msg.ReasoningContent != "I should list the files." {
				t.Errorf("turn 0: content %q reasoning %q", got[0].msg.Content, got[0].msg.ReasoningContent)
			}
			if got[2].msg.Content != "I fixed the off-by-one in `calc.py`.\n\nAll tests pass.\n" {
				t.Errorf("turn 2: content %q", got[2].msg.Content)
			}

			// What was recorded: one segment that grew over the three
			// turns, whose sampled runs decode to exactly what the
			// client received, with the usage the client was told.
			rec := finish(t, p, "r1")
			if len(rec.Segments) != 1 {
				t.Fatalf("%d segments (%+v), want 1", len(rec.Segments), rec.Info)
			}
			seg := rec.Segments[0]
			if seg.RunID != "run" || seg.Iteration != 2 || seg.RolloutID != "r1" || seg.FirstCall != 0 || seg.LastCall != 2 {
				t.Errorf("segment identity %+v", seg)
			}
			if seg.PolicyVersion != 3 || seg.Temperature != 1 || seg.TopP != 1 || seg.FinishReason != infer.FinishStop {
				t.Errorf("segment version %d sampling %v %v finish %q", seg.PolicyVersion, seg.Temperature, seg.TopP, seg.FinishReason)
			}
			runs := sampledRuns(seg.CompletionTokenIDs, seg.LossMask)
			if len(runs) != 3 {
				t.Fatalf("%d sampled runs, want 3", len(runs))
			}
			reqs := gen.requests()
			for i, r := range got {
				if text := decode(t, tok, runs[i]); text != asText(t, r.msg) {
					t.Errorf("turn %d: recorded ids decode to\n%q\nthe client received\n%q", i, text, asText(t, r.msg))
				}
				want := Usage{PromptTokens: len(reqs[i].Prompt), CompletionTokens: len(runs[i]), CachedTokens: len(reqs[i].Prompt) / 2}
				if r.usage != want {
					t.Errorf("turn %d: usage %+v, want %+v", i, r.usage, want)
				}
				if !slices.Equal(reqs[i].Prompt, append(slices.Clone(seg.PromptTokenIDs), seg.CompletionTokenIDs[:len(reqs[i].Prompt)-len(seg.PromptTokenIDs)]...)) {
					t.Errorf("turn %d: the engine's prompt is not the segment so far", i)
				}
			}
			m := rec.Metrics
			if m.Calls != 3 || m.PrefixChecks != 2 || m.PrefixConsistency() != 1 || m.ToolCalls != 3 || m.ToolParseFailures != 0 || m.StreamMismatches != 0 {
				t.Errorf("metrics %+v", m)
			}
			if m.CompletionTokens != len(runs[0])+len(runs[1])+len(runs[2]) {
				t.Errorf("metrics count %d completion tokens", m.CompletionTokens)
			}
		})
	}
}
