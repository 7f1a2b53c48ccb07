// Package remotetest holds fake vLLM and SGLang servers for testing code that
// talks to them (package remote, and the proxy above it) on machines without
// a GPU. No real vLLM or SGLang ran to make them: each fake reproduces the
// request and response shapes its server documents, and checks every
// request it receives field by field.
//
// The fake vLLM serves POST /v1/completions: the request fields of vLLM's
// CompletionRequest (vllm/entrypoints/openai/completion/protocol.py), the
// response of CompletionResponse (choices[].logprobs.{tokens,
// token_logprobs, top_logprobs, text_offset}, token_ids, prompt_token_ids,
// routed_experts as base64 of an .npy file, usage with
// prompt_tokens_details.cached_tokens) and, streaming, CompletionStreamResponse
// chunks as "data: <json>" events, a usage chunk with no choices, and
// "data: [DONE]". Errors are {"error": {"message", "type", "param",
// "code"}}.
//
// The fake SGLang serves POST /generate: GenerateReqInput with input_ids
// and sampling_params (https://docs.sglang.ai/basic_usage/sampling_params.html),
// answering {"text", "output_ids", "meta_info": {"id", "finish_reason",
// "prompt_tokens", "weight_version", "completion_tokens", "cached_tokens",
// "output_token_logprobs": [[logprob, id, null], ...], "routed_experts":
// base64 int32}}; streaming chunks are cumulative unless
// Reply.Incremental (--incremental-streaming-output). Errors are
// {"error": {"message"}}.
//
// Both write a NaN or infinite logprob as null, as pydantic and orjson do.
package remotetest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reply is what a fake answers to one request.
type Reply struct {
	// Tokens are the sampled ids and Logprobs their logprobs, one each. A
	// NaN or infinite logprob is written as null.
	Tokens   []int32
	Logprobs []float64
	// Finish is the finish reason: "stop" or "length" (the default), or
	// anything else to test unknown reasons; "abort" makes SGLang's
	// finish_reason an abort with Message.
	Finish string
	// Routes are the routed experts, [prompt+completion-1][layers][k];
	// nil sends none. Only non-streaming vLLM responses carry them.
	Routes [][][]int32
	// SplitRoutes (vLLM) sends the first PromptRows rows apart in the
	// top-level prompt_routed_experts, as some 0.21 releases do.
	SplitRoutes bool
	PromptRows  int
	// RouteDType is the .npy dtype of vLLM's routes: "<i4" (default),
	// "<u2", "|u1", ...
	RouteDType string
	// CachedTokens is the reported prefix-cache hit.
	CachedTokens int
	// WeightVersion is SGLang's meta_info.weight_version. Defaults to
	// "default", SGLang's own default.
	WeightVersion string
	// IDs, when not nil, are sent as token_ids (vLLM) or output_ids
	// (SGLang) instead of Tokens, to test disagreement.
	IDs []int32
	// PromptEcho, when not nil, is sent as vLLM's prompt_token_ids instead
	// of the request's prompt.
	PromptEcho []int32
	// Usage, when not nil, overrides the reported [prompt, completion]
	// token counts.
	Usage *[2]int
	// Chunk is the number of tokens per streamed chunk. Defaults to 1.
	Chunk int
	// Incremental (SGLang) streams deltas instead of cumulative chunks.
	Incremental bool
	// Status, when not 0, is the HTTP status of an error answer carrying
	// Message.
	Status  int
	Message string
	// StreamError, when not empty, is sent as an error event after the
	// first chunk of a stream.
	StreamError string
	// Malformed answers 200 with a body that is not JSON (in a stream: an
	// event that is not).
	Malformed bool
	// Truncate ends a stream halfway, in the middle of a line, without
	// "data: [DONE]".
	Truncate bool
	// Delay is waited before answering and between streamed chunks.
	Delay time.Duration
	// Raw, when not empty, is sent verbatim as the 200 body.
	Raw string
}

// Request is a request a fake received, decoded.
type Request struct {
	Path        string
	Prompt      []int32
	MaxTokens   int
	Temperature float64
	TopP        float64
	TopK        int
	Seed        int64
	StopTokens  []int32
	IgnoreEOS   bool
	Stream      bool
	Routes      bool // SGLang return_routed_experts
	Model       string
	// Body is the whole request document.
	Body map[string]any
}

