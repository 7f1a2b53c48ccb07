package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/legorl/legorl/policy/chat"
)

// messagesFormat is the Anthropic Messages API (POST /v1/messages), which
// Claude Code speaks, and its token counter (POST
// /v1/messages/count_tokens, see decodeCountTokens).
//
// Decoding (request -> Turn):
//   - system (a string or text blocks) becomes the first message; each
//     message's content is a string or a list of blocks. In a user message,
//     every tool_result block becomes a tool message, in order, and the
//     text blocks between them a user message each (Claude Code puts its
//     system reminders after the results). In an assistant message, thinking
//     blocks are the reasoning, text blocks the content and tool_use blocks
//     the tool calls; redacted_thinking is dropped (it is opaque and the
//     proxy never writes it). Texts of one message are joined with "\n".
//   - image and document blocks (in messages or tool results) become a
//     placeholder text: the policy reads text only, and Claude Code reads
//     image files into tool results, which must not end a rollout.
//   - tool_result's is_error is dropped: the neutral message has no such
//     flag, and Claude Code already words its errors into the content
//     (<tool_use_error>).
//   - Custom tools (no type, or type "custom") are the Turn's tools. Server
//     tools the API would run (web_search_*, web_fetch_*, code_execution_*,
//     tool_search_tool_*, mcp_toolset) are left out of the prompt: the
//     sandbox is offline. Anthropic-defined client tools (bash_*,
//     text_editor_*, computer_*, memory_*) and unknown types are a 400:
//     their schemas are built into Claude models, not into this policy.
//   - thinking {"type": "enabled"} or "adaptive" renders the template with
//     thinking on; "disabled" or no thinking field turns it off, as the API
//     does (Claude Code sends thinking only when it is enabled, e.g. with
//     MAX_THINKING_TOKENS). budget_tokens is not enforced: max_tokens bounds
//     reasoning and text together.
//   - max_tokens is required, as by the API. temperature, top_p and top_k
//     are checked for type and ignored: the proxy injects the rollout's own
//     sampling. A non-empty stop_sequences is a 400: the proxy stops at the
//     end of the turn or at max_tokens only, and a client that relies on a
//     stop string would read past it.
//
// Replies: content is a thinking block (when there is reasoning; its
// signature is empty), a text block (when there is text) and one tool_use
// block per tool call; stop_reason is end_turn, max_tokens or tool_use;
// stop_sequence is always null. usage.input_tokens excludes the cached
// prompt tokens, which are cache_read_input_tokens, as Anthropic counts
// them; cache_creation_input_tokens is 0.
type messagesFormat struct{}

var _ wireFormat = messagesFormat{}

// idPrefix makes the proxy's reply ids msg_....
func (messagesFormat) idPrefix() string { return "msg_" }

// decode parses a Messages request body.
func (messagesFormat) decode(body []byte) (Turn, *apiError) { return decodeMessages(body, true) }

// decodeCountTokens parses a POST /v1/messages/count_tokens body: a
// Messages request without max_tokens, stream and the other generation
// settings. The proxy renders the Turn as for a call (with the generation
// prompt) and answers with countTokens.
func (messagesFormat) decodeCountTokens(body []byte) (Turn, *apiError) {
	return decodeMessages(body, false)
}

// countTokens writes count_tokens's answer: the prompt's token count.
func (messagesFormat) countTokens(w http.ResponseWriter, inputTokens int) {
	replyJSON(w, http.StatusOK, struct {
		InputTokens int `json:"input_tokens"`
	}{inputTokens})
}

