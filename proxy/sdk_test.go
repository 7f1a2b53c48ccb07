package proxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/legorl/legorl/policy/chat"
)

// e2eCompletions are a tool call then a final answer, in the model's
// canonical format.
var e2eCompletions = []string{
	"<think>\nList first.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call><|im_end|>",
	"<think>\nAll good.\n</think>\n\nThere are two files.<|im_end|>",
}

// checkE2E checks a rollout of two calls through one wire format: one
// segment that grew, whose sampled runs decode to exactly what the client
// received, with the output token counts the client was told.
func checkE2E(t *testing.T, p *Proxy, got []chat.Message, outputTokens []int) {
	t.Helper()
	tok := p.tok
	rec := finish(t, p, "r1")
	if len(rec.Segments) != 1 || rec.Metrics.PrefixConsistency() != 1 || rec.Metrics.Calls != 2 {
		t.Fatalf("segments %+v metrics %+v", rec.Info, rec.Metrics)
	}
	runs := sampledRuns(rec.Segments[0].CompletionTokenIDs, rec.Segments[0].LossMask)
	if len(runs) != 2 {
		t.Fatalf("%d sampled runs", len(runs))
	}
	for i, m := range got {
		if text := decode(t, tok, runs[i]); text != asText(t, m) {
			t.Errorf("call %d: recorded ids decode to\n%q\nthe client received\n%q", i, text, asText(t, m))
		}
		if outputTokens[i] != len(runs[i]) {
			t.Errorf("call %d: the client was told %d output tokens, %d recorded", i, outputTokens[i], len(runs[i]))
		}
	}
}

// TestMessagesSDKEndToEnd: the Anthropic SDK against the proxy, a tool
// call then the answer (streamed), and count_tokens.
func TestMessagesSDKEndToEnd(t *testing.T) {
	tok := testTokenizer(t)
	p, srv := testProxy(t, newScripted(t, tok, e2eCompletions...))
	client := anthropic.NewClient(aoption.WithBaseURL(srv.URL+"/rollout/r1"), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model: "tiny", MaxTokens: 256,
		System:   []anthropic.TextBlockParam{{Text: "You are a coding agent."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many files?"))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "shell", Description: anthropic.String("Run a command."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}}}}},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
	}
	asMessage := func(m *anthropic.Message) chat.Message {
		out := chat.Message{Role: chat.RoleAssistant}
		for _, b := range m.Content {
			switch b.Type {
			case "thinking":
				out.ReasoningContent += b.Thinking
			case "text":
				out.Content += b.Text
			case "tool_use":
				out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: json.RawMessage(b.Input)})
			}
		}
		return out
	}
	first, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	m1 := asMessage(first)
	if first.StopReason != "tool_use" || len(m1.ToolCalls) != 1 || m1.ToolCalls[0].Name != "shell" {
		t.Fatalf("first reply %+v", first)
	}
	if in := first.Usage.InputTokens + first.Usage.CacheReadInputTokens; in == 0 {
		t.Error("no input tokens reported")
	}
	params.Messages = append(params.Messages, first.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(m1.ToolCalls[0].ID, "a.py\nb.py", false)))

	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "tiny", Messages: params.Messages,
		System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System}, Thinking: params.Thinking, Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: params.Tools[0].OfTool}}})
	if err != nil {
		t.Fatal(err)
	}

	stream := client.Messages.NewStreaming(ctx, params)
	var second anthropic.Message
	for stream.Next() {
		if err := second.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	m2 := asMessage(&second)
	if second.StopReason != "end_turn" || m2.Content != "There are two files." {
		t.Fatalf("second reply %+v", second)
	}
	if in := second.Usage.InputTokens + second.Usage.CacheReadInputTokens; in != count.InputTokens {
		t.Errorf("count_tokens said %d, the call used %d", count.InputTokens, in)
	}
	checkE2E(t, p, []chat.Message{m1, m2}, []int{int(first.Usage.OutputTokens), int(second.Usage.OutputTokens)})
}

// TestResponsesSDKEndToEnd: the OpenAI Responses API through the SDK, the
// way Codex calls it (stateless: the output items go back as input).
func TestResponsesSDKEndToEnd(t *testing.T) {
	tok := testTokenizer(t)
	p, srv := testProxy(t, newScripted(t, tok, e2eCompletions...))
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/rollout/r1/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:        "tiny",
		Instructions: openai.String("You are a coding agent."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("How many files?", responses.EasyInputMessageRoleUser),
		}},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "shell", Description: openai.String("Run a command."),
			Strict: openai.Bool(false), Parameters: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}},
		Store: openai.Bool(false),
	}
	asMessage := func(r *responses.Response) chat.Message {
		out := chat.Message{Role: chat.RoleAssistant}
		for _, item := range r.Output {
			switch item.Type {
			case "reasoning":
				for _, s := range item.AsReasoning().Summary {
					out.ReasoningContent += s.Text
				}
			case "message":
				for _, c := range item.AsMessage().Content {
					out.Content += c.Text
				}
			case "function_call":
				fc := item.AsFunctionCall()
				out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: fc.CallID, Name: fc.Name, Arguments: json.RawMessage(fc.Arguments)})
			}
		}
		return out
	}
	first, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	m1 := asMessage(first)
	if len(m1.ToolCalls) != 1 {
		t.Fatalf("first reply %s", first.RawJSON())
	}
	input := outputAsInput(params.Input.OfInputItemList, first)
	out := responses.ResponseInputItemParamOfFunctionCallOutput("a.py\nb.py")
	out.OfFunctionCallOutput.CallID = openai.String(m1.ToolCalls[0].ID)
	params.Input.OfInputItemList = append(input, out)

	stream := client.Responses.NewStreaming(ctx, params)
	var second *responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			r := ev.Response
			second = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if second == nil {
		t.Fatal("no response.completed")
	}
	m2 := asMessage(second)
	if m2.Content != "There are two files." {
		t.Fatalf("second reply %s", second.RawJSON())
	}
	checkE2E(t, p, []chat.Message{m1, m2}, []int{int(first.Usage.OutputTokens), int(second.Usage.OutputTokens)})
}
