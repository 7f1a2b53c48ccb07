package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/legorl/legorl/policy/chat"
)

// responsesFormat is the OpenAI Responses API (POST /v1/responses), the only
// API Codex CLI speaks. Codex sends store=false and the whole history on
// every call, so the format is stateless: previous_response_id,
// conversation, prompt (stored templates), item_reference and background
// are refused with a 400 naming the field.
//
// Decoding (request -> Turn):
//   - instructions becomes the first (system) message; input is a string
//     (one user message) or a list of items: message (roles user,
//     assistant, system and developer; developer and system become system
//     messages), function_call, function_call_output and reasoning.
//   - A reasoning item is the reasoning of the assistant turn that follows
//     it; an assistant message and the function_call items after it are
//     one assistant message with ToolCalls, as the proxy's own output lists
//     them; function_call_output items become tool messages.
//   - Text parts of one content list are joined with "\n" (as vLLM joins
//     them); input_image and input_file parts become a placeholder text
//     (the policy reads text only, and a refusal would end a rollout over a
//     screenshot).
//   - Function tools are the Turn's tools. Hosted tools the API itself
//     would run (web_search*, file_search, code_interpreter,
//     image_generation, mcp, computer_use*, tool_search) are left out of
//     the prompt: the proxy runs none of them and the sandbox is offline.
//     Tools the client runs but that are not JSON functions (custom, the
//     freeform grammar tools Codex sends for apply_patch with some models;
//     local_shell; shell; apply_patch) and unknown types are a 400: their
//     calls have no representation in a Reply. Codex picks its apply_patch
//     and shell tool kinds per model family: its harness config must keep
//     them function tools.
//   - tool_choice becomes the Turn's ToolChoice (auto, none, required or a
//     function's name); text.format other than plain text (JSON schema,
//     JSON mode) is a 400: output cannot be constrained.
//   - reasoning.effort "none" renders the template with thinking off;
//     sampling settings (temperature, top_p) are ignored: the proxy
//     injects the rollout's own.
//
// Replies: a reasoning item (when there is reasoning: the raw reasoning is
// both its content, as reasoning_text, and its one summary part, because
// Codex sends summaries back but drops reasoning_text content, and the
// next prompt must hold the same reasoning), a message item (when there is
// text) and one function_call item per tool call. A length finish is
// status "incomplete" with incomplete_details.reason "max_output_tokens"
// (in a stream, a response.incomplete event, as the API sends it).
// Usage reports no reasoning_tokens (0): the proxy does not split the
// completion's count.
type responsesFormat struct{}

var _ wireFormat = responsesFormat{}

// omittedWireMedia is the text that stands for an image or a file in a
// request: the policy reads text only.
func omittedWireMedia(kind string) string {
	return "[" + kind + " omitted: this model reads text only]"
}

// joinWireTexts joins the text parts of one content list, as vLLM does for
// a chat template that takes string content.
func joinWireTexts(parts []string) string { return strings.Join(parts, "\n") }

// wireTexts reads the field key of o, which holds text: absent (""), a
// string, or an array of typed parts (named parts in the error) whose texts
// part reads, joined by joinWireTexts. Both the Responses content fields
// and the Messages tool results have this shape; only the part types
// differ.
func wireTexts(o wireObject, key, parts string, part func(p wireObject, typ string) (string, *apiError)) (string, *apiError) {
	switch k := o.kind(key); k {
	case 'n':
		return "", nil
	case 's':
		return o.str(key)
	case 'a':
	default:
		return "", badRequest(o.param(key), "proxy: %s must be a string or an array of %s, not %s", o.param(key), parts, kindName(k))
	}
	var texts []string
	e := o.each(key, func(p wireObject) *apiError {
		typ, e := p.requiredStr("type")
		var text string
		if e == nil {
			text, e = part(p, typ)
		}
		texts = append(texts, text)
		return e
	})
	return joinWireTexts(texts), e
}

// idPrefix makes the proxy's reply ids resp_....
func (responsesFormat) idPrefix() string { return "resp_" }