// decodeMessages parses a Messages body; call is false for count_tokens,
// which has no generation settings.
func decodeMessages(body []byte, call bool) (Turn, *apiError) {
	t, req, e := parseWireRequest(body)
	if e != nil {
		return t, e
	}
	if call {
		if !req.has("max_tokens") {
			return t, req.missing("max_tokens")
		}
		if t.MaxTokens, e = req.positive("max_tokens"); e != nil {
			return t, e
		}
		if t.Stream, e = req.boolean("stream"); e != nil {
			return t, e
		}
		t.StreamUsage = true // message_delta always carries usage
		// The rollout's own sampling applies; these are only checked.
		for _, k := range []string{"temperature", "top_p", "top_k"} {
			if e := req.number(k); e != nil {
				return t, e
			}
		}
		stops, _, e := wireField[[]string](req, "stop_sequences")
		if e != nil {
			return t, e
		}
		if len(stops) > 0 {
			return t, badRequest("stop_sequences", "proxy: stop_sequences is not supported: the proxy stops at the end of the turn or at max_tokens only")
		}
	}
	if t.DisableThinking, e = messagesThinkingOff(req); e != nil {
		return t, e
	}
	if t.Tools, e = messagesTools(req); e != nil {
		return t, e
	}
	if t.ToolChoice, e = messagesToolChoice(req); e != nil {
		return t, e
	}
	system, e := messagesSystem(req)
	if e != nil {
		return t, e
	}
	if system != "" {
		t.Messages = append(t.Messages, chat.Message{Role: chat.RoleSystem, Content: system})
	}
	if req.kind("messages") == 'n' {
		return t, req.missing("messages")
	}
	var c messagesConversation
	if e := req.each("messages", c.add); e != nil {
		return t, e
	}
	if len(c.msgs) == 0 {
		return t, badRequest("messages", "proxy: messages must hold at least one message")
	}
	t.Messages = append(t.Messages, c.msgs...)
	return t, nil
}

// messagesThinkingOff reads the thinking setting and reports whether it
// turns thinking off: no thinking field does, as in the API.
func messagesThinkingOff(req wireObject) (bool, *apiError) {
	o, ok, e := req.object("thinking")
	if e != nil || !ok {
		return true, e
	}
	typ, e := o.requiredStr("type")
	switch {
	case e != nil:
		return false, e
	case typ == "enabled":
		_, _, e := wireField[int](o, "budget_tokens")
		return false, e
	case typ == "adaptive":
		return false, nil
	case typ == "disabled":
		return true, nil
	}
	return false, o.unsupported("type", typ, "thinking is enabled, adaptive or disabled")
}

