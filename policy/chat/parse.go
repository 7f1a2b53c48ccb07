package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Parsed is what a model's completion means: visible content, reasoning and
// tool calls. When Failed is set, ToolCalls is empty and Content holds the
// text after the reasoning unchanged, broken markup included (the whole text
// when the <think> block itself is unclosed), so the harness sees what the
// model wrote and the rollout counts a tool-call parse failure.
type Parsed struct {
	// Content is the visible text. Without tool calls it is the text after
	// the reasoning block as generated; with tool calls it is the text
	// around them, each piece trimmed of surrounding white space, joined by
	// newlines.
	Content string
	// Reasoning is the text inside <think>...</think>, trimmed of newlines.
	Reasoning string
	// ToolCalls are the calls in the order generated; their Arguments are a
	// JSON object.
	ToolCalls []ToolCall
	// Failed reports malformed output; Reason says why in one line.
	Failed bool
	Reason string
}

// Failure reasons (Parsed.Reason) that concern the whole completion.
var (
	errUnclosedThink    = errors.New("unclosed <think>")
	errUnclosedToolCall = errors.New("unclosed <tool_call>")
	errStrayClose       = errors.New("</tool_call> without <tool_call>")
)

// endTokens end a completion; a completion's text may carry one at its end.
var endTokens = []string{imEnd, "<|endoftext|>"}

// bodyParser parses the text between <tool_call> and </tool_call>.
type bodyParser func(body string, tools []Tool) (ToolCall, error)

// parseCompletion splits text into reasoning, content and tool calls, using
// parseBody for each <tool_call> block.
func parseCompletion(text string, tools []Tool, parseBody bodyParser) Parsed {
	for _, end := range endTokens {
		if strings.HasSuffix(text, end) {
			text = text[:len(text)-len(end)]
			break
		}
	}
	reasoning, rest, err := splitThink(text)
	if err != nil {
		return Parsed{Content: text, Failed: true, Reason: err.Error()}
	}
	fail := func(err error) Parsed {
		return Parsed{Content: rest, Reasoning: reasoning, Failed: true, Reason: err.Error()}
	}
	if !strings.Contains(rest, "<tool_call>") {
		if strings.Contains(rest, "</tool_call>") {
			return fail(errStrayClose)
		}
		return Parsed{Content: rest, Reasoning: reasoning}
	}
	var (
		calls  []ToolCall
		pieces []string
	)
	s := rest
	for {
		i := strings.Index(s, "<tool_call>")
		text := s
		if i >= 0 {
			text = s[:i]
		}
		if strings.Contains(text, "</tool_call>") {
			return fail(errStrayClose)
		}
		if t := strings.TrimSpace(text); t != "" {
			pieces = append(pieces, t)
		}
		if i < 0 {
			break
		}
		body, after, ok := strings.Cut(s[i+len("<tool_call>"):], "</tool_call>")
		if !ok {
			return fail(errUnclosedToolCall)
		}
		call, err := parseBody(body, tools)
		if err != nil {
			return fail(fmt.Errorf("tool call %d: %w", len(calls), err))
		}
		calls = append(calls, call)
		s = after
	}
	return Parsed{Content: strings.Join(pieces, "\n"), Reasoning: reasoning, ToolCalls: calls}
}

// splitThink separates the reasoning block. The text before the first
// </think> is the reasoning (from its last <think>, if any: the prompt may
// already hold the opening tag); the content follows it, after any text
// written before <think>. A leading <think> that never closes is an error.
func splitThink(text string) (reasoning, rest string, err error) {
	before, after, ok := strings.Cut(text, "</think>")
	if !ok {
		if strings.HasPrefix(strings.TrimLeft(text, " \t\r\n"), "<think>") {
			return "", text, errUnclosedThink
		}
		return "", text, nil
	}
	after = strings.TrimLeft(after, "\n")
	if k := strings.LastIndex(before, "<think>"); k >= 0 {
		// Text written before <think> stays content.
		if pre := strings.TrimSpace(before[:k]); pre != "" {
			after = pre + "\n" + after
		}
		before = before[k+len("<think>"):]
	}
	return strings.Trim(before, "\n"), after, nil
}

// Parse reads a Qwen3 completion: optional <think> reasoning, then text and
// <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks. A call
// must name one of tools; arguments must be a JSON object (a JSON string
// holding an object is accepted too); absent arguments are {}. Malformed
// output comes back with Failed set, never a panic.
func (Qwen3) Parse(text string, tools []Tool) Parsed {
	return parseCompletion(text, tools, parseJSONCall)
}

func parseJSONCall(body string, tools []Tool) (ToolCall, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	var raw struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := dec.Decode(&raw); err != nil {
		return ToolCall{}, fmt.Errorf("bad JSON: %v", err)
	}
	if strings.TrimSpace(body[dec.InputOffset():]) != "" {
		return ToolCall{}, errors.New("bad JSON: data after the object")
	}
	if raw.Name == nil || *raw.Name == "" {
		return ToolCall{}, errors.New("no function name")
	}
	name := *raw.Name
	if _, ok := findTool(tools, name); !ok {
		return ToolCall{}, fmt.Errorf("unknown function %q", name)
	}
	args := bytes.TrimSpace(raw.Arguments)
	if len(args) > 0 && args[0] == '"' {
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return ToolCall{}, fmt.Errorf("bad arguments: %v", err)
		}
		args = bytes.TrimSpace([]byte(s))
	}
	switch {
	case len(args) == 0 || string(args) == "null":
		args = []byte("{}")
	case args[0] != '{' || !json.Valid(args):
		return ToolCall{}, fmt.Errorf("arguments of %s are not a JSON object", name)
	}
	return ToolCall{Name: name, Arguments: args}, nil
}
