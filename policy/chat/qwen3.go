package chat

import (
	"fmt"
	"strings"
)

// Qwen3 is the chat format of the Qwen3 release (dense and MoE models):
// ChatML turns, tools listed as JSON in the system turn, tool calls
// as <tool_call>{"name": ..., "arguments": {...}}</tool_call>, tool results
// grouped as <tool_response> blocks in one user turn, and <think> reasoning
// that the template keeps only for the assistant turns after the last user
// query.
//
// Render reproduces the chat_template of Qwen3's tokenizer_config.json
// (testdata/qwen3/chat_template.jinja) as Hugging Face transformers renders
// it; the golden tests compare it with real Jinja output. Later variants
// (the 2507 Thinking models open <think> in the generation prompt; other
// families use Qwen3-Coder's XML calls) differ in details and need their own
// template check.
type Qwen3 struct{}

const (
	imStart = "<|im_start|>"
	imEnd   = "<|im_end|>"

	qwen3ToolsHead = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	qwen3ToolsTail = "\n</tools>\n\nFor each function call, return a json object with function name and " +
		"arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n" +
		"{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" + imEnd + "\n"
)

// Render returns the prompt text for msgs and tools. It fails only on an
// empty conversation, an unknown role or arguments that are not JSON.
func (Qwen3) Render(msgs []Message, tools []Tool, opt Options) (string, error) {
	if err := checkMessages(msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(renderSizeHint(msgs, tools))
	if err := qwen3Header(&b, msgs, tools); err != nil {
		return "", err
	}
	lastQuery := qwen3LastQuery(msgs)
	for i := range msgs {
		if err := qwen3Message(&b, msgs, i, lastQuery); err != nil {
			return "", err
		}
	}
	qwen3GenerationPrompt(&b, opt)
	return b.String(), nil
}

// RenderAppend returns the rendering of msgs, tools and opt: its Prompt is
// what Render returns, and prev (nil for none), an earlier rendering by
// Qwen3, lends it the text of every leading message whose text msgs cannot
// change (see Rendering.keep).
func (Qwen3) RenderAppend(prev *Rendering, msgs []Message, tools []Tool, opt Options) (*Rendering, error) {
	if err := checkMessages(msgs); err != nil {
		return nil, err
	}
	r := &Rendering{msgs: msgs, tools: tools, lastQuery: qwen3LastQuery(msgs), starts: make([]int, len(msgs)+1)}
	from := prev.keep(msgs, tools, r.lastQuery)
	var b strings.Builder
	if from > 0 {
		b.Grow(prev.starts[from] + renderSizeHint(msgs[from:], nil))
		b.WriteString(prev.Prompt[:prev.starts[from]])
		copy(r.starts, prev.starts[:from])
	} else {
		b.Grow(renderSizeHint(msgs, tools))
		if err := qwen3Header(&b, msgs, tools); err != nil {
			return nil, err
		}
	}
	for i := from; i < len(msgs); i++ {
		r.starts[i] = b.Len()
		if err := qwen3Message(&b, msgs, i, r.lastQuery); err != nil {
			return nil, err
		}
	}
	r.starts[len(msgs)] = b.Len()
	qwen3GenerationPrompt(&b, opt)
	r.Prompt = b.String()
	return r, nil
}

// qwen3Header writes the system turn: the system prompt and the tools.
func qwen3Header(b *strings.Builder, msgs []Message, tools []Tool) error {
	if len(tools) > 0 {
		b.WriteString(imStart + "system\n")
		if msgs[0].Role == RoleSystem {
			b.WriteString(msgs[0].Content)
			b.WriteString("\n\n")
		}
		b.WriteString(qwen3ToolsHead)
		for i, t := range tools {
			b.WriteByte('\n')
			if err := appendQwen3Tool(b, t); err != nil {
				return fmt.Errorf("tool %d (%s): %w", i, t.Name, err)
			}
		}
		b.WriteString(qwen3ToolsTail)
	} else if msgs[0].Role == RoleSystem {
		b.WriteString(imStart + "system\n")
		b.WriteString(msgs[0].Content)
		b.WriteString(imEnd + "\n")
	}
	return nil
}

// qwen3Message writes the text of message i (a leading system message has
// none: the header holds it). It depends on the message, the roles of its
// neighbours, whether it is the last message and whether it comes after
// lastQuery; RenderAppend relies on that list.
func qwen3Message(b *strings.Builder, msgs []Message, i, lastQuery int) error {
	m, last := msgs[i], len(msgs)-1
	switch {
	case m.Role == RoleUser || (m.Role == RoleSystem && i > 0):
		b.WriteString(imStart)
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteString(imEnd + "\n")
	case m.Role == RoleAssistant:
		content, reasoning := splitReasoning(m)
		b.WriteString(imStart + "assistant\n")
		if i > lastQuery && (i == last || reasoning != "") {
			b.WriteString("<think>\n")
			b.WriteString(strings.Trim(reasoning, "\n"))
			b.WriteString("\n</think>\n\n")
			b.WriteString(strings.TrimLeft(content, "\n"))
		} else {
			b.WriteString(content)
		}
		for j, tc := range m.ToolCalls {
			if j > 0 || content != "" {
				b.WriteByte('\n')
			}
			b.WriteString("<tool_call>\n{\"name\": \"")
			b.WriteString(tc.Name)
			b.WriteString("\", \"arguments\": ")
			if err := appendArguments(b, tc.Arguments); err != nil {
				return fmt.Errorf("message %d tool call %d (%s): %w", i, j, tc.Name, err)
			}
			b.WriteString("}\n</tool_call>")
		}
		b.WriteString(imEnd + "\n")
	case m.Role == RoleTool:
		if i == 0 || msgs[i-1].Role != RoleTool {
			b.WriteString(imStart + "user")
		}
		b.WriteString("\n<tool_response>\n")
		b.WriteString(m.Content)
		b.WriteString("\n</tool_response>")
		if i == last || msgs[i+1].Role != RoleTool {
			b.WriteString(imEnd + "\n")
		}
	}
	return nil
}

// qwen3GenerationPrompt opens the assistant turn when opt asks for it.
func qwen3GenerationPrompt(b *strings.Builder, opt Options) {
	if opt.AddGenerationPrompt {
		b.WriteString(imStart + "assistant\n")
		if opt.DisableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
}

// qwen3LastQuery is the template's ns.last_query_index: the index of the
// last user message that is not a wrapped tool response, or the last index
// when there is none. Reasoning is rendered only after it.
func qwen3LastQuery(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == RoleUser && !(strings.HasPrefix(m.Content, "<tool_response>") &&
			strings.HasSuffix(m.Content, "</tool_response>")) {
			return i
		}
	}
	return len(msgs) - 1
}

// splitReasoning returns an assistant message's content and reasoning the
// way the Qwen3 template derives them: ReasoningContent when given, else the
// text before the first </think> (after its last <think>) is the reasoning
// and the text after the last </think> is the content.
func splitReasoning(m Message) (content, reasoning string) {
	if m.ReasoningContent != "" {
		return m.Content, m.ReasoningContent
	}
	if !strings.Contains(m.Content, "</think>") {
		return m.Content, ""
	}
	first, _, _ := strings.Cut(m.Content, "</think>")
	content = m.Content[strings.LastIndex(m.Content, "</think>")+len("</think>"):]
	reasoning = strings.TrimRight(first, "\n")
	if k := strings.LastIndex(reasoning, "<think>"); k >= 0 {
		reasoning = reasoning[k+len("<think>"):]
	}
	return strings.TrimLeft(content, "\n"), strings.TrimLeft(reasoning, "\n")
}

// appendQwen3Tool writes a tool as the template's `tool | tojson` prints the
// OpenAI tool object {"type": "function", "function": {...}}.
func appendQwen3Tool(b *strings.Builder, t Tool) error {
	b.WriteString(`{"type": "function", "function": {"name": `)
	writePyString(b, t.Name)
	if t.Description != "" {
		b.WriteString(`, "description": `)
		writePyString(b, t.Description)
	}
	if len(t.Parameters) > 0 {
		b.WriteString(`, "parameters": `)
		if err := appendPyJSON(b, t.Parameters); err != nil {
			return err
		}
	}
	b.WriteString("}}")
	return nil
}

// appendArguments writes a tool call's arguments as `arguments | tojson`.
func appendArguments(b *strings.Builder, args []byte) error {
	if len(args) == 0 {
		b.WriteString("{}")
		return nil
	}
	return appendPyJSON(b, args)
}

// checkMessages rejects an empty conversation and unknown roles.
func checkMessages(msgs []Message) error {
	if len(msgs) == 0 {
		return ErrNoMessages
	}
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return fmt.Errorf("%w %q in message %d", ErrRole, m.Role, i)
		}
	}
	return nil
}

// renderSizeHint estimates the rendered length, to allocate once.
func renderSizeHint(msgs []Message, tools []Tool) int {
	n := 512
	for _, m := range msgs {
		n += len(m.Content) + len(m.ReasoningContent) + 64
		for _, tc := range m.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments) + 64
		}
	}
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters) + 64
	}
	return n
}
