package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Responses API side of the scripted server, for Codex: the reply as
// the stream of events the proxy sends (proxy's responsesStream: the
// message item, then each function call whole), and the request read as
// the proxy reads it (proxy's responsesFormat.decode) into the
// demonstration's messages.

// writeResponsesStream sends rp as Responses stream events: a message item
// with the text, a function_call item with the call, response.completed.
func writeResponsesStream(w http.ResponseWriter, rp reply, id string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	seq := 0
	event := func(typ string, data map[string]any) {
		data["type"], data["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(data) // maps of strings and numbers always encode
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	respID := "resp_" + id
	resp := map[string]any{"id": respID, "object": "response", "status": "in_progress", "model": "legorl", "output": []any{}}
	event("response.created", map[string]any{"response": resp})
	event("response.in_progress", map[string]any{"response": resp})
	var output []any
	if rp.Content != "" {
		i, itemID := len(output), "msg_"+id
		part := map[string]any{"type": "output_text", "text": rp.Content, "annotations": []any{}}
		event("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"id": itemID, "type": "message",
			"status": "in_progress", "role": "assistant", "content": []any{}}})
		event("response.content_part.added", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		event("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "delta": rp.Content})
		event("response.output_text.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "text": rp.Content})
		event("response.content_part.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "part": part})
		item := map[string]any{"id": itemID, "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
		event("response.output_item.done", map[string]any{"output_index": i, "item": item})
		output = append(output, item)
	}
	if rp.Tool != "" {
		i, itemID := len(output), "fc_"+id
		event("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"id": itemID, "type": "function_call",
			"status": "in_progress", "call_id": id, "name": rp.Tool, "arguments": ""}})
		event("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": rp.Args})
		event("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i, "arguments": rp.Args})
		item := map[string]any{"id": itemID, "type": "function_call", "status": "completed", "call_id": id, "name": rp.Tool, "arguments": rp.Args}
		event("response.output_item.done", map[string]any{"output_index": i, "item": item})
		output = append(output, item)
	}
	resp["status"], resp["output"] = "completed", output
	resp["usage"] = map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
		"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	event("response.completed", map[string]any{"response": resp})
}

// responsesRequest is the part of a Responses request the demonstration
// is made of.
type responsesRequest struct {
	Instructions string            `json:"instructions"`
	Input        json.RawMessage   `json:"input"`
	Tools        []json.RawMessage `json:"tools"`
}

// responsesItem is one input item.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesHosted reports whether a tool type is one the API runs itself,
// left out of the prompt as the proxy leaves it (proxy's
// responsesHostedTool).
func responsesHosted(typ string) bool {
	switch typ {
	case "file_search", "code_interpreter", "image_generation", "mcp", "tool_search":
		return true
	}
	return strings.HasPrefix(typ, "web_search") || strings.HasPrefix(typ, "computer_use")
}

// decodeResponses reads a Responses request as the proxy does:
// instructions are the system message, developer messages are system,
// an assistant's text and its function calls are one message, a
// function_call_output is a tool message named after its call, reasoning
// items (which the scripted replies never have) are refused, and
// function tools are the tools (hosted ones left out).
func decodeResponses(body []byte) ([]Message, []Tool, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, fmt.Errorf("scripted: the Responses request: %w", err)
	}
	var msgs []Message
	if req.Instructions != "" {
		msgs = append(msgs, Message{Role: "system", Content: req.Instructions})
	}
	var items []responsesItem
	if err := json.Unmarshal(req.Input, &items); err != nil {
		var s string
		if json.Unmarshal(req.Input, &s) != nil {
			return nil, nil, fmt.Errorf("scripted: the Responses request's input is neither a string nor items: %w", err)
		}
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	}
	names := map[string]string{}
	for i, it := range items {
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		var last *Message
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			last = &msgs[n-1]
		}
		switch it.Type {
		case "message":
			text, err := responsesText(it.Content)
			if err != nil {
				return nil, nil, fmt.Errorf("scripted: the Responses request: input item %d: %w", i, err)
			}
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			if role == "assistant" && last != nil && last.Content == "" && len(last.ToolCalls) == 0 {
				last.Content = text
				continue
			}
			msgs = append(msgs, Message{Role: role, Content: text})
		case "function_call":
			names[it.CallID] = it.Name
			tc := ToolCall{ID: it.CallID, Name: it.Name}
			if strings.TrimSpace(it.Arguments) != "" {
				tc.Arguments = json.RawMessage(it.Arguments)
			}
			if last != nil {
				last.ToolCalls = append(last.ToolCalls, tc)
				continue
			}
			msgs = append(msgs, Message{Role: "assistant", ToolCalls: []ToolCall{tc}})
		case "function_call_output":
			text, err := responsesText(it.Output)
			if err != nil {
				return nil, nil, fmt.Errorf("scripted: the Responses request: input item %d: %w", i, err)
			}
			msgs = append(msgs, Message{Role: "tool", Content: text, ToolCallID: it.CallID, Name: names[it.CallID]})
		default:
			return nil, nil, fmt.Errorf("%w: the Responses request's input item %d is of type %q", ErrUnsupported, i, it.Type)
		}
	}
	var tools []Tool
	for i, raw := range req.Tools {
		var t struct {
			Type string `json:"type"`
			Tool
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, fmt.Errorf("scripted: the Responses request: tool %d: %w", i, err)
		}
		switch {
		case responsesHosted(t.Type):
		case t.Type != "function":
			return nil, nil, fmt.Errorf("%w: the Responses request's tool %d (%s) is of type %q, which the proxy refuses", ErrUnsupported, i, t.Name, t.Type)
		default:
			tools = append(tools, t.Tool)
		}
	}
	return msgs, tools, nil
}

// responsesText flattens a Responses content field: a string or parts
// whose texts are joined by newlines (proxy's responsesContent).
func responsesText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor parts: %w", err)
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			texts = append(texts, p.Text)
		case "refusal":
			texts = append(texts, p.Refusal)
		default:
			return "", fmt.Errorf("content part of type %q (text only)", p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}
