package chat

import (
	"strings"
	"testing"
)

// TestAppendOnly plays one agent step: render a prompt, take a completion as
// the model would generate it, parse it into the assistant message a harness
// sends back, add the next messages, and ask whether the new prompt extends
// the old prompt and completion.
func TestAppendOnly(t *testing.T) {
	const (
		call    = "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"
		compact = "<tool_call>\n{\"name\":\"bash\",\"arguments\":{\"command\":\"ls\"}}\n</tool_call>"
	)
	start := []Message{{Role: RoleSystem, Content: "You are an agent."}, {Role: RoleUser, Content: "List the files."}}
	toolResult := Message{Role: RoleTool, Content: "a.go\nb.go", ToolCallID: "call_1"}
	followUp := Message{Role: RoleUser, Content: "Now count them."}
	tests := []struct {
		name       string
		opt        Options
		completion string
		// keepReasoning: the harness sends reasoning_content back.
		keepReasoning bool
		then          Message
		extends       bool
		suffix        string
	}{
		{name: "tool loop with reasoning kept", completion: "<think>\nI will list.\n</think>\n\nListing.\n" + call + imEnd,
			keepReasoning: true, then: toolResult, extends: true,
			suffix: "\n" + imStart + "user\n<tool_response>\na.go\nb.go\n</tool_response>" + imEnd + "\n" + imStart + "assistant\n"},
		{name: "tool loop, harness drops reasoning", completion: "<think>\nI will list.\n</think>\n\nListing.\n" + call + imEnd,
			then: toolResult},
		{name: "tool loop with empty reasoning", completion: "<think>\n\n</think>\n\n" + call + imEnd,
			keepReasoning: true, then: toolResult},
		{name: "thinking disabled", opt: Options{DisableThinking: true}, completion: call + imEnd, then: toolResult},
		{name: "arguments in compact JSON", completion: "<think>\nx\n</think>\n\n" + compact + imEnd,
			keepReasoning: true, then: toolResult},
		{name: "new user query drops reasoning", completion: "<think>\nI will list.\n</think>\n\nThere are two files." + imEnd,
			keepReasoning: true, then: followUp},
		{name: "new user query after an answer without reasoning text", opt: Options{}, completion: "<think>\n\n</think>\n\nTwo files." + imEnd,
			keepReasoning: true, then: followUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := tt.opt
			opt.AddGenerationPrompt = true
			prompt, err := Qwen3{}.Render(start, testTools, opt)
			if err != nil {
				t.Fatal(err)
			}
			p := Qwen3{}.Parse(tt.completion, testTools)
			if p.Failed {
				t.Fatalf("completion did not parse: %s", p.Reason)
			}
			asst := Message{Role: RoleAssistant, Content: p.Content, ToolCalls: p.ToolCalls}
			if tt.keepReasoning {
				asst.ReasoningContent = p.Reasoning
			}
			next := append(append([]Message{}, start...), asst, tt.then)
			got, err := AppendOnly(Qwen3{}, prompt+tt.completion, next, testTools, opt)
			if err != nil {
				t.Fatal(err)
			}
			if got.Extends != tt.extends {
				t.Fatalf("Extends = %v, want %v\nprev: %q\nnext: %q", got.Extends, tt.extends, prompt+tt.completion, got.Prompt)
			}
			if got.Suffix != tt.suffix {
				t.Errorf("Suffix = %q, want %q", got.Suffix, tt.suffix)
			}
			if tt.extends && got.Prompt != prompt+tt.completion+got.Suffix {
				t.Errorf("Prompt is not prev + Suffix")
			}
			if !tt.extends && strings.HasPrefix(got.Prompt, prompt+tt.completion) {
				t.Errorf("the prompt extends prev but Extends is false")
			}
		})
	}
}

func TestAppendOnlyError(t *testing.T) {
	if _, err := AppendOnly(Qwen3{}, "", nil, nil, Options{}); err == nil {
		t.Fatal("no error for an empty conversation")
	}
}