// decode parses a Responses request body.
func (responsesFormat) decode(body []byte) (Turn, *apiError) {
	t, req, e := parseWireRequest(body)
	if e != nil {
		return t, e
	}
	for _, k := range []string{"previous_response_id", "conversation", "prompt"} {
		if req.has(k) && string(bytes.TrimSpace(req.fields[k])) != `""` {
			return t, badRequest(k, "proxy: %s is not supported: the proxy is stateless; send the whole conversation in input", k)
		}
	}
	background, e := req.boolean("background")
	if e != nil {
		return t, e
	}
	if background {
		return t, badRequest("background", "proxy: background is not supported: the proxy answers within the request")
	}
	for _, k := range []string{"store", "parallel_tool_calls"} {
		if _, e := req.boolean(k); e != nil {
			return t, e
		}
	}
	// The rollout's own sampling applies; these are only checked.
	for _, k := range []string{"temperature", "top_p"} {
		if e := req.number(k); e != nil {
			return t, e
		}
	}
	if _, _, e := wireField[[]string](req, "include"); e != nil {
		return t, e
	}
	if t.Stream, e = req.boolean("stream"); e != nil {
		return t, e
	}
	t.StreamUsage = true // response.completed always carries usage
	if t.MaxTokens, e = req.positive("max_output_tokens"); e != nil {
		return t, e
	}
	if t.DisableThinking, e = responsesThinkingOff(req); e != nil {
		return t, e
	}
	if e = responsesTextFormat(req); e != nil {
		return t, e
	}
	if t.Tools, e = responsesTools(req); e != nil {
		return t, e
	}
	if t.ToolChoice, e = responsesToolChoice(req); e != nil {
		return t, e
	}

	instructions, e := req.str("instructions")
	if e != nil {
		return t, e
	}
	if instructions != "" {
		t.Messages = append(t.Messages, chat.Message{Role: chat.RoleSystem, Content: instructions})
	}
	switch req.kind("input") {
	case 'n':
		return t, req.missing("input")
	case 's':
		s, _ := req.str("input")
		t.Messages = append(t.Messages, chat.Message{Role: chat.RoleUser, Content: s})
		return t, nil
	case 'a':
	default:
		return t, badRequest("input", "proxy: input must be a string or an array of items, not %s", kindName(req.kind("input")))
	}
	var items responsesItems
	if e := req.each("input", items.add); e != nil {
		return t, e
	}
	if len(items.msgs) == 0 {
		return t, badRequest("input", "proxy: input must hold at least one item")
	}
	t.Messages = append(t.Messages, items.msgs...)
	return t, nil
}

// responsesThinkingOff checks the reasoning object and reports whether it
// turns thinking off (effort "none").
func responsesThinkingOff(req wireObject) (bool, *apiError) {
	r, ok, e := req.object("reasoning")
	if e != nil || !ok {
		return false, e
	}
	effort, e := r.str("effort")
	if e != nil {
		return false, e
	}
	if _, e := r.str("summary"); e != nil {
		return false, e
	}
	return effort == "none", nil
}

// responsesTextFormat accepts plain-text output only: a JSON schema or
// JSON mode cannot be enforced without constraining the policy's sampling.
func responsesTextFormat(req wireObject) *apiError {
	text, ok, e := req.object("text")
	if e != nil || !ok {
		return e
	}
	format, ok, e := text.object("format")
	if e != nil || !ok {
		return e
	}
	typ, e := format.str("type")
	if e == nil && typ != "" && typ != "text" {
		e = format.unsupported("type", typ, "the proxy returns plain text only")
	}
	return e
}

// responsesHostedTool reports whether a tool type is one the API runs
// itself; such tools are left out of the prompt.
func responsesHostedTool(typ string) bool {
	switch typ {
	case "file_search", "code_interpreter", "image_generation", "mcp", "tool_search":
		return true
	}
	return strings.HasPrefix(typ, "web_search") || strings.HasPrefix(typ, "computer_use")
}

