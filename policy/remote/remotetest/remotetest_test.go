package remotetest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Errorf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, a...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.msgs
	r.msgs = nil
	return m
}

const (
	goodVLLM   = `{"prompt":[1,2],"max_tokens":2,"temperature":1,"top_p":1,"top_k":-1,"min_p":0,"repetition_penalty":1,"presence_penalty":0,"frequency_penalty":0,"seed":3,"n":1,"logprobs":1,"stop_token_ids":[9],"ignore_eos":true,"return_tokens_as_token_ids":true,"return_token_ids":true,"stream":false}`
	goodSGLang = `{"input_ids":[1,2],"sampling_params":{"max_new_tokens":2,"temperature":1,"top_p":1,"top_k":-1,"min_p":0,"repetition_penalty":1,"presence_penalty":0,"frequency_penalty":0,"stop_token_ids":[9],"ignore_eos":true,"no_stop_trim":true,"sampling_seed":3},"return_logprob":true,"logprob_start_len":-1,"stream":false}`
)

// TestChecks sends the fakes requests that break the documented shapes or
// the flags a rollout needs; each must be refused with 400 and reported.
func TestChecks(t *testing.T) {
	for _, c := range []struct {
		vllm       bool
		body, want string
	}{
		{true, goodVLLM, ""},
		{true, strings.Replace(goodVLLM, `"prompt":[1,2]`, `"prompt":"hello"`, 1), "list of token ids"},
		{true, strings.Replace(goodVLLM, `"prompt":[1,2]`, `"prompt":[]`, 1), "empty"},
		{true, strings.Replace(goodVLLM, `"logprobs":1,`, ``, 1), "logprobs must be set"},
		{true, strings.Replace(goodVLLM, `"return_tokens_as_token_ids":true`, `"return_tokens_as_token_ids":false`, 1), "return_tokens_as_token_ids"},
		{true, strings.Replace(goodVLLM, `"return_token_ids":true,`, ``, 1), "return_token_ids"},
		{true, strings.Replace(goodVLLM, `"top_k":-1,`, ``, 1), "generation_config"},
		{true, strings.Replace(goodVLLM, `"top_k":-1`, `"top_k":-2`, 1), "top_k -2"},
		{true, strings.Replace(goodVLLM, `"seed":3,`, ``, 1), "seed"},
		{true, strings.Replace(goodVLLM, `"n":1`, `"n":2`, 1), "n 2"},
		{true, strings.Replace(goodVLLM, `"stream":false`, `"stream":true`, 1), "include_usage"},
		{true, strings.Replace(goodVLLM, `"stream":false`, `"stream":false,"stream_options":{"include_usage":true}`, 1), "stream=True"},
		{true, strings.Replace(goodVLLM, `"n":1`, `"nn":1`, 1), "unknown field"},
		{true, strings.Replace(goodVLLM, `"max_tokens":2`, `"max_tokens":0`, 1), "max_tokens"},
		{false, goodSGLang, ""},
		{false, strings.Replace(goodSGLang, `"input_ids":[1,2]`, `"text":"hi"`, 1), "input_ids"},
		{false, strings.Replace(goodSGLang, `"return_logprob":true`, `"return_logprob":false`, 1), "return_logprob"},
		{false, strings.Replace(goodSGLang, `"logprob_start_len":-1`, `"logprob_start_len":0`, 1), "logprob_start_len"},
		{false, strings.Replace(goodSGLang, `"top_k":-1`, `"top_k":0`, 1), "top_k must be -1"},
		{false, strings.Replace(goodSGLang, `"max_new_tokens":2,`, ``, 1), "max_new_tokens"},
		{false, strings.Replace(goodSGLang, `"no_stop_trim":true,`, ``, 1), "no_stop_trim"},
		{false, strings.Replace(goodSGLang, `"sampling_seed":3`, `"seed":3`, 1), "unknown field"},
		{false, strings.Replace(goodSGLang, `"min_p":0,`, ``, 1), "generation_config"},
	} {
		rec := &recorder{TB: t}
		var s *Server
		if c.vllm {
			s = NewVLLM(rec, Fixed(Reply{Tokens: []int32{5}}))
		} else {
			s = NewSGLang(rec, Fixed(Reply{Tokens: []int32{5}}))
		}
		path := "/generate"
		if c.vllm {
			path = "/v1/completions"
		}
		resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		msgs := rec.take()
		switch {
		case c.want == "" && (resp.StatusCode != 200 || len(msgs) != 0 || len(s.Requests()) != 1):
			t.Errorf("good request: %d %s %v", resp.StatusCode, body, msgs)
		case c.want != "" && (resp.StatusCode != 400 || len(msgs) != 1 || !strings.Contains(msgs[0], c.want) || len(s.Requests()) != 0):
			t.Errorf("%s: %d %s %v, want 400 saying %q", c.body, resp.StatusCode, body, msgs, c.want)
		}
	}
	rec := &recorder{TB: t}
	s := NewVLLM(rec, Fixed(Reply{}))
	if resp, err := http.Get(s.URL + "/v1/models"); err != nil || resp.StatusCode != 404 || len(rec.take()) != 1 {
		t.Errorf("GET /v1/models: %v %v", resp, err)
	}
	if resp, err := http.Post(s.URL+"/v1/completions", "text/plain", strings.NewReader(goodVLLM)); err != nil || resp.StatusCode != 400 || len(rec.take()) != 1 {
		t.Errorf("text/plain: %v %v", resp, err)
	}
}

func TestNPYHeader(t *testing.T) {
	for rows := range 5 {
		b := NPY(Routes(rows, 2, 3, func(int, int, int) int32 { return 1 }), "<i4")
		hlen := int(b[8]) | int(b[9])<<8
		if (10+hlen)%64 != 0 || b[10+hlen-1] != '\n' || len(b) != 10+hlen+rows*2*3*4 {
			t.Errorf("rows %d: header length %d, file %d bytes", rows, hlen, len(b))
		}
	}
}
