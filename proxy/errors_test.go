package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/legorl/legorl/policy/infer"
)

// genFunc is a Generator from a function.
type genFunc func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error)

func (f genFunc) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	return f(ctx, req, emit)
}

// httpResult is a response read whole.
type httpResult struct {
	status int
	header http.Header
	body   string
}

func do(t testing.TB, method, url, body string) httpResult {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpResult{resp.StatusCode, resp.Header, string(b)}
}

// openaiErr parses an OpenAI error body, failing the test if it is not one.
func openaiErr(t testing.TB, body string) (typ, param, code, message string) {
	t.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %q (%v)", body, err)
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Type, param, code, e.Error.Message
}

const okBody = `{"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}`

func TestRequestErrors(t *testing.T) {
	tok := testTokenizer(t)
	_, srv := testProxy(t, newScripted(t, tok, "hello<|im_end|>"), func(o *Options) {
		o.Models = []string{"tiny", "alias"}
		o.MaxBodyBytes = 4096
	})
	chatURL := srv.URL + "/rollout/r1/v1/chat/completions"
	tests := []struct {
		name, method, url, body string
		status                  int
		typ, param, code        string
	}{
		{"malformed JSON", "POST", chatURL, `{"messages": [`, 400, "invalid_request_error", "", ""},
		{"trailing garbage", "POST", chatURL, okBody + "x", 400, "invalid_request_error", "", ""},
		{"not an object", "POST", chatURL, `[1, 2]`, 400, "invalid_request_error", "", ""},
		{"empty body", "POST", chatURL, ``, 400, "invalid_request_error", "", ""},
		{"model of the wrong type", "POST", chatURL, `{"model": 5, "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "model", ""},
		{"stream of the wrong type", "POST", chatURL, `{"stream": "yes", "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "stream", ""},
		{"temperature of the wrong type", "POST", chatURL, `{"temperature": "hot", "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "temperature", ""},
		{"role of the wrong type", "POST", chatURL, `{"messages": [{"role": 1, "content": "hi"}]}`, 400, "invalid_request_error", "messages[0].role", ""},
		{"message not an object", "POST", chatURL, `{"messages": ["hi"]}`, 400, "invalid_request_error", "messages[0]", ""},
		{"content of the wrong type", "POST", chatURL, `{"messages": [{"role": "user", "content": 7}]}`, 400, "invalid_request_error", "messages[0].content", ""},
		{"arguments of the wrong type", "POST", chatURL, `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": 3}}]}]}`, 400, "invalid_request_error", "messages[1].tool_calls[0].function.arguments", ""},
		{"arguments not JSON", "POST", chatURL, `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}`, 400, "invalid_request_error", "messages[1].tool_calls[0].function.arguments", ""},
		{"no messages", "POST", chatURL, `{"model": "tiny", "messages": []}`, 400, "invalid_request_error", "messages", ""},
		{"unknown role", "POST", chatURL, `{"messages": [{"role": "wizard", "content": "hi"}]}`, 400, "invalid_request_error", "messages[0].role", ""},
		{"image part", "POST", chatURL, `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, 400, "invalid_request_error", "messages[0].content[0].type", ""},
		{"n=2", "POST", chatURL, `{"n": 2, "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "n", ""},
		{"json_schema", "POST", chatURL, `{"response_format": {"type": "json_schema"}, "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "response_format", ""},
		{"non-function tool", "POST", chatURL, `{"tools": [{"type": "web_search"}], "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "tools[0].type", ""},
		{"tool without a name", "POST", chatURL, `{"tools": [{"type": "function", "function": {}}], "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "tools[0].function.name", ""},
		{"bad tool_choice", "POST", chatURL, `{"tool_choice": "sometimes", "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "tool_choice", ""},
		{"max_tokens 0", "POST", chatURL, `{"max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}`, 400, "invalid_request_error", "max_tokens", ""},
		{"unknown model", "POST", chatURL, `{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`, 404, "invalid_request_error", "model", "model_not_found"},
		{"unknown rollout", "POST", srv.URL + "/rollout/nope/v1/chat/completions", okBody, 404, "invalid_request_error", "", "rollout_not_found"},
		{"wrong method", "GET", chatURL, "", 405, "invalid_request_error", "", ""},
		{"body too large", "POST", chatURL, `{"messages": [{"role": "user", "content": "` + strings.Repeat("x", 5000) + `"}]}`, 413, "invalid_request_error", "", ""},
		{"unknown path", "POST", srv.URL + "/rollout/r1/v1/completions", okBody, 404, "invalid_request_error", "", ""},
		{"models of an unknown rollout", "GET", srv.URL + "/rollout/nope/v1/models", "", 404, "invalid_request_error", "", "rollout_not_found"},
		{"unknown model info", "GET", srv.URL + "/rollout/r1/v1/models/gpt-9", "", 404, "invalid_request_error", "model", "model_not_found"},
		// Accepted: unknown fields, ignored sampling settings, an alias.
		{"unknown fields", "POST", chatURL, `{"model": "alias", "frobnicate": {"x": [1]}, "temperature": 0.2, "top_p": 0.5, "seed": 3, "logprobs": true, "parallel_tool_calls": false, "messages": [{"role": "developer", "content": [{"type": "text", "text": "be brief"}]}, {"role": "user", "content": "hi", "extra": 1}]}`, 200, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, tt.method, tt.url, tt.body)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("content type %q", ct)
			}
			if tt.status == 200 {
				return
			}
			typ, param, code, _ := openaiErr(t, r.body)
			if typ != tt.typ || param != tt.param || code != tt.code {
				t.Errorf("error type %q param %q code %q, want %q %q %q: %s", typ, param, code, tt.typ, tt.param, tt.code, r.body)
			}
		})
	}
}

func TestEngineErrors(t *testing.T) {
	tok := testTokenizer(t)
	hello := tok.EncodeSpecial("hello<|im_end|>")
	good := func(emit func(infer.Token)) infer.Generation {
		g := infer.Generation{Finish: infer.FinishStop}
		for _, id := range hello {
			emit(infer.Token{ID: id, Logprob: -1, Version: 1})
			g.Tokens, g.Logprobs, g.Versions = append(g.Tokens, id), append(g.Logprobs, -1), append(g.Versions, 1)
		}
		return g
	}
	tests := []struct {
		name     string
		gen      genFunc
		status   int
		typ      string
		code     string
		overlong bool
		bad      bool
		panics   int
	}{
		{"overlong prompt", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			return infer.Generation{}, fmt.Errorf("%w: prompt of %d tokens", infer.ErrOverlong, len(req.Prompt))
		}, 400, "invalid_request_error", "context_length_exceeded", true, false, 0},
		{"context filled while generating", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			g := good(emit)
			g.Finish = infer.FinishContext
			return g, nil
		}, 200, "", "", true, false, 0},
		{"engine failure", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			return infer.Generation{}, errors.New("CUDA error: an illegal memory access")
		}, 500, "server_error", "", false, false, 0},
		{"engine closed", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			return infer.Generation{}, infer.ErrClosed
		}, 503, "server_error", "", false, false, 0},
		{"engine reports bad output", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			return infer.Generation{}, fmt.Errorf("%w: NaN logits", infer.ErrBadOutput)
		}, 500, "server_error", "", false, true, 0},
		{"NaN logprob", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			g := good(emit)
			g.Logprobs[1] = float32(math.NaN())
			return g, nil
		}, 500, "server_error", "", false, true, 0},
		{"infinite logprob", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			g := good(emit)
			g.Logprobs[0] = float32(math.Inf(-1))
			return g, nil
		}, 500, "server_error", "", false, true, 0},
		{"id outside the vocabulary", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			g := good(emit)
			g.Tokens[0] = 1 << 20
			return g, nil
		}, 500, "server_error", "", false, true, 0},
		{"streamed id outside the vocabulary", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			emit(infer.Token{ID: -3, Logprob: -1})
			if ctx.Err() == nil {
				return infer.Generation{}, errors.New("generation not canceled")
			}
			return infer.Generation{}, ctx.Err()
		}, 500, "server_error", "", false, true, 0},
		{"ragged generation", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			g := good(emit)
			g.Logprobs = g.Logprobs[:1]
			return g, nil
		}, 500, "server_error", "", false, true, 0},
		{"panic", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			var m map[string]int
			m["boom"]++
			return infer.Generation{}, nil
		}, 500, "server_error", "", false, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := testProxy(t, tt.gen)
			r := do(t, "POST", srv.URL+"/rollout/r1/v1/chat/completions", okBody)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status != 200 {
				typ, _, code, _ := openaiErr(t, r.body)
				if typ != tt.typ || code != tt.code {
					t.Errorf("type %q code %q, want %q %q", typ, code, tt.typ, tt.code)
				}
			}
			// The proxy still serves: another rollout on the same
			// server answers.
			if err := p.Open("r2", RolloutOptions{RunID: "run"}); err != nil {
				t.Fatal(err)
			}
			if r := do(t, "GET", srv.URL+"/rollout/r2/v1/models", ""); r.status != 200 {
				t.Errorf("after the failure: status %d", r.status)
			}
			rec := finish(t, p, "r1")
			m := rec.Metrics
			if m.Overlong != tt.overlong || m.BadOutput != tt.bad || (m.BadOutputs > 0) != tt.bad || m.Panics != tt.panics {
				t.Errorf("metrics overlong %v bad %v/%d panics %d, want %v %v %d", m.Overlong, m.BadOutput, m.BadOutputs, m.Panics, tt.overlong, tt.bad, tt.panics)
			}
			if failed := tt.status != 200; (m.Failed == 1) != failed && tt.panics == 0 {
				t.Errorf("metrics failed %d", m.Failed)
			}
			if tt.status != 200 && len(rec.Segments) != 0 {
				t.Errorf("a failed call was recorded: %d segments", len(rec.Segments))
			}
		})
	}
}