// responsesTools decodes the function tools of a request.
func responsesTools(req wireObject) ([]chat.Tool, *apiError) {
	var tools []chat.Tool
	e := req.each("tools", func(o wireObject) *apiError {
		typ, e := o.requiredStr("type")
		switch {
		case e != nil:
			return e
		case responsesHostedTool(typ):
			return nil
		case typ != "function":
			return o.unsupported("type", typ, "the proxy serves function tools only")
		}
		if _, e := o.boolean("strict"); e != nil {
			return e
		}
		tool, e := wireFunctionTool(o, "parameters")
		tools = append(tools, tool)
		return e
	})
	return tools, e
}

// wireFunctionTool reads a tool's name, description and JSON schema (the
// field schemaKey), which must be an object when present.
func wireFunctionTool(o wireObject, schemaKey string) (chat.Tool, *apiError) {
	var t chat.Tool
	var e *apiError
	if t.Name, e = o.requiredStr("name"); e != nil {
		return t, e
	}
	if t.Description, e = o.str("description"); e != nil {
		return t, e
	}
	switch k := o.kind(schemaKey); k {
	case 'n':
	case 'o':
		t.Parameters = o.fields[schemaKey]
	default:
		return t, badRequest(o.param(schemaKey), "proxy: %s must be a JSON schema object, not %s", o.param(schemaKey), kindName(k))
	}
	return t, nil
}

// responsesToolChoice maps tool_choice to the Turn's ToolChoice: "auto",
// "none", "required", or a function's name ({"type": "function"}).
// allowed_tools keeps only its mode: the prompt shows every tool.
func responsesToolChoice(req wireObject) (string, *apiError) {
	switch req.kind("tool_choice") {
	case 'n':
		return "", nil
	case 's':
		s, _ := req.str("tool_choice")
		switch s {
		case "auto", "none", "required":
			return s, nil
		}
		return "", badRequest("tool_choice", "proxy: tool_choice %q is not one of auto, none, required", s)
	}
	o, _, e := req.object("tool_choice")
	if e != nil {
		return "", e
	}
	typ, e := o.requiredStr("type")
	switch {
	case e != nil:
		return "", e
	case typ == "function":
		return o.requiredStr("name")
	case typ == "allowed_tools":
		mode, e := o.str("mode")
		if mode != "required" {
			mode = "auto"
		}
		return mode, e
	}
	return "", o.unsupported("type", typ, "only function tools can be chosen")
}

// responsesItems turns input items into messages: consecutive items of
// one assistant turn (reasoning, message, function_call) become one
// assistant message.
type responsesItems struct {
	msgs  []chat.Message
	names map[string]string // call_id -> function name, for tool messages
}

// lastWireAssistant returns the last message when it is an assistant's,
// for the items of the same turn to join it.
func lastWireAssistant(msgs []chat.Message) *chat.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == chat.RoleAssistant {
		return &msgs[n-1]
	}
	return nil
}

// add decodes one input item.
func (it *responsesItems) add(o wireObject) *apiError {
	typ, e := o.str("type")
	if e != nil {
		return e
	}
	if typ == "" && o.has("role") {
		typ = "message" // an EasyInputMessage
	}
	last := lastWireAssistant(it.msgs)
	switch typ {
	case "message":
		m, e := responsesMessage(o)
		if e != nil {
			return e
		}
		if m.Role == chat.RoleAssistant && last != nil && last.Content == "" && len(last.ToolCalls) == 0 {
			last.Content = m.Content // the text after this turn's reasoning
			return nil
		}
		it.msgs = append(it.msgs, m)
	case "function_call":
		tc, e := responsesFunctionCall(o)
		if e != nil {
			return e
		}
		if it.names == nil {
			it.names = map[string]string{}
		}
		it.names[tc.ID] = tc.Name
		if last != nil {
			last.ToolCalls = append(last.ToolCalls, tc)
			return nil
		}
		it.msgs = append(it.msgs, chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{tc}})
	case "function_call_output":
		id, e := o.requiredStr("call_id")
		if e != nil {
			return e
		}
		if !o.has("output") {
			return o.missing("output")
		}
		out, e := responsesContent(o, "output")
		if e != nil {
			return e
		}
		it.msgs = append(it.msgs, chat.Message{Role: chat.RoleTool, Content: out, ToolCallID: id, Name: it.names[id]})
	case "reasoning":
		text, e := responsesReasoningText(o)
		switch {
		case e != nil:
			return e
		case text == "": // encrypted or empty: nothing the template can show
		case last != nil && last.Content == "" && len(last.ToolCalls) == 0:
			last.ReasoningContent = joinWireTexts([]string{last.ReasoningContent, text})
		default:
			it.msgs = append(it.msgs, chat.Message{Role: chat.RoleAssistant, ReasoningContent: text})
		}
	case "":
		return o.missing("type")
	case "item_reference":
		return o.unsupported("type", typ, "the proxy is stateless; send the items themselves")
	default:
		return o.unsupported("type", typ, "the proxy reads message, function_call, function_call_output and reasoning items")
	}
	return nil
}

