package chat_test

import (
	"encoding/json"
	"fmt"

	"github.com/legorl/legorl/policy/chat"
)

var tools = []chat.Tool{{
	Name:        "bash",
	Description: "Run a shell command.",
	Parameters:  json.RawMessage(`{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}`),
}}

func ExampleQwen3_Render() {
	prompt, err := chat.Qwen3{}.Render([]chat.Message{
		{Role: chat.RoleUser, Content: "List the files."},
	}, nil, chat.Options{AddGenerationPrompt: true, DisableThinking: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", prompt)
	// Output:
	// "<|im_start|>user\nList the files.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
}

func ExampleQwen3_Parse() {
	out := chat.Qwen3{}.Parse("<think>\nUse ls.\n</think>\n\nListing.\n<tool_call>\n"+
		`{"name": "bash", "arguments": {"command": "ls"}}`+"\n</tool_call><|im_end|>", tools)
	fmt.Printf("reasoning %q, content %q\n", out.Reasoning, out.Content)
	for _, c := range out.ToolCalls {
		fmt.Println(c.Name, string(c.Arguments))
	}
	bad := chat.Qwen3{}.Parse(`<tool_call>{"name": "bash", "arguments": {`, tools)
	fmt.Println(bad.Failed, bad.Reason)
	// Output:
	// reasoning "Use ls.", content "Listing."
	// bash {"command": "ls"}
	// true unclosed <tool_call>
}

func ExampleQwen3Coder_Parse() {
	out := chat.Qwen3Coder{}.Parse("<tool_call>\n<function=bash>\n<parameter=command>\nls -la\n</parameter>\n</function>\n</tool_call>", tools)
	fmt.Println(out.ToolCalls[0].Name, string(out.ToolCalls[0].Arguments))
	// Output:
	// bash {"command": "ls -la"}
}

func ExampleAppendOnly() {
	q := chat.Qwen3{}
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}
	prompt, _ := q.Render(msgs, nil, chat.Options{AddGenerationPrompt: true})
	completion := "<think>\nGreet back.\n</think>\n\nHello!<|im_end|>"

	// A new user query: the template drops the earlier reasoning, so the
	// new prompt does not extend what the model saw; start a new segment.
	p := q.Parse(completion, nil)
	msgs = append(msgs,
		chat.Message{Role: chat.RoleAssistant, Content: p.Content, ReasoningContent: p.Reasoning},
		chat.Message{Role: chat.RoleUser, Content: "How are you?"})
	c, _ := chat.AppendOnly(q, prompt+completion, msgs, nil, chat.Options{AddGenerationPrompt: true})
	fmt.Println(c.Extends)
	// Output:
	// false
}
