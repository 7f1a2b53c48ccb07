package proxy

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/legorl/legorl/policy/chat"
)

// chatFormat is OpenAI Chat Completions (POST .../v1/chat/completions), as
// OpenAI documents it and vLLM extends it (reasoning_content on messages
// and deltas, chat_template_kwargs.enable_thinking).
//
// What is honoured: messages (system, developer as system, user, assistant
// with tool_calls and reasoning_content or reasoning, tool; content as a
// string, null, or an array of text parts joined by newlines), tools of
// type function, max_completion_tokens or max_tokens, stream,
// stream_options.include_usage, chat_template_kwargs.enable_thinking, and
// tool_choice "none" (tool-call markup comes back as text). Refused with a
// 400: n other than 1, response_format json_schema, audio, non-text content
// parts, function (legacy) messages, non-function tools. Accepted and
// ignored: temperature, top_p, seed, stop, logit_bias, penalties, logprobs
// and top_logprobs (the reply carries no logprobs: the recorded ones are in
// the segments), parallel_tool_calls, tool_choice "required" or a named
// function (sampling is never constrained), and any unknown field; a known
// field of the wrong type is a 400 naming it.
type chatFormat struct{}

// chatRequest is the body of a Chat Completions request. Fields the proxy
// ignores are still typed, so that a wrong type is reported.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessageIn `json:"messages"`
	Tools               []chatToolIn    `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              *bool           `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	N              *int `json:"n"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Modalities         []string        `json:"modalities"`
	Audio              json.RawMessage `json:"audio"`
	ChatTemplateKwargs *struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`

	// Accepted and ignored: the proxy samples with the rollout's settings.
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	Seed              *int64             `json:"seed"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	Logprobs          *bool              `json:"logprobs"`
	TopLogprobs       *int               `json:"top_logprobs"`
	ParallelToolCalls *bool              `json:"parallel_tool_calls"`
	User              *string            `json:"user"`
}

type chatMessageIn struct {
	Role             string           `json:"role"`
	Content          json.RawMessage  `json:"content"`
	ReasoningContent *string          `json:"reasoning_content"`
	Reasoning        *string          `json:"reasoning"`
	ToolCalls        []chatToolCallIn `json:"tool_calls"`
	ToolCallID       string           `json:"tool_call_id"`
	Name             string           `json:"name"`
}

type chatToolCallIn struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chatContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type chatToolIn struct {
	Type     string          `json:"type"`
	Function *chatFunctionIn `json:"function"`
}

type chatFunctionIn struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// decode parses a Chat Completions request (see decodeFrom).
func (f chatFormat) decode(body []byte) (Turn, *apiError) {
	t, _, e := f.decodeFrom(body, nil)
	return t, e
}

// decodeFrom parses a Chat Completions request, reusing what decoding an
// earlier body of the rollout left in prev when this one repeats its
// messages (a 20-turn agent body is tens of kB and each call repeats the
// one before; see BenchmarkCall). scanChat decodes the common case;
// anything it cannot vouch for, errors included, is decoded again with
// decodeChatSlow, so both give the same Turn or the same error.
func (chatFormat) decodeFrom(body []byte, prev []*chatMemo) (Turn, chatScanned, *apiError) {
	if t, out, ok := scanChat(body, prev); ok {
		return t, out, nil
	}
	t, e := decodeChatSlow(body)
	return t, chatScanned{base: -1}, e
}

// decodeChatSlow parses a Chat Completions request with encoding/json in
// one pass; only a failed decode is looked at again, message by message, to
// name the field with its index.
func decodeChatSlow(body []byte) (Turn, *apiError) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Turn{}, chatLocate(body, err)
	}
	return chatTurn(&req, nil)
}

// chatTurn checks a decoded request and converts it to a Turn. prefix
// holds leading messages already converted (scanChat's reused ones);
// req.Messages holds the messages after them.
func chatTurn(req *chatRequest, prefix []chat.Message) (Turn, *apiError) {
	if len(prefix)+len(req.Messages) == 0 {
		return Turn{}, badRequest("messages", "proxy: messages must hold at least one message")
	}
	if req.N != nil && *req.N != 1 {
		return Turn{}, badRequest("n", "proxy: n=%d is not supported: one choice per request", *req.N)
	}
	if req.ResponseFormat != nil && req.ResponseFormat.Type == "json_schema" {
		return Turn{}, badRequest("response_format", "proxy: response_format json_schema is not supported (sampling is not constrained)")
	}
	for _, m := range req.Modalities {
		if m != "text" {
			return Turn{}, badRequest("modalities", "proxy: modality %q is not supported", m)
		}
	}
	if jsonKind(req.Audio) != 'n' {
		return Turn{}, badRequest("audio", "proxy: audio output is not supported")
	}
	t := Turn{Model: req.Model, Stream: req.Stream != nil && *req.Stream}
	t.StreamUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage != nil && *req.StreamOptions.IncludeUsage
	t.DisableThinking = req.ChatTemplateKwargs != nil && req.ChatTemplateKwargs.EnableThinking != nil && !*req.ChatTemplateKwargs.EnableThinking
	switch {
	case req.MaxCompletionTokens != nil:
		t.MaxTokens = *req.MaxCompletionTokens
		if t.MaxTokens < 1 {
			return Turn{}, badRequest("max_completion_tokens", "proxy: max_completion_tokens must be at least 1")
		}
	case req.MaxTokens != nil:
		t.MaxTokens = *req.MaxTokens
		if t.MaxTokens < 1 {
			return Turn{}, badRequest("max_tokens", "proxy: max_tokens must be at least 1")
		}
	}
	if len(req.Messages) > 0 {
		t.Messages = append(make([]chat.Message, 0, len(prefix)+len(req.Messages)), prefix...)
	} else {
		t.Messages = prefix
	}
	for i, in := range req.Messages {
		m, e := chatMessage(in, indexPath("messages", len(prefix)+i))
		if e != nil {
			return Turn{}, e
		}
		t.Messages = append(t.Messages, m)
	}
	for i, in := range req.Tools {
		tool, e := chatTool(in, indexPath("tools", i))
		if e != nil {
			return Turn{}, e
		}
		t.Tools = append(t.Tools, tool)
	}
	choice, e := chatToolChoice(req.ToolChoice)
	if e != nil {
		return Turn{}, e
	}
	t.ToolChoice = choice
	return t, nil
}

// chatLocate names the field of a failed decode: the message or tool it is
// in, by index, when it is in one.
func chatLocate(body []byte, err error) *apiError {
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &raw) == nil {
		for i, m := range raw.Messages {
			var in chatMessageIn
			if e := unmarshalAt(m, &in, indexPath("messages", i)); e != nil {
				return e
			}
		}
		for i, t := range raw.Tools {
			var in chatToolIn
			if e := unmarshalAt(t, &in, indexPath("tools", i)); e != nil {
				return e
			}
		}
	}
	return jsonError(err, "")
}

// chatMessage converts one message at path.
func chatMessage(in chatMessageIn, path string) (chat.Message, *apiError) {
	content, e := chatContent(in.Content, path+".content")
	if e != nil {
		return chat.Message{}, e
	}
	m := chat.Message{Content: content}
	switch in.Role {
	case "system", "developer":
		m.Role = chat.RoleSystem
	case "user":
		m.Role = chat.RoleUser
	case "assistant":
		m.Role = chat.RoleAssistant
		switch {
		case in.ReasoningContent != nil:
			m.ReasoningContent = *in.ReasoningContent
		case in.Reasoning != nil:
			m.ReasoningContent = *in.Reasoning
		}
		for j, tc := range in.ToolCalls {
			call, e := chatCallIn(tc, indexPath(path+".tool_calls", j))
			if e != nil {
				return chat.Message{}, e
			}
			m.ToolCalls = append(m.ToolCalls, call)
		}
	case "tool":
		m.Role, m.ToolCallID, m.Name = chat.RoleTool, in.ToolCallID, in.Name
	case "":
		return chat.Message{}, badRequest(path+".role", "proxy: %s.role is required", path)
	default:
		return chat.Message{}, badRequest(path+".role", "proxy: role %q is not supported", in.Role)
	}
	return m, nil
}

// chatContent flattens a message's content: a string, null, or an array of
// text parts (joined by newlines, as vLLM does).
func chatContent(raw json.RawMessage, path string) (string, *apiError) {
	switch jsonKind(raw) {
	case 'n':
		return "", nil
	case 's':
		return jsonStringValue(raw, path)
	case 'a':
		var parts []json.RawMessage
		if e := unmarshalAt(raw, &parts, path); e != nil {
			return "", e
		}
		texts := make([]string, 0, len(parts))
		for i, pr := range parts {
			pp := indexPath(path, i)
			if jsonKind(pr) == 's' { // a bare string part, as some clients send
				var s string
				if e := unmarshalAt(pr, &s, pp); e != nil {
					return "", e
				}
				texts = append(texts, s)
				continue
			}
			var part chatContentPart
			if e := unmarshalAt(pr, &part, pp); e != nil {
				return "", e
			}
			if part.Type != "text" && part.Type != "input_text" {
				return "", badRequest(pp+".type", "proxy: content part type %q is not supported (text only)", part.Type)
			}
			texts = append(texts, part.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", badRequest(path, "proxy: %s must be a string or an array of parts, not %s", path, kindName(jsonKind(raw)))
}

// chatCallIn decodes one tool call of an assistant message; its arguments
// are a JSON string holding JSON (or, leniently, the JSON itself).
func chatCallIn(tc chatToolCallIn, path string) (chat.ToolCall, *apiError) {
	if tc.Type != "" && tc.Type != "function" {
		return chat.ToolCall{}, badRequest(path+".type", "proxy: tool call type %q is not supported", tc.Type)
	}
	if tc.Function.Name == "" {
		return chat.ToolCall{}, badRequest(path+".function.name", "proxy: %s.function.name is required", path)
	}
	call := chat.ToolCall{ID: tc.ID, Name: tc.Function.Name}
	args := tc.Function.Arguments
	ap := path + ".function.arguments"
	switch jsonKind(args) {
	case 'n':
	case 's':
		s, e := jsonStringValue(args, ap)
		if e != nil {
			return chat.ToolCall{}, e
		}
		if strings.TrimSpace(s) != "" {
			if !json.Valid([]byte(s)) {
				return chat.ToolCall{}, badRequest(ap, "proxy: %s is not valid JSON", ap)
			}
			call.Arguments = json.RawMessage(s)
		}
	case 'o':
		call.Arguments = args
	default:
		return chat.ToolCall{}, badRequest(ap, "proxy: %s must be a string, not %s", ap, kindName(jsonKind(args)))
	}
	return call, nil
}

// chatTool converts one tool definition.
func chatTool(in chatToolIn, path string) (chat.Tool, *apiError) {
	if in.Type != "function" {
		return chat.Tool{}, badRequest(path+".type", "proxy: tool type %q is not supported (function only)", in.Type)
	}
	if in.Function == nil || in.Function.Name == "" {
		return chat.Tool{}, badRequest(path+".function.name", "proxy: %s.function.name is required", path)
	}
	params := in.Function.Parameters
	if k := jsonKind(params); k != 'n' && k != 'o' {
		return chat.Tool{}, badRequest(path+".function.parameters", "proxy: parameters must be an object, not %s", kindName(k))
	}
	if jsonKind(params) == 'n' {
		params = nil
	}
	return chat.Tool{Name: in.Function.Name, Description: in.Function.Description, Parameters: params}, nil
}

// chatToolChoice reads tool_choice: "auto", "none", "required", or
// {"type": "function", "function": {"name": ...}}.
func chatToolChoice(raw json.RawMessage) (string, *apiError) {
	switch jsonKind(raw) {
	case 'n':
		return "", nil
	case 's':
		var s string
		if e := unmarshalAt(raw, &s, "tool_choice"); e != nil {
			return "", e
		}
		switch s {
		case "auto", "none", "required":
			return s, nil
		}
		return "", badRequest("tool_choice", "proxy: tool_choice %q is not one of auto, none, required", s)
	case 'o':
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if e := unmarshalAt(raw, &c, "tool_choice"); e != nil {
			return "", e
		}
		if c.Function.Name == "" {
			return "", badRequest("tool_choice.function.name", "proxy: tool_choice.function.name is required")
		}
		return c.Function.Name, nil
	}
	return "", badRequest("tool_choice", "proxy: tool_choice must be a string or an object, not %s", kindName(jsonKind(raw)))
}

// Reply bodies.

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      *chatMessageOut `json:"message,omitempty"`
	Delta        *chatMessageOut `json:"delta,omitempty"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     *struct{}       `json:"logprobs"` // always null
}