// TestStreamErrors: an error before the first token is a plain HTTP error;
// after it, an error event that ends the SDK's stream with an error.
func TestStreamErrors(t *testing.T) {
	tok := testTokenizer(t)
	tests := []struct {
		name       string
		gen        genFunc
		wantStatus int // 0: the stream began
	}{
		{"before the first token", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			return infer.Generation{}, infer.ErrOverlong
		}, 400},
		{"after some tokens", func(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
			for _, id := range tok.Encode("partial answer") {
				emit(infer.Token{ID: id, Logprob: -1})
			}
			return infer.Generation{}, errors.New("device lost")
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := testProxy(t, tt.gen)
			client := openaiClient(srv.URL, "r1")
			s := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			var content string
			for s.Next() {
				if c := s.Current(); len(c.Choices) > 0 {
					content += c.Choices[0].Delta.Content
				}
			}
			err := s.Err()
			if err == nil {
				t.Fatal("the stream ended without an error")
			}
			var apiErr *openai.Error
			switch {
			case tt.wantStatus != 0:
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.wantStatus {
					t.Errorf("error %v, want an API error with status %d", err, tt.wantStatus)
				}
			default:
				if content != "partial answer" || !strings.Contains(err.Error(), "device lost") {
					t.Errorf("content %q error %v", content, err)
				}
			}
			if rec := finish(t, p, "r1"); rec.Metrics.Failed != 1 || len(rec.Segments) != 0 {
				t.Errorf("metrics %+v, %d segments", rec.Metrics, len(rec.Segments))
			}
		})
	}
}
