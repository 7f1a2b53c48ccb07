package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/legorl/legorl/policy/chat"
)

// Turn is one request in the proxy's own terms: what every wire format
// (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages) decodes
// into. Sampling settings a harness sends are not here: the proxy injects
// its own (the rollout's), and records them.
type Turn struct {
	Model    string
	Messages []chat.Message // a system prompt is Messages[0] with RoleSystem
	Tools    []chat.Tool
	// MaxTokens bounds the completion; 0 means up to the context limit.
	MaxTokens int
	Stream    bool
	// StreamUsage asks for usage in the stream (OpenAI
	// stream_options.include_usage; always on for the other formats).
	StreamUsage bool
	// DisableThinking renders the template with enable_thinking=false.
	DisableThinking bool
	// ToolChoice is "auto" (or empty), "none", "required", or the name of
	// the one function to call. Only "none" changes anything: tool-call
	// markup is then returned as text. Sampling is never constrained (the
	// recorded logprobs must be the policy's own), so "required" and a
	// named function are accepted and not enforced.
	ToolChoice string
}

// Finish reasons of a Reply, in neutral terms; each wire format maps them
// to its own (Anthropic: end_turn, max_tokens, tool_use).
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// Usage counts tokens the way every API reports them.
type Usage struct {
	PromptTokens, CompletionTokens, CachedTokens int
}

// Reply is the policy's answer to a Turn.
type Reply struct {
	ID      string // the wire id: chatcmpl-..., resp_..., msg_...
	Model   string
	Created time.Time
	// Content, Reasoning and ToolCalls are the parsed completion; every
	// tool call has an ID assigned by the proxy.
	Content   string
	Reasoning string
	ToolCalls []chat.ToolCall
	Finish    string
	Usage     Usage
	// StreamUsage is the Turn's StreamUsage, for stream writers.
	StreamUsage bool
}

// Error kinds, in neutral terms; each wire format maps them to its own type
// names (OpenAI invalid_request_error, Anthropic invalid_request_error,
// not_found_error, overloaded_error, api_error).
const (
	KindInvalidRequest = "invalid_request"
	KindNotFound       = "not_found"
	KindContextLength  = "context_length_exceeded" // an invalid request; also marks the rollout overlong
	KindOverloaded     = "overloaded"
	KindServer         = "server_error"
)

// apiError is an error the caller receives in its own wire format.
type apiError struct {
	Status  int    // HTTP status: 400, 404, 413, 429, 500, 503
	Kind    string // one of the Kind constants
	Param   string // the offending request field, when there is one
	Message string // one line
	// Code is a machine-readable code for formats that have one (OpenAI's
	// error.code: "model_not_found", "context_length_exceeded"); empty
	// for none.
	Code string
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 invalid_request error naming param.
func badRequest(param, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Kind: KindInvalidRequest, Param: param, Message: fmt.Sprintf(format, a...)}
}

// wireFormat is one API surface. It only translates: it decodes request
// bodies into Turns and writes Replies, streams and errors in its own
// shape; rendering, generation and recording happen in the proxy.
type wireFormat interface {
	// decode parses and checks a request body. Unknown fields are ignored;
	// a known field of the wrong type, a missing required field or an
	// unsupported setting (n > 1, say) is a 400 naming the field.
	decode(body []byte) (Turn, *apiError)
	// reply writes a whole non-streamed reply.
	reply(w http.ResponseWriter, r *Reply)
	// stream starts a streamed reply (status 200 and SSE headers, and the
	// format's opening events) for r's ID, Model and Created.
	stream(w http.ResponseWriter, r *Reply) streamWriter
	// fail writes e as a non-streamed error response.
	fail(w http.ResponseWriter, e *apiError)
}

// streamWriter writes the events of one streamed reply. Reasoning and text
// come as they are generated; tool calls, the finish reason and usage come
// with finish. After an error no other method is called.
type streamWriter interface {
	reasoning(delta string) error
	text(delta string) error
	finish(r *Reply) error
	// fail ends the stream with an error event in the format's shape.
	fail(e *apiError)
}

// sse writes server-sent events, flushing after each one.
type sse struct {
	w http.ResponseWriter
	f http.Flusher // nil when the writer cannot flush
}

// newSSE sends the status and headers of an event stream.
func newSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event: "event: NAME" when name is not empty, then data
// as one line of JSON.
func (s *sse) event(name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("proxy: encode %s event: %w", name, err)
	}
	return s.raw(name, b)
}

// raw writes one event whose data is b as is (OpenAI's "[DONE]").
func (s *sse) raw(name string, b []byte) error {
	var err error
	if name != "" {
		_, err = fmt.Fprintf(s.w, "event: %s\n", name)
	}
	if err == nil {
		_, err = fmt.Fprintf(s.w, "data: %s\n\n", b)
	}
	if err != nil {
		return fmt.Errorf("proxy: write event: %w", err)
	}
	if s.f != nil {
		s.f.Flush()
	}
	return nil
}