// chatMessageOut is a reply's message, or a stream chunk's delta.
type chatMessageOut struct {
	Role             string            `json:"role,omitempty"`
	Content          *string           `json:"content,omitempty"`
	ReasoningContent string            `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCallOut `json:"tool_calls,omitempty"`
}

type chatToolCallOut struct {
	Index    *int   `json:"index,omitempty"` // deltas only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func chatUsageOf(u Usage) *chatUsage {
	out := &chatUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	out.PromptTokensDetails.CachedTokens = u.CachedTokens
	return out
}

func chatCallsOut(calls []chat.ToolCall, deltas bool) []chatToolCallOut {
	out := make([]chatToolCallOut, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type = c.ID, "function"
		out[i].Function.Name = c.Name
		out[i].Function.Arguments = string(c.Arguments)
		if out[i].Function.Arguments == "" {
			out[i].Function.Arguments = "{}"
		}
		if deltas {
			out[i].Index = &i
		}
	}
	return out
}

func (f chatFormat) reply(w http.ResponseWriter, r *Reply) {
	msg := &chatMessageOut{Role: "assistant", ReasoningContent: r.Reasoning, ToolCalls: chatCallsOut(r.ToolCalls, false)}
	if r.Content != "" || len(r.ToolCalls) == 0 {
		msg.Content = &r.Content
	}
	finish := r.Finish
	replyJSON(w, http.StatusOK, chatCompletion{ID: r.ID, Object: "chat.completion", Created: r.Created.Unix(), Model: r.Model,
		Choices: []chatChoice{{Message: msg, FinishReason: &finish}}, Usage: chatUsageOf(r.Usage)})
}

func (f chatFormat) stream(w http.ResponseWriter, r *Reply) streamWriter {
	s := &chatStream{sse: newSSE(w), r: r}
	empty := ""
	s.err = s.chunk(&chatMessageOut{Role: "assistant", Content: &empty}, nil)
	return s
}

// chatError is OpenAI's error body.
type chatError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func chatErrorOf(e *apiError) chatError {
	var out chatError
	out.Error.Message = e.Message
	out.Error.Type = "invalid_request_error"
	switch e.Kind {
	case KindServer:
		out.Error.Type = "server_error"
	case KindOverloaded:
		out.Error.Type = "server_error"
	}
	if e.Param != "" {
		out.Error.Param = &e.Param
	}
	code := e.Code
	if code == "" && e.Kind == KindContextLength {
		code = "context_length_exceeded"
	}
	if code != "" {
		out.Error.Code = &code
	}
	return out
}

func (chatFormat) fail(w http.ResponseWriter, e *apiError) { replyJSON(w, e.Status, chatErrorOf(e)) }

// chatStream writes chat.completion.chunk events.
type chatStream struct {
	*sse
	r   *Reply
	err error // the first failed write
}

func (s *chatStream) chunk(delta *chatMessageOut, finish *string) error {
	if s.err != nil {
		return s.err
	}
	s.err = s.event("", chatCompletion{ID: s.r.ID, Object: "chat.completion.chunk", Created: s.r.Created.Unix(), Model: s.r.Model,
		Choices: []chatChoice{{Delta: delta, FinishReason: finish}}})
	return s.err
}

func (s *chatStream) reasoning(d string) error {
	return s.chunk(&chatMessageOut{ReasoningContent: d}, nil)
}

func (s *chatStream) text(d string) error { return s.chunk(&chatMessageOut{Content: &d}, nil) }

// finish sends the tool calls (each whole, with its index), the finish
// reason, the usage chunk when asked for, and [DONE].
func (s *chatStream) finish(r *Reply) error {
	if len(r.ToolCalls) > 0 {
		s.chunk(&chatMessageOut{ToolCalls: chatCallsOut(r.ToolCalls, true)}, nil)
	}
	finish := r.Finish
	s.chunk(&chatMessageOut{}, &finish)
	if r.StreamUsage && s.err == nil {
		s.err = s.event("", chatCompletion{ID: r.ID, Object: "chat.completion.chunk", Created: r.Created.Unix(), Model: r.Model,
			Choices: []chatChoice{}, Usage: chatUsageOf(r.Usage)})
	}
	if s.err == nil {
		s.err = s.raw("", []byte("[DONE]"))
	}
	return s.err
}

// fail sends an error event; OpenAI clients end the stream on it.
func (s *chatStream) fail(e *apiError) {
	if s.err == nil {
		s.err = s.event("", chatErrorOf(e))
	}
}

// replyJSON writes v with status.
func replyJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"proxy: encoding the reply failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