// messagesServerTool reports whether a tool type is one the API runs
// itself; such tools are left out of the prompt.
func messagesServerTool(typ string) bool {
	for _, p := range []string{"web_search_", "web_fetch_", "code_execution_", "tool_search_tool_", "mcp_toolset"} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// messagesTools decodes the custom tools of a request.
func messagesTools(req wireObject) ([]chat.Tool, *apiError) {
	var tools []chat.Tool
	e := req.each("tools", func(o wireObject) *apiError {
		typ, e := o.str("type")
		switch {
		case e != nil:
			return e
		case messagesServerTool(typ):
			return nil
		case typ != "" && typ != "custom":
			return o.unsupported("type", typ, "the proxy serves custom tools (name, description, input_schema) only")
		case !o.has("input_schema"):
			return o.missing("input_schema")
		}
		tool, e := wireFunctionTool(o, "input_schema")
		tools = append(tools, tool)
		return e
	})
	return tools, e
}

// messagesToolChoice maps tool_choice to the Turn's ToolChoice: auto,
// none, any ("required") or tool (the tool's name).
func messagesToolChoice(req wireObject) (string, *apiError) {
	o, ok, e := req.object("tool_choice")
	if e != nil || !ok {
		return "", e
	}
	if _, e := o.boolean("disable_parallel_tool_use"); e != nil {
		return "", e
	}
	typ, e := o.requiredStr("type")
	switch {
	case e != nil:
		return "", e
	case typ == "auto", typ == "none":
		return typ, nil
	case typ == "any":
		return "required", nil
	case typ == "tool":
		return o.requiredStr("name")
	}
	return "", o.unsupported("type", typ, "tool_choice is auto, any, tool or none")
}

// messagesSystem reads the system prompt: a string or text blocks.
func messagesSystem(req wireObject) (string, *apiError) {
	switch k := req.kind("system"); k {
	case 'n':
		return "", nil
	case 's':
		return req.str("system")
	case 'a':
	default:
		return "", badRequest("system", "proxy: system must be a string or an array of text blocks, not %s", kindName(k))
	}
	var texts []string
	e := req.each("system", func(b wireObject) *apiError {
		typ, e := b.requiredStr("type")
		if e != nil {
			return e
		}
		if typ != "text" {
			return b.unsupported("type", typ, "system holds text blocks only")
		}
		text, e := b.str("text")
		texts = append(texts, text)
		return e
	})
	return joinWireTexts(texts), e
}

// messagesConversation turns messages into the neutral ones.
type messagesConversation struct {
	msgs  []chat.Message
	names map[string]string // tool_use id -> tool name, for tool messages
}

// add decodes one message.
func (c *messagesConversation) add(o wireObject) *apiError {
	role, e := o.requiredStr("role")
	if e != nil {
		return e
	}
	if role != "user" && role != "assistant" {
		return badRequest(o.param("role"), "proxy: %s %q is not one of user, assistant", o.param("role"), role)
	}
	switch k := o.kind("content"); k {
	case 'n':
		return o.missing("content")
	case 's':
		text, _ := o.str("content")
		c.msgs = append(c.msgs, chat.Message{Role: role, Content: text})
		return nil
	case 'a':
	default:
		return badRequest(o.param("content"), "proxy: %s must be a string or an array of content blocks, not %s", o.param("content"), kindName(k))
	}
	if role == "user" {
		return c.user(o)
	}
	return c.assistant(o)
}

// user decodes the blocks of a user message: tool results become tool
// messages, the texts between them user messages.
func (c *messagesConversation) user(o wireObject) *apiError {
	n := len(c.msgs)
	var texts []string
	flush := func() {
		if len(texts) > 0 {
			c.msgs = append(c.msgs, chat.Message{Role: chat.RoleUser, Content: joinWireTexts(texts)})
			texts = nil
		}
	}
	e := o.each("content", func(b wireObject) *apiError {
		typ, e := b.requiredStr("type")
		if e != nil {
			return e
		}
		switch typ {
		case "text":
			text, e := b.str("text")
			texts = append(texts, text)
			return e
		case "image", "document":
			texts = append(texts, omittedWireMedia(typ))
			return nil
		case "tool_result":
			flush()
			id, e := b.requiredStr("tool_use_id")
			if e != nil {
				return e
			}
			if _, e := b.boolean("is_error"); e != nil {
				return e
			}
			out, e := messagesResultText(b)
			c.msgs = append(c.msgs, chat.Message{Role: chat.RoleTool, Content: out, ToolCallID: id, Name: c.names[id]})
			return e
		}
		return b.unsupported("type", typ, "a user message holds text, image, document and tool_result blocks")
	})
	flush()
	if e == nil && len(c.msgs) == n { // no blocks at all
		c.msgs = append(c.msgs, chat.Message{Role: chat.RoleUser})
	}
	return e
}

// messagesResultText reads a tool result's content: a string or text
// (image, document) blocks.
func messagesResultText(b wireObject) (string, *apiError) {
	return wireTexts(b, "content", "content blocks", func(p wireObject, typ string) (string, *apiError) {
		switch typ {
		case "text":
			return p.str("text")
		case "image", "document":
			return omittedWireMedia(typ), nil
		}
		return "", p.unsupported("type", typ, "a tool result holds text, image and document blocks")
	})
}

// assistant decodes the blocks of an assistant message into one message.
func (c *messagesConversation) assistant(o wireObject) *apiError {
	m := chat.Message{Role: chat.RoleAssistant}
	var texts, thinking []string
	e := o.each("content", func(b wireObject) *apiError {
		typ, e := b.requiredStr("type")
		if e != nil {
			return e
		}
		switch typ {
		case "text":
			text, e := b.str("text")
			texts = append(texts, text)
			return e
		case "thinking":
			text, e := b.str("thinking")
			thinking = append(thinking, text)
			return e
		case "redacted_thinking":
			return nil
		case "tool_use":
			tc, e := messagesToolUse(b)
			if e != nil {
				return e
			}
			if c.names == nil {
				c.names = map[string]string{}
			}
			c.names[tc.ID] = tc.Name
			m.ToolCalls = append(m.ToolCalls, tc)
			return nil
		}
		return b.unsupported("type", typ, "an assistant message holds text, thinking and tool_use blocks")
	})
	m.Content, m.ReasoningContent = joinWireTexts(texts), joinWireTexts(thinking)
	c.msgs = append(c.msgs, m)
	return e
}

// messagesToolUse decodes a tool_use block; its input must be an object.
func messagesToolUse(b wireObject) (chat.ToolCall, *apiError) {
	var tc chat.ToolCall
	var e *apiError
	if tc.ID, e = b.requiredStr("id"); e != nil {
		return tc, e
	}
	if tc.Name, e = b.requiredStr("name"); e != nil {
		return tc, e
	}
	switch k := b.kind("input"); k {
	case 'n':
		return tc, b.missing("input")
	case 'o':
		tc.Arguments = b.fields["input"]
	default:
		return tc, badRequest(b.param("input"), "proxy: %s must be an object, not %s", b.param("input"), kindName(k))
	}
	return tc, nil
}

// Replies.

// messagesBody is a message object.
type messagesBody struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Model        string        `json:"model"`
	Content      []any         `json:"content"`
	StopReason   *string       `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        messagesUsage `json:"usage"`
}

type messagesUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type messagesText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type messagesThinking struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type messagesToolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// newMessagesUsage counts as Anthropic does: input_tokens leaves out the
// prompt tokens read from the cache.
func newMessagesUsage(u Usage) messagesUsage {
	cached := min(max(u.CachedTokens, 0), u.PromptTokens)
	return messagesUsage{InputTokens: u.PromptTokens - cached, CacheReadInputTokens: cached, OutputTokens: u.CompletionTokens}
}

// messagesStopReason maps a neutral finish reason.
func messagesStopReason(finish string) string {
	switch finish {
	case FinishLength:
		return "max_tokens"
	case FinishToolCalls:
		return "tool_use"
	}
	return "end_turn"
}

// newMessagesToolUse is the tool_use block of call i of reply id, its
// input compacted. Input that is not JSON (never from the chat parser) is
// sent as a JSON string so that the message stays well-formed.
func newMessagesToolUse(replyID string, i int, tc chat.ToolCall) messagesToolUseBlock {
	var buf bytes.Buffer
	input := wireArguments(tc)
	if json.Compact(&buf, input) == nil {
		input = buf.Bytes()
	} else {
		input, _ = json.Marshal(string(input))
	}
	id := tc.ID
	if id == "" {
		id = responsesItemID(replyID, "toolu", i)
	}
	return messagesToolUseBlock{Type: "tool_use", ID: id, Name: tc.Name, Input: input}
}

// reply writes a whole message.
func (messagesFormat) reply(w http.ResponseWriter, r *Reply) {
	stop := messagesStopReason(r.Finish)
	body := messagesBody{ID: r.ID, Type: "message", Role: "assistant", Model: r.Model, Content: []any{},
		StopReason: &stop, Usage: newMessagesUsage(r.Usage)}
	if r.Reasoning != "" {
		body.Content = append(body.Content, messagesThinking{Type: "thinking", Thinking: r.Reasoning})
	}
	if r.Content != "" {
		body.Content = append(body.Content, messagesText{Type: "text", Text: r.Content})
	}
	for i, tc := range r.ToolCalls {
		body.Content = append(body.Content, newMessagesToolUse(r.ID, i, tc))
	}
	replyJSON(w, http.StatusOK, body)
}

// messagesErrorBody is an error response and an error event.
type messagesErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// newMessagesError maps an apiError to Anthropic's error types. A context
// overflow says "prompt is too long", the words Claude Code looks for
// before it compacts the conversation.
func newMessagesError(e *apiError) messagesErrorBody {
	var b messagesErrorBody
	b.Type = "error"
	b.Error.Message = e.Message
	switch {
	case e.Status == http.StatusRequestEntityTooLarge:
		b.Error.Type = "request_too_large"
	case e.Status == http.StatusTooManyRequests:
		b.Error.Type = "rate_limit_error"
	case e.Kind == KindNotFound:
		b.Error.Type = "not_found_error"
	case e.Kind == KindOverloaded:
		b.Error.Type = "overloaded_error"
	case e.Kind == KindServer:
		b.Error.Type = "api_error"
	default:
		b.Error.Type = "invalid_request_error"
	}
	if e.Kind == KindContextLength && !strings.Contains(strings.ToLower(e.Message), "prompt is too long") {
		b.Error.Message = "prompt is too long: " + e.Message
	}
	return b
}

// fail writes an Anthropic error response.
func (messagesFormat) fail(w http.ResponseWriter, e *apiError) {
	replyJSON(w, wireStatus(e), newMessagesError(e))
}

// stream starts a streamed message: message_start, with empty content and
// usage (the prompt's count comes with message_delta).
func (messagesFormat) stream(w http.ResponseWriter, r *Reply) streamWriter {
	s := &messagesStream{sse: newSSE(w), id: r.ID}
	s.emit("message_start", map[string]any{"message": messagesBody{ID: r.ID, Type: "message", Role: "assistant",
		Model: r.Model, Content: []any{}, Usage: newMessagesUsage(r.Usage)}})
	return s
}

// messagesStream writes the events of one streamed message: a content
// block per run of reasoning (thinking) or text, then a tool_use block per
// tool call with its input in one input_json_delta, message_delta and
// message_stop.
type messagesStream struct {
	sse   *sse
	id    string
	index int    // the open block's index, or the next block's
	open  string // the open block's type: "", "thinking" or "text"
	err   error  // the first write error; nothing is written after it
}

// emit writes one event; data gets the type.
func (s *messagesStream) emit(typ string, data map[string]any) error {
	if s.err != nil {
		return s.err
	}
	data["type"] = typ
	s.err = s.sse.event(typ, data)
	return s.err
}

// start opens block (of type typ) at the next index, closing the open one.
func (s *messagesStream) start(typ string, block any) {
	s.stop()
	s.open = typ
	s.emit("content_block_start", map[string]any{"index": s.index, "content_block": block})
}

// stop closes the open block, if any.
func (s *messagesStream) stop() {
	if s.open == "" {
		return
	}
	s.emit("content_block_stop", map[string]any{"index": s.index})
	s.open = ""
	s.index++
}

// delta writes a delta of the open block.
func (s *messagesStream) delta(delta any) error {
	return s.emit("content_block_delta", map[string]any{"index": s.index, "delta": delta})
}

func (s *messagesStream) reasoning(delta string) error {
	if delta == "" || s.err != nil {
		return s.err
	}
	if s.open != "thinking" {
		s.start("thinking", messagesThinking{Type: "thinking"})
	}
	return s.delta(map[string]string{"type": "thinking_delta", "thinking": delta})
}

func (s *messagesStream) text(delta string) error {
	if delta == "" || s.err != nil {
		return s.err
	}
	if s.open != "text" {
		s.start("text", messagesText{Type: "text"})
	}
	return s.delta(map[string]string{"type": "text_delta", "text": delta})
}

// finish closes the open block, writes r's tool calls, the stop reason and
// usage, and message_stop.
func (s *messagesStream) finish(r *Reply) error {
	s.stop()
	for i, tc := range r.ToolCalls {
		block := newMessagesToolUse(r.ID, i, tc)
		input := block.Input
		block.Input = json.RawMessage("{}")
		s.start("tool_use", block)
		s.delta(map[string]string{"type": "input_json_delta", "partial_json": string(input)})
		s.stop()
	}
	s.emit("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": messagesStopReason(r.Finish), "stop_sequence": nil},
		"usage": newMessagesUsage(r.Usage)})
	return s.emit("message_stop", map[string]any{})
}

// fail ends the stream with an error event.
func (s *messagesStream) fail(e *apiError) {
	if s.err == nil {
		s.err = s.sse.event("error", newMessagesError(e))
	}
}
