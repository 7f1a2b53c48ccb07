package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The Chat Completions wire types the agents send and read.

type message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"` // stream deltas only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatRequest struct {
	Model     string    `json:"model"`
	Messages  []message `json:"messages"`
	Tools     []tool    `json:"tools,omitempty"`
	MaxTokens int       `json:"max_tokens,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
}

// reply is one model turn as received.
type reply struct {
	Content   string
	Reasoning string
	ToolCalls []toolCall
	Finish    string
}

type chatResponse struct {
	Choices []struct {
		Message *struct {
			Content          *string    `json:"content"`
			ReasoningContent string     `json:"reasoning_content"`
			ToolCalls        []toolCall `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Content          *string    `json:"content"`
			ReasoningContent string     `json:"reasoning_content"`
			ToolCalls        []toolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *apiError `json:"error"`
}

type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

// maxReplyBytes bounds a reply body (or one stream event).
const maxReplyBytes = 16 << 20

// client speaks Chat Completions to one base URL.
type client struct {
	url, key, model string
	maxTokens       int
	stream          bool
	timeout         time.Duration
	http            *http.Client
}

func newClient(cfg Config) *client {
	return &client{
		url: strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions", key: cfg.APIKey, model: cfg.Model,
		maxTokens: cfg.MaxTokens, stream: cfg.Stream, timeout: cfg.RequestTimeout,
		// No proxy from the environment: the model server is local.
		http: &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}},
	}
}

// complete runs one call. A transport failure is retried twice (the proxy
// recognises a repeated call and rolls the first generation back); an
// error reply is not.
func (c *client) complete(ctx context.Context, req chatRequest) (reply, error) {
	req.Model, req.MaxTokens, req.Stream = c.model, c.maxTokens, c.stream
	body, err := json.Marshal(req)
	if err != nil {
		return reply{}, fmt.Errorf("agent: encoding the request: %w", err)
	}
	var last error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return reply{}, ctx.Err()
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		r, retry, err := c.once(ctx, body)
		if err == nil || !retry {
			return r, err
		}
		last = err
	}
	return reply{}, last
}

// once posts body; retry says whether the failure was in transport.
func (c *client) once(ctx context.Context, body []byte) (reply, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return reply{}, false, fmt.Errorf("agent: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+c.key)
	if c.stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return reply{}, ctx.Err() == nil, fmt.Errorf("agent: model call: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e chatResponse
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != nil {
			msg = e.Error.Message
		}
		return reply{}, false, fmt.Errorf("agent: model call: HTTP %d: %s", resp.StatusCode, msg)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r, err := readStream(resp.Body)
		return r, false, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return reply{}, ctx.Err() == nil, fmt.Errorf("agent: reading the reply: %w", err)
	}
	var cr chatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		return reply{}, false, fmt.Errorf("agent: decoding the reply: %w", err)
	}
	if cr.Error != nil {
		return reply{}, false, fmt.Errorf("agent: model call: %s", cr.Error.Message)
	}
	if len(cr.Choices) == 0 || cr.Choices[0].Message == nil {
		return reply{}, false, errors.New("agent: the reply has no choice")
	}
	ch := cr.Choices[0]
	r := reply{Reasoning: ch.Message.ReasoningContent, ToolCalls: ch.Message.ToolCalls}
	if ch.Message.Content != nil {
		r.Content = *ch.Message.Content
	}
	if ch.FinishReason != nil {
		r.Finish = *ch.FinishReason
	}
	return r, false, nil
}

// readStream assembles a streamed reply from its server-sent events:
// content and reasoning deltas are concatenated, tool calls gathered by
// index (their arguments concatenated), until [DONE].
func readStream(body io.Reader) (reply, error) {
	var r reply
	var calls []toolCall
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), maxReplyBytes)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // event names, comments, blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			r.ToolCalls = calls
			return r, nil
		}
		var ev chatResponse
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return reply{}, fmt.Errorf("agent: decoding a stream event: %w", err)
		}
		if ev.Error != nil {
			return reply{}, fmt.Errorf("agent: model call: %s", ev.Error.Message)
		}
		for _, ch := range ev.Choices {
			if ch.FinishReason != nil {
				r.Finish = *ch.FinishReason
			}
			d := ch.Delta
			if d == nil {
				continue
			}
			if d.Content != nil {
				r.Content += *d.Content
			}
			r.Reasoning += d.ReasoningContent
			for _, tc := range d.ToolCalls {
				i := len(calls)
				if tc.Index != nil {
					i = *tc.Index
				}
				if i < 0 || i > len(calls) {
					return reply{}, fmt.Errorf("agent: stream tool call index %d out of order", i)
				}
				if i == len(calls) {
					calls = append(calls, toolCall{ID: tc.ID, Type: "function"})
					calls[i].Function.Name = tc.Function.Name
				}
				if tc.ID != "" {
					calls[i].ID = tc.ID
				}
				if tc.Function.Name != "" {
					calls[i].Function.Name = tc.Function.Name
				}
				calls[i].Function.Arguments += tc.Function.Arguments
			}
		}
	}
	if err := sc.Err(); err != nil {
		return reply{}, fmt.Errorf("agent: reading the stream: %w", err)
	}
	return reply{}, errors.New("agent: the stream ended without [DONE]")
}