// responsesMessage decodes a message item.
func responsesMessage(o wireObject) (chat.Message, *apiError) {
	var m chat.Message
	role, e := o.requiredStr("role")
	if e != nil {
		return m, e
	}
	switch role {
	case "user":
		m.Role = chat.RoleUser
	case "assistant":
		m.Role = chat.RoleAssistant
	case "system", "developer":
		m.Role = chat.RoleSystem
	default:
		return m, badRequest(o.param("role"), "proxy: %s %q is not one of user, assistant, system, developer", o.param("role"), role)
	}
	if !o.has("content") {
		return m, o.missing("content")
	}
	m.Content, e = responsesContent(o, "content")
	return m, e
}

// responsesContent reads a content field: a string or a list of parts,
// whose texts are joined; images and files become a placeholder.
func responsesContent(o wireObject, key string) (string, *apiError) {
	return wireTexts(o, key, "content parts", func(p wireObject, typ string) (string, *apiError) {
		switch typ {
		case "input_text", "output_text":
			return p.str("text")
		case "refusal":
			return p.str("refusal")
		case "input_image":
			return omittedWireMedia("image"), nil
		case "input_file":
			return omittedWireMedia("file"), nil
		}
		return "", p.unsupported("type", typ, "the proxy reads text parts only")
	})
}

// responsesFunctionCall decodes a function_call item; its arguments must
// be JSON text (the template renders them as JSON).
func responsesFunctionCall(o wireObject) (chat.ToolCall, *apiError) {
	var tc chat.ToolCall
	var e *apiError
	if tc.ID, e = o.requiredStr("call_id"); e != nil {
		return tc, e
	}
	if tc.Name, e = o.requiredStr("name"); e != nil {
		return tc, e
	}
	args, e := o.str("arguments")
	if e != nil {
		return tc, e
	}
	if strings.TrimSpace(args) != "" {
		if !json.Valid([]byte(args)) {
			return tc, badRequest(o.param("arguments"), "proxy: %s is not valid JSON", o.param("arguments"))
		}
		tc.Arguments = json.RawMessage(args)
	}
	return tc, nil
}

// responsesReasoningText reads a reasoning item's text: its reasoning_text
// content when it has some, else its summary parts (all Codex sends back).
func responsesReasoningText(o wireObject) (string, *apiError) {
	for _, key := range []string{"content", "summary"} {
		var texts []string
		e := o.each(key, func(p wireObject) *apiError {
			text, e := p.str("text")
			texts = append(texts, text)
			return e
		})
		if e != nil || len(texts) > 0 {
			return joinWireTexts(texts), e
		}
	}
	return "", nil
}

// Replies.

// responsesItemID derives the ids of a reply's output items from its id, so
// that the same Reply always gives the same items: resp_X gives rs_X_0,
// msg_X_1, fc_X_2 (the number is the item's output index).
func responsesItemID(respID, prefix string, index int) string {
	_, suffix, ok := strings.Cut(respID, "_")
	if !ok {
		suffix = respID
	}
	return fmt.Sprintf("%s_%s_%d", prefix, suffix, index)
}

