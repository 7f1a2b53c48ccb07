// Package chat turns conversations into the exact prompt text a model was
// trained on, and the text a model generates back into content, reasoning and
// tool calls.
//
// It speaks its own small message model (Message, ToolCall, Tool); the proxy
// translates OpenAI and Anthropic wire formats into it at the edge, so no wire
// format appears here. Rendering reproduces the model's own Jinja chat
// template byte for byte, as Hugging Face transformers (and so vLLM and
// SGLang) renders it: Qwen3 is checked against real Jinja output in the
// tests, Qwen3-Coder against golden files real Jinja rendered. Parsing never
// panics and returns malformed output as text with a failure flag. Whether a new turn's prompt extends the previous prompt and
// completion (AppendOnly) tells the proxy when a recorded segment can grow and
// when it must start a new one: history is never re-tokenized.
package chat

import (
	"encoding/json"
	"errors"
)

// Roles of the messages in a conversation.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Sentinel errors of the package; every error it returns wraps one of them.
var (
	// ErrNoMessages: a conversation must hold at least one message.
	ErrNoMessages = errors.New("chat: no messages")
	// ErrRole: a message has a role the template cannot render.
	ErrRole = errors.New("chat: unknown role")
	// ErrArguments: a tool call's arguments or a tool's parameters are not
	// valid JSON.
	ErrArguments = errors.New("chat: invalid JSON")
)

// Message is one turn of a conversation.
type Message struct {
	// Role is one of RoleSystem, RoleUser, RoleAssistant, RoleTool.
	Role string `json:"role"`
	// Content is the visible text. For an assistant message without
	// ReasoningContent, a "<think>...</think>" block inside Content is split
	// out as the reasoning, as the Qwen3 template does.
	Content string `json:"content"`
	// ReasoningContent is an assistant's reasoning (the text between <think>
	// and </think>). Empty means none given.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool message (optional).
	Name string `json:"name,omitempty"`
}

// ToolCall is one function call made by the assistant.
type ToolCall struct {
	// ID is the caller-visible id of the call (not rendered by Qwen3).
	ID string `json:"id,omitempty"`
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the call's arguments as JSON text, normally an object.
	// Empty means {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Tool is a function the model may call.
type Tool struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Description says what the function does; empty is left out of the
	// prompt.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments, kept as raw JSON so
	// its key order reaches the prompt unchanged; empty is left out.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Options are the template switches of one render.
type Options struct {
	// AddGenerationPrompt ends the prompt with the opening of an assistant
	// turn. Defaults to false.
	AddGenerationPrompt bool
	// DisableThinking passes enable_thinking=false to the template: Qwen3
	// then opens the assistant turn with an empty <think></think> block.
	// Defaults to false (thinking on, the template's default).
	DisableThinking bool
}

// findTool returns the tool named name, or false.
func findTool(tools []Tool, name string) (Tool, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}