// Server is a fake engine server.
type Server struct {
	*httptest.Server
	tb    testing.TB
	reply func(Request) Reply
	vllm  bool

	mu   sync.Mutex
	reqs []Request
}

// Fixed answers every request with r.
func Fixed(r Reply) func(Request) Reply { return func(Request) Reply { return r } }

// NewVLLM starts a fake vLLM; tb, when not nil, gets an error for every
// request that breaks vLLM's documented shape or the flags an RL rollout
// needs, and closes the server at cleanup (with a nil tb, Close it).
func NewVLLM(tb testing.TB, reply func(Request) Reply) *Server {
	return start(tb, reply, true)
}

// NewSGLang starts a fake SGLang; tb as for NewVLLM.
func NewSGLang(tb testing.TB, reply func(Request) Reply) *Server {
	return start(tb, reply, false)
}

func start(tb testing.TB, reply func(Request) Reply, vllm bool) *Server {
	s := &Server{tb: tb, reply: reply, vllm: vllm}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// Requests are the well-formed requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	name, path := "SGLang", "/generate"
	if s.vllm {
		name, path = "vLLM", "/v1/completions"
	}
	if r.Method != http.MethodPost || r.URL.Path != path {
		s.fail(w, http.StatusNotFound, "%s: no route %s %s", name, r.Method, r.URL.Path)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.fail(w, http.StatusBadRequest, "%s: Content-Type %q, want application/json", name, ct)
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		s.fail(w, http.StatusBadRequest, "%s: reading the body: %v", name, err)
		return
	}
	var req Request
	var err error
	if s.vllm {
		req, err = checkVLLM(body.Bytes())
	} else {
		req, err = checkSGLang(body.Bytes())
	}
	if err != nil {
		s.fail(w, http.StatusBadRequest, "%s request: %v", name, err)
		return
	}
	req.Path = r.URL.Path
	_ = json.Unmarshal(body.Bytes(), &req.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()

	rep := s.reply(req)
	if !wait(r, rep.Delay) {
		return
	}
	switch {
	case rep.Status != 0:
		writeJSON(w, rep.Status, s.errorBody(rep.Message, rep.Status))
	case rep.Malformed && !req.Stream:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"choices": [{"index": 0, "text": "`)
	case rep.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, rep.Raw)
	case req.Stream:
		s.stream(w, r, req, rep)
	case s.vllm:
		writeJSON(w, http.StatusOK, vllmResponse(req, rep))
	default:
		writeJSON(w, http.StatusOK, sglangResponse(req, rep, 0, len(rep.Tokens), true))
	}
}

// fail answers a request the fake cannot serve, and fails the test.
func (s *Server) fail(w http.ResponseWriter, status int, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if s.tb != nil {
		s.tb.Errorf("remotetest: %s", msg)
	}
	writeJSON(w, status, s.errorBody(msg, status))
}

func (s *Server) errorBody(msg string, status int) any {
	if s.vllm {
		return map[string]any{"error": map[string]any{"message": msg, "type": "BadRequestError", "param": nil, "code": status}}
	}
	return map[string]any{"error": map[string]any{"message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// wait sleeps d unless the client goes away first.
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// stream writes rep as server-sent events.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, rep Reply) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	step := max(rep.Chunk, 1)
	n := len(rep.Tokens)
	var bounds [][2]int
	for lo := 0; lo < n; lo += step {
		bounds = append(bounds, [2]int{lo, min(lo+step, n)})
	}
	if len(bounds) == 0 {
		bounds = append(bounds, [2]int{0, 0})
	}
	for i, b := range bounds {
		if i > 0 && !wait(r, rep.Delay) {
			return
		}
		if rep.Truncate && i == len(bounds)/2 {
			fmt.Fprint(w, `data: {"choi`)
			return
		}
		if rep.Malformed && i == len(bounds)/2 {
			fmt.Fprint(w, "data: {not json}\n\n")
			continue
		}
		last := i == len(bounds)-1
		if s.vllm {
			send(vllmChunk(req, rep, b[0], b[1], i == 0, last))
		} else {
			lo := b[0]
			if !rep.Incremental {
				lo = 0
			}
			send(sglangResponse(req, rep, lo, b[1], last))
		}
		if i == 0 && rep.StreamError != "" {
			send(s.errorBody(rep.StreamError, http.StatusBadRequest))
			return
		}
	}
	if s.vllm {
		send(map[string]any{"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": model(req), "choices": []any{}, "usage": vllmUsage(req, rep)})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// lp is a logprob as pydantic and orjson write it: NaN and ±Inf become null.
type lp float64

func (v lp) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return []byte(strconv.FormatFloat(f, 'g', -1, 64)), nil
}

func logprobAt(rep Reply, i int) lp {
	if i < len(rep.Logprobs) {
		return lp(rep.Logprobs[i])
	}
	return lp(-0.5)
}

func idsOf(rep Reply) []int32 {
	if rep.IDs != nil {
		return rep.IDs
	}
	return rep.Tokens
}

func finishOf(rep Reply) string {
	if rep.Finish == "" {
		return "length"
	}
	return rep.Finish
}

func model(req Request) string {
	if req.Model == "" {
		return "fake-model"
	}
	return req.Model
}

func window(ids []int32, lo, hi int) []int32 {
	lo, hi = min(lo, len(ids)), min(hi, len(ids))
	return append([]int32{}, ids[lo:hi]...)
}

// --- vLLM ---

func vllmLogprobs(rep Reply, lo, hi int) map[string]any {
	tokens, lps, offsets, top := []string{}, []lp{}, []int{}, []map[string]lp{}
	off := 0
	for i := lo; i < hi; i++ {
		t := "token_id:" + strconv.Itoa(int(rep.Tokens[i]))
		tokens = append(tokens, t)
		lps = append(lps, logprobAt(rep, i))
		offsets = append(offsets, off)
		off += len(t)
		top = append(top, map[string]lp{t: logprobAt(rep, i)})
	}
	return map[string]any{"text_offset": offsets, "token_logprobs": lps, "tokens": tokens, "top_logprobs": top}
}

func vllmText(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "<%d>", id)
	}
	return b.String()
}

func vllmUsage(req Request, rep Reply) map[string]any {
	p, c := len(req.Prompt), len(rep.Tokens)
	if rep.Usage != nil {
		p, c = rep.Usage[0], rep.Usage[1]
	}
	u := map[string]any{"prompt_tokens": p, "total_tokens": p + c, "completion_tokens": c, "prompt_tokens_details": nil}
	if rep.CachedTokens > 0 {
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": rep.CachedTokens}
	}
	return u
}

func stopReason(rep Reply) any {
	if finishOf(rep) == "stop" && len(rep.Tokens) > 0 {
		return rep.Tokens[len(rep.Tokens)-1]
	}
	return nil
}

func vllmResponse(req Request, rep Reply) map[string]any {
	echo := req.Prompt
	if rep.PromptEcho != nil {
		echo = rep.PromptEcho
	}
	choice := map[string]any{
		"index":            0,
		"text":             vllmText(rep.Tokens),
		"logprobs":         vllmLogprobs(rep, 0, len(rep.Tokens)),
		"finish_reason":    finishOf(rep),
		"stop_reason":      stopReason(rep),
		"token_ids":        window(idsOf(rep), 0, len(idsOf(rep))),
		"prompt_logprobs":  nil,
		"prompt_token_ids": echo,
		"routed_experts":   nil,
	}
	resp := map[string]any{
		"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": model(req),
		"choices": []any{choice}, "service_tier": nil, "system_fingerprint": nil,
		"usage": vllmUsage(req, rep), "kv_transfer_params": nil,
	}
	if rep.Routes != nil {
		dtype := rep.RouteDType
		if dtype == "" {
			dtype = "<i4"
		}
		if rep.SplitRoutes {
			k := min(rep.PromptRows, len(rep.Routes))
			resp["prompt_routed_experts"] = base64.StdEncoding.EncodeToString(NPY(rep.Routes[:k], dtype))
			choice["routed_experts"] = base64.StdEncoding.EncodeToString(NPY(rep.Routes[k:], dtype))
		} else {
			choice["routed_experts"] = base64.StdEncoding.EncodeToString(NPY(rep.Routes, dtype))
		}
	}
	return resp
}

func vllmChunk(req Request, rep Reply, lo, hi int, first, last bool) map[string]any {
	choice := map[string]any{
		"index":         0,
		"text":          vllmText(window(rep.Tokens, lo, hi)),
		"logprobs":      vllmLogprobs(rep, lo, hi),
		"finish_reason": nil,
		"stop_reason":   nil,
		"token_ids":     window(idsOf(rep), lo, hi),
	}
	if first {
		echo := req.Prompt
		if rep.PromptEcho != nil {
			echo = rep.PromptEcho
		}
		choice["prompt_token_ids"] = echo
	}
	if last {
		choice["finish_reason"] = finishOf(rep)
		choice["stop_reason"] = stopReason(rep)
	}
	return map[string]any{"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": model(req), "choices": []any{choice}, "usage": nil}
}

// vllmWire is every CompletionRequest field a rollout client may send;
// anything else is refused.
type vllmWire struct {
	Model                  *string          `json:"model"`
	Prompt                 *json.RawMessage `json:"prompt"`
	MaxTokens              *int             `json:"max_tokens"`
	Temperature            *float64         `json:"temperature"`
	TopP                   *float64         `json:"top_p"`
	TopK                   *int             `json:"top_k"`
	MinP                   *float64         `json:"min_p"`
	RepetitionPenalty      *float64         `json:"repetition_penalty"`
	PresencePenalty        *float64         `json:"presence_penalty"`
	FrequencyPenalty       *float64         `json:"frequency_penalty"`
	Seed                   *int64           `json:"seed"`
	N                      *int             `json:"n"`
	Logprobs               *int             `json:"logprobs"`
	Echo                   *bool            `json:"echo"`
	StopTokenIDs           []int64          `json:"stop_token_ids"`
	IgnoreEOS              *bool            `json:"ignore_eos"`
	SkipSpecialTokens      *bool            `json:"skip_special_tokens"`
	IncludeStopStrInOutput *bool            `json:"include_stop_str_in_output"`
	ReturnTokensAsTokenIDs *bool            `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs         *bool            `json:"return_token_ids"`
	Stream                 *bool            `json:"stream"`
	StreamOptions          *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
}

func checkVLLM(body []byte) (Request, error) {
	var v vllmWire
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		return Request{}, err
	}
	var req Request
	if v.Prompt == nil {
		return req, fmt.Errorf("no prompt")
	}
	prompt, err := tokenIDs(*v.Prompt)
	if err != nil {
		return req, fmt.Errorf("prompt: %v (want a list of token ids)", err)
	}
	req.Prompt = prompt
	switch {
	case v.MaxTokens == nil || *v.MaxTokens < 1:
		return req, fmt.Errorf("max_tokens must be set and >= 1")
	case v.Temperature == nil || v.TopP == nil || v.TopK == nil || v.MinP == nil:
		return req, fmt.Errorf("temperature, top_p, top_k and min_p must be set (else vLLM takes generation_config.json's)")
	case v.RepetitionPenalty == nil || v.PresencePenalty == nil || v.FrequencyPenalty == nil:
		return req, fmt.Errorf("repetition, presence and frequency penalties must be set (else vLLM takes generation_config.json's)")
	case *v.TopK < -1:
		return req, fmt.Errorf("top_k %d: -1 or 0 for all tokens, else >= 1", *v.TopK)
	case v.Seed == nil:
		return req, fmt.Errorf("seed must be set")
	case v.Logprobs == nil || *v.Logprobs < 0:
		return req, fmt.Errorf("logprobs must be set (>= 0)")
	case v.ReturnTokensAsTokenIDs == nil || !*v.ReturnTokensAsTokenIDs:
		return req, fmt.Errorf("return_tokens_as_token_ids must be true")
	case v.ReturnTokenIDs == nil || !*v.ReturnTokenIDs:
		return req, fmt.Errorf("return_token_ids must be true")
	case v.N != nil && *v.N != 1:
		return req, fmt.Errorf("n %d, want 1", *v.N)
	case v.Echo != nil && *v.Echo:
		return req, fmt.Errorf("echo must be false")
	case v.StreamOptions != nil && (v.Stream == nil || !*v.Stream):
		return req, fmt.Errorf("Stream options can only be defined when `stream=True`.")
	}
	req.Stream = v.Stream != nil && *v.Stream
	if req.Stream && (v.StreamOptions == nil || v.StreamOptions.IncludeUsage == nil || !*v.StreamOptions.IncludeUsage) {
		return req, fmt.Errorf("stream_options.include_usage must be true (the usage chunk carries the token counts)")
	}
	for _, id := range v.StopTokenIDs {
		if id < 0 || id > math.MaxInt32 {
			return req, fmt.Errorf("stop_token_ids: bad id %d", id)
		}
		req.StopTokens = append(req.StopTokens, int32(id))
	}
	req.MaxTokens, req.Temperature, req.TopP, req.TopK, req.Seed = *v.MaxTokens, *v.Temperature, *v.TopP, *v.TopK, *v.Seed
	req.IgnoreEOS = v.IgnoreEOS != nil && *v.IgnoreEOS
	if v.Model != nil {
		req.Model = *v.Model
	}
	return req, nil
}

// tokenIDs reads a JSON list of non-negative integers.
func tokenIDs(raw json.RawMessage) ([]int32, error) {
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("empty")
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxInt32 {
			return nil, fmt.Errorf("id %d", id)
		}
		out[i] = int32(id)
	}
	return out, nil
}

// --- SGLang ---

func sglangResponse(req Request, rep Reply, lo, hi int, last bool) map[string]any {
	entries := []any{}
	for i := lo; i < hi; i++ {
		entries = append(entries, []any{logprobAt(rep, i), rep.Tokens[i], nil})
	}
	version := rep.WeightVersion
	if version == "" {
		version = "default"
	}
	p, c := len(req.Prompt), hi
	if rep.Usage != nil {
		p, c = rep.Usage[0], rep.Usage[1]
	}
	meta := map[string]any{
		"id":                    "fake-rid",
		"finish_reason":         nil,
		"prompt_tokens":         p,
		"weight_version":        version,
		"total_retractions":     0,
		"completion_tokens":     c,
		"cached_tokens":         rep.CachedTokens,
		"input_token_logprobs":  []any{},
		"output_token_logprobs": entries,
	}
	if last {
		switch f := finishOf(rep); f {
		case "stop":
			meta["finish_reason"] = map[string]any{"type": "stop", "matched": rep.Tokens[len(rep.Tokens)-1]}
		case "length":
			meta["finish_reason"] = map[string]any{"type": "length", "length": len(rep.Tokens)}
		case "abort":
			meta["finish_reason"] = map[string]any{"type": "abort", "message": rep.Message, "status_code": 400}
		default:
			meta["finish_reason"] = map[string]any{"type": f}
		}
		meta["e2e_latency"] = 0.01
		if rep.Routes != nil && req.Routes {
			meta["routed_experts"] = base64.StdEncoding.EncodeToString(Int32s(rep.Routes))
		}
	}
	return map[string]any{"text": vllmText(window(rep.Tokens, lo, hi)), "output_ids": window(idsOf(rep), lo, hi), "meta_info": meta}
}

// sglangWire is GenerateReqInput, with the fields a rollout client may send.
type sglangWire struct {
	Text                *json.RawMessage `json:"text"`
	InputIDs            *json.RawMessage `json:"input_ids"`
	SamplingParams      *sglangSampling  `json:"sampling_params"`
	Rid                 *string          `json:"rid"`
	ReturnLogprob       *bool            `json:"return_logprob"`
	LogprobStartLen     *int             `json:"logprob_start_len"`
	TopLogprobsNum      *int             `json:"top_logprobs_num"`
	ReturnTextInLogprob *bool            `json:"return_text_in_logprobs"`
	Stream              *bool            `json:"stream"`
	ReturnRoutedExperts *bool            `json:"return_routed_experts"`
}

// sglangSampling is SamplingParams' fields; SGLang refuses unknown ones.
type sglangSampling struct {
	MaxNewTokens      *int     `json:"max_new_tokens"`
	Stop              any      `json:"stop"`
	StopTokenIDs      []int64  `json:"stop_token_ids"`
	Temperature       *float64 `json:"temperature"`
	TopP              *float64 `json:"top_p"`
	TopK              *int     `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	FrequencyPenalty  *float64 `json:"frequency_penalty"`
	PresencePenalty   *float64 `json:"presence_penalty"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	MinNewTokens      *int     `json:"min_new_tokens"`
	N                 *int     `json:"n"`
	IgnoreEOS         *bool    `json:"ignore_eos"`
	SkipSpecialTokens *bool    `json:"skip_special_tokens"`
	NoStopTrim        *bool    `json:"no_stop_trim"`
	SamplingSeed      *int64   `json:"sampling_seed"`
}

func checkSGLang(body []byte) (Request, error) {
	var v sglangWire
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		return Request{}, err
	}
	var req Request
	if v.Text != nil {
		return req, fmt.Errorf("text sent: the prompt must go as input_ids")
	}
	if v.InputIDs == nil {
		return req, fmt.Errorf("no input_ids")
	}
	prompt, err := tokenIDs(*v.InputIDs)
	if err != nil {
		return req, fmt.Errorf("input_ids: %v", err)
	}
	req.Prompt = prompt
	sp := v.SamplingParams
	switch {
	case v.ReturnLogprob == nil || !*v.ReturnLogprob:
		return req, fmt.Errorf("return_logprob must be true")
	case v.LogprobStartLen == nil || *v.LogprobStartLen != -1:
		return req, fmt.Errorf("logprob_start_len must be -1 (output tokens only)")
	case sp == nil:
		return req, fmt.Errorf("no sampling_params")
	case sp.MaxNewTokens == nil || *sp.MaxNewTokens < 1:
		return req, fmt.Errorf("sampling_params.max_new_tokens must be set and >= 1 (else 128)")
	case sp.Temperature == nil || sp.TopP == nil || sp.TopK == nil || sp.MinP == nil:
		return req, fmt.Errorf("temperature, top_p, top_k and min_p must be set (else SGLang takes generation_config.json's)")
	case sp.RepetitionPenalty == nil || sp.PresencePenalty == nil || sp.FrequencyPenalty == nil:
		return req, fmt.Errorf("repetition, presence and frequency penalties must be set")
	case *sp.TopK < 1 && *sp.TopK != -1:
		return req, fmt.Errorf("top_k must be -1 (disable), or at least 1, got %d", *sp.TopK)
	case sp.SamplingSeed == nil:
		return req, fmt.Errorf("sampling_params.sampling_seed must be set")
	case sp.NoStopTrim == nil || !*sp.NoStopTrim:
		return req, fmt.Errorf("sampling_params.no_stop_trim must be true (keeps the stop token in output_ids)")
	case sp.N != nil && *sp.N != 1:
		return req, fmt.Errorf("n %d, want 1", *sp.N)
	}
	for _, id := range sp.StopTokenIDs {
		if id < 0 || id > math.MaxInt32 {
			return req, fmt.Errorf("stop_token_ids: bad id %d", id)
		}
		req.StopTokens = append(req.StopTokens, int32(id))
	}
	req.MaxTokens, req.Temperature, req.TopP, req.TopK, req.Seed = *sp.MaxNewTokens, *sp.Temperature, *sp.TopP, *sp.TopK, *sp.SamplingSeed
	req.IgnoreEOS = sp.IgnoreEOS != nil && *sp.IgnoreEOS
	req.Stream = v.Stream != nil && *v.Stream
	req.Routes = v.ReturnRoutedExperts != nil && *v.ReturnRoutedExperts
	return req, nil
}

// --- routes ---

// Routes builds a [rows][layers][k] table from f.
func Routes(rows, layers, k int, f func(row, layer, slot int) int32) [][][]int32 {
	t := make([][][]int32, rows)
	for r := range t {
		t[r] = make([][]int32, layers)
		for l := range t[r] {
			t[r][l] = make([]int32, k)
			for j := range t[r][l] {
				t[r][l][j] = f(r, l, j)
			}
		}
	}
	return t
}

// Int32s is SGLang's routes encoding before base64: the table flattened to
// little-endian int32.
func Int32s(t [][][]int32) []byte {
	var b []byte
	for _, row := range t {
		for _, layer := range row {
			for _, v := range layer {
				b = binary.LittleEndian.AppendUint32(b, uint32(v))
			}
		}
	}
	return b
}

// NPY is np.save of the table as a C-order array of dtype ("<i4", "<i2",
// "<u2", "|u1", "|i1", "<i8"), vLLM's routes encoding before base64. A
// ragged table is written with the shape of its first row.
func NPY(t [][][]int32, dtype string) []byte {
	rows, layers, k := len(t), 0, 0
	if rows > 0 {
		layers = len(t[0])
		if layers > 0 {
			k = len(t[0][0])
		}
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d, %d), }", dtype, rows, layers, k)
	// magic(6) + version(2) + length(2) + header + '\n', padded to 64.
	pad := 64 - (10+len(header)+1)%64
	if pad == 64 {
		pad = 0
	}
	header += strings.Repeat(" ", pad) + "\n"
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	b = append(b, header...)
	for _, row := range t {
		for _, layer := range row {
			for _, v := range layer {
				switch dtype[1:] {
				case "u1", "i1":
					b = append(b, byte(v))
				case "u2", "i2":
					b = binary.LittleEndian.AppendUint16(b, uint16(v))
				case "u4", "i4":
					b = binary.LittleEndian.AppendUint32(b, uint32(v))
				default:
					b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
				}
			}
		}
	}
	return b
}