// responsesResponse is the response object.
type responsesResponse struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"`
	Error             *responsesFailure `json:"error"`
	IncompleteDetails *responsesDetails `json:"incomplete_details"`
	Model             string            `json:"model"`
	Output            []any             `json:"output"`
	Usage             *responsesUsage   `json:"usage"`
}

type responsesDetails struct {
	Reason string `json:"reason"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type responsesPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type responsesOutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responsesReasoningItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Status  string          `json:"status"`
	Summary []responsesPart `json:"summary"`
	Content []responsesPart `json:"content"`
}

type responsesMessageItem struct {
	ID      string                `json:"id"`
	Type    string                `json:"type"`
	Status  string                `json:"status"`
	Role    string                `json:"role"`
	Content []responsesOutputText `json:"content"`
}

type responsesCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// wireArguments is a tool call's arguments, {} when it has none.
func wireArguments(tc chat.ToolCall) json.RawMessage {
	if len(bytes.TrimSpace(tc.Arguments)) == 0 {
		return json.RawMessage("{}")
	}
	return tc.Arguments
}

func newResponsesUsage(u Usage) *responsesUsage {
	out := &responsesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	out.InputTokensDetails.CachedTokens = u.CachedTokens
	return out
}

func newResponsesReasoning(id, status, text string) responsesReasoningItem {
	parts := []responsesPart{}
	if text != "" {
		parts = append(parts, responsesPart{Type: "summary_text", Text: text})
	}
	return responsesReasoningItem{ID: id, Type: "reasoning", Status: status, Summary: parts,
		Content: []responsesPart{{Type: "reasoning_text", Text: text}}}
}

func newResponsesMessage(id, status string, content []responsesOutputText) responsesMessageItem {
	return responsesMessageItem{ID: id, Type: "message", Status: status, Role: "assistant", Content: content}
}

func newResponsesOutputText(text string) responsesOutputText {
	return responsesOutputText{Type: "output_text", Text: text, Annotations: []any{}}
}

func newResponsesCall(id, status string, tc chat.ToolCall) responsesCallItem {
	return responsesCallItem{ID: id, Type: "function_call", Status: status, CallID: tc.ID, Name: tc.Name, Arguments: string(wireArguments(tc))}
}

// newResponsesResponse is r's response object with status in_progress and no
// output yet.
func newResponsesResponse(r *Reply) responsesResponse {
	return responsesResponse{ID: r.ID, Object: "response", CreatedAt: r.Created.Unix(), Status: "in_progress", Model: r.Model, Output: []any{}}
}

// complete sets the status, details and usage of a finished reply; a
// length finish leaves its last output item incomplete.
func (resp *responsesResponse) complete(r *Reply) {
	resp.Status = "completed"
	if r.Finish == FinishLength {
		resp.Status = "incomplete"
		resp.IncompleteDetails = &responsesDetails{Reason: "max_output_tokens"}
	}
	resp.Usage = newResponsesUsage(r.Usage)
}

// responsesItemStatus is the status of the output item at index of n
// items: a length finish cut the last one.
func responsesItemStatus(r *Reply, index, n int) string {
	if r.Finish == FinishLength && index == n-1 {
		return "incomplete"
	}
	return "completed"
}

// reply writes a whole response object.
func (responsesFormat) reply(w http.ResponseWriter, r *Reply) {
	resp := newResponsesResponse(r)
	n := len(r.ToolCalls)
	if r.Reasoning != "" {
		n++
	}
	if r.Content != "" {
		n++
	}
	if r.Reasoning != "" {
		i := len(resp.Output)
		resp.Output = append(resp.Output, newResponsesReasoning(responsesItemID(r.ID, "rs", i), responsesItemStatus(r, i, n), r.Reasoning))
	}
	if r.Content != "" {
		i := len(resp.Output)
		resp.Output = append(resp.Output, newResponsesMessage(responsesItemID(r.ID, "msg", i), responsesItemStatus(r, i, n), []responsesOutputText{newResponsesOutputText(r.Content)}))
	}
	for _, tc := range r.ToolCalls {
		i := len(resp.Output)
		resp.Output = append(resp.Output, newResponsesCall(responsesItemID(r.ID, "fc", i), responsesItemStatus(r, i, n), tc))
	}
	resp.complete(r)
	replyJSON(w, http.StatusOK, resp)
}

// wireStatus is e's HTTP status, 500 when it has none.
func wireStatus(e *apiError) int {
	if e.Status < 400 || e.Status > 599 {
		return http.StatusInternalServerError
	}
	return e.Status
}

// fail writes an OpenAI error response, the same as Chat Completions'.
func (responsesFormat) fail(w http.ResponseWriter, e *apiError) {
	replyJSON(w, wireStatus(e), chatErrorOf(e))
}

// responsesFailure is the error of a failed response.
type responsesFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// newResponsesFailure is e as the error of a failed response, which
// always has a code: Codex reads it, and gives up instead of retrying on
// context_length_exceeded.
func newResponsesFailure(e *apiError) responsesFailure {
	f := responsesFailure{Message: e.Message}
	if c := chatErrorOf(e).Error.Code; c != nil {
		f.Code = *c
		return f
	}
	switch e.Kind {
	case KindOverloaded:
		f.Code = "server_is_overloaded"
	case KindServer, KindNotFound:
		f.Code = "server_error"
	default:
		f.Code = "invalid_prompt"
	}
	return f
}

// stream starts a streamed response: response.created and
// response.in_progress.
func (responsesFormat) stream(w http.ResponseWriter, r *Reply) streamWriter {
	s := &responsesStream{sse: newSSE(w), resp: newResponsesResponse(r)}
	s.emit("response.created", map[string]any{"response": s.resp})
	s.emit("response.in_progress", map[string]any{"response": s.resp})
	return s
}

// Kinds of the output item a responsesStream has open.
const (
	responsesOpenNone = iota
	responsesOpenReasoning
	responsesOpenMessage
)

// responsesStream writes the events of one streamed response. Reasoning
// deltas go to a reasoning item (response.reasoning_summary_text.delta:
// the events Codex and most clients show), text deltas to a message item;
// a change from one to the other closes the open item. Tool calls come at
// finish, each as a function_call item with its arguments in one delta.
type responsesStream struct {
	sse  *sse
	resp responsesResponse
	seq  int
	open int             // responsesOpenNone, responsesOpenReasoning or responsesOpenMessage
	buf  strings.Builder // the open item's text so far
	err  error           // the first write error; nothing is written after it
}

// emit writes one event, numbered; data gets the type and sequence_number.
func (s *responsesStream) emit(typ string, data map[string]any) error {
	if s.err != nil {
		return s.err
	}
	data["type"] = typ
	data["sequence_number"] = s.seq
	s.seq++
	s.err = s.sse.event(typ, data)
	return s.err
}

// openItem starts an output item of kind, closing the open one.
func (s *responsesStream) openItem(kind int) {
	if s.open == kind {
		return
	}
	s.closeItem("completed")
	s.open = kind
	s.buf.Reset()
	i := len(s.resp.Output)
	if kind == responsesOpenReasoning {
		id := responsesItemID(s.resp.ID, "rs", i)
		s.emit("response.output_item.added", map[string]any{"output_index": i,
			"item": responsesReasoningItem{ID: id, Type: "reasoning", Status: "in_progress", Summary: []responsesPart{}, Content: []responsesPart{}}})
		s.emit("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": i, "summary_index": 0,
			"part": responsesPart{Type: "summary_text", Text: ""}})
		return
	}
	id := responsesItemID(s.resp.ID, "msg", i)
	s.emit("response.output_item.added", map[string]any{"output_index": i, "item": newResponsesMessage(id, "in_progress", []responsesOutputText{})})
	s.emit("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": newResponsesOutputText("")})
}

// closeItem ends the open output item, if any, with status.
func (s *responsesStream) closeItem(status string) {
	i, text := len(s.resp.Output), s.buf.String()
	switch s.open {
	case responsesOpenReasoning:
		id := responsesItemID(s.resp.ID, "rs", i)
		part := responsesPart{Type: "summary_text", Text: text}
		s.emit("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "text": text})
		s.emit("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "part": part})
		item := newResponsesReasoning(id, status, text)
		s.emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
		s.resp.Output = append(s.resp.Output, item)
	case responsesOpenMessage:
		id := responsesItemID(s.resp.ID, "msg", i)
		part := newResponsesOutputText(text)
		s.emit("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}})
		s.emit("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": part})
		item := newResponsesMessage(id, status, []responsesOutputText{part})
		s.emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
		s.resp.Output = append(s.resp.Output, item)
	}
	s.open = responsesOpenNone
}

func (s *responsesStream) reasoning(delta string) error {
	if delta == "" || s.err != nil {
		return s.err
	}
	s.openItem(responsesOpenReasoning)
	s.buf.WriteString(delta)
	i := len(s.resp.Output)
	return s.emit("response.reasoning_summary_text.delta", map[string]any{"item_id": responsesItemID(s.resp.ID, "rs", i),
		"output_index": i, "summary_index": 0, "delta": delta})
}

func (s *responsesStream) text(delta string) error {
	if delta == "" || s.err != nil {
		return s.err
	}
	s.openItem(responsesOpenMessage)
	s.buf.WriteString(delta)
	i := len(s.resp.Output)
	return s.emit("response.output_text.delta", map[string]any{"item_id": responsesItemID(s.resp.ID, "msg", i),
		"output_index": i, "content_index": 0, "delta": delta, "logprobs": []any{}})
}

// finish closes the open item, writes r's tool calls and ends the stream
// with response.completed (response.incomplete on a length finish).
func (s *responsesStream) finish(r *Reply) error {
	if s.err != nil {
		return s.err
	}
	status := "completed"
	if r.Finish == FinishLength && len(r.ToolCalls) == 0 {
		status = "incomplete"
	}
	s.closeItem(status)
	for j, tc := range r.ToolCalls {
		i := len(s.resp.Output)
		id := responsesItemID(s.resp.ID, "fc", i)
		status := "completed"
		if r.Finish == FinishLength && j == len(r.ToolCalls)-1 {
			status = "incomplete"
		}
		s.emit("response.output_item.added", map[string]any{"output_index": i, "item": responsesCallItem{ID: id, Type: "function_call", Status: "in_progress", CallID: tc.ID, Name: tc.Name}})
		s.emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": string(wireArguments(tc))})
		s.emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": string(wireArguments(tc))})
		item := newResponsesCall(id, status, tc)
		s.emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
		s.resp.Output = append(s.resp.Output, item)
	}
	s.resp.complete(r)
	event := "response.completed"
	if s.resp.Status == "incomplete" {
		event = "response.incomplete"
	}
	return s.emit(event, map[string]any{"response": s.resp})
}

// fail ends the stream with an error event and response.failed (Codex
// reads the latter; other clients the former).
func (s *responsesStream) fail(e *apiError) {
	f := newResponsesFailure(e)
	var param *string
	if e.Param != "" {
		param = &e.Param
	}
	s.emit("error", map[string]any{"code": f.Code, "message": f.Message, "param": param})
	s.resp.Status = "failed"
	s.resp.Error = &f
	s.emit("response.failed", map[string]any{"response": s.resp})
}

// Request decoding helpers shared by the Responses and Messages formats: a
// body is split into its fields, each read on its own, so that every error
// names the offending field; unknown fields are ignored.

// wireObject is one JSON object of a request, split into its fields, with
// the path that names it in errors ("input[2]"; "" for the body).
type wireObject struct {
	path   string
	fields map[string]json.RawMessage
}

// parseWireRequest parses a Responses or Messages request body: a JSON
// object with a model, which starts the Turn.
func parseWireRequest(body []byte) (Turn, wireObject, *apiError) {
	var t Turn
	req, e := parseWireObject(body, "")
	if e != nil {
		return t, req, e
	}
	t.Model, e = req.requiredStr("model")
	return t, req, e
}

// parseWireObject splits raw, which must be a JSON object, into its fields.
func parseWireObject(raw json.RawMessage, path string) (wireObject, *apiError) {
	o := wireObject{path: path}
	if k := jsonKind(raw); k != 'o' {
		if path == "" {
			return o, badRequest("", "proxy: the request body must be a JSON object")
		}
		return o, badRequest(path, "proxy: %s must be an object, not %s", path, kindName(k))
	}
	if err := json.Unmarshal(raw, &o.fields); err != nil {
		return o, badRequest(path, "proxy: malformed JSON: %v", err)
	}
	return o, nil
}

// param names the field key of o.
func (o wireObject) param(key string) string { return joinPath(o.path, key) }

// has reports whether key is present and not null.
func (o wireObject) has(key string) bool { return jsonKind(o.fields[key]) != 'n' }

// kind is the JSON kind of the field key ('n' when absent).
func (o wireObject) kind(key string) byte { return jsonKind(o.fields[key]) }

// missing is the 400 of a required field.
func (o wireObject) missing(key string) *apiError {
	return badRequest(o.param(key), "proxy: %s is required", o.param(key))
}

// unsupported is the 400 of a value the proxy does not serve; why ends
// the message.
func (o wireObject) unsupported(key, value, why string) *apiError {
	return badRequest(o.param(key), "proxy: %s %q is not supported: %s", o.param(key), value, why)
}

// wireField decodes the field key of o into a T; absent and null give the
// zero T and false; a value of another type is a 400 naming the field.
func wireField[T any](o wireObject, key string) (T, bool, *apiError) {
	var v T
	if !o.has(key) {
		return v, false, nil
	}
	if err := json.Unmarshal(o.fields[key], &v); err != nil {
		return v, false, badRequest(o.param(key), "proxy: %s must be %s, not %s",
			o.param(key), jsonTypeName(reflect.TypeOf(v)), kindName(o.kind(key)))
	}
	return v, true, nil
}

// str reads an optional string field.
func (o wireObject) str(key string) (string, *apiError) {
	s, _, e := wireField[string](o, key)
	return s, e
}

// requiredStr reads a string field that must be present and not empty.
func (o wireObject) requiredStr(key string) (string, *apiError) {
	s, e := o.str(key)
	if e == nil && s == "" {
		e = o.missing(key)
	}
	return s, e
}

// boolean reads an optional boolean field.
func (o wireObject) boolean(key string) (bool, *apiError) {
	b, _, e := wireField[bool](o, key)
	return b, e
}

// number checks that an optional field is a number.
func (o wireObject) number(key string) *apiError {
	_, _, e := wireField[float64](o, key)
	return e
}

// positive reads an optional integer field that must be at least 1; 0
// means absent.
func (o wireObject) positive(key string) (int, *apiError) {
	n, ok, e := wireField[int](o, key)
	if e == nil && ok && n < 1 {
		e = badRequest(o.param(key), "proxy: %s must be at least 1, not %d", o.param(key), n)
	}
	return n, e
}

// array reads an optional list field.
func (o wireObject) array(key string) ([]json.RawMessage, *apiError) {
	list, _, e := wireField[[]json.RawMessage](o, key)
	return list, e
}

// object reads an optional object field.
func (o wireObject) object(key string) (wireObject, bool, *apiError) {
	if !o.has(key) {
		return wireObject{}, false, nil
	}
	sub, e := parseWireObject(o.fields[key], o.param(key))
	return sub, e == nil, e
}

// each calls f with every element of the list field key, as objects named
// key[i].
func (o wireObject) each(key string, f func(wireObject) *apiError) *apiError {
	list, e := o.array(key)
	for i := 0; e == nil && i < len(list); i++ {
		var item wireObject
		if item, e = parseWireObject(list[i], indexPath(o.param(key), i)); e == nil {
			e = f(item)
		}
	}
	return e
}
