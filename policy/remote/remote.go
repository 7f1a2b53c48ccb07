package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/text"
)

// ErrUnavailable: the server could not be reached or did not finish the
// request (connection refused or reset, timeout, cancelled context, HTTP
// 5xx, 408 or 429, a stream cut short, a request the server aborted). A
// retry may succeed; the generation's tokens must not be used.
var ErrUnavailable = errors.New("remote: engine unavailable")

// LogprobsMode says which distribution the logprobs a server reports come
// from. The engine contract (infer.Token.Logprob) is the distribution the
// token was drawn from, after temperature, top-k and top-p; a mode that
// reports something else is only accepted for sampling settings under which
// the two coincide, and Generate rejects other settings with infer.ErrInput.
type LogprobsMode string

const (
	// LogprobsProcessed: after temperature, top-k and top-p, exactly the
	// contract. vLLM with --logprobs-mode processed_logprobs.
	LogprobsProcessed LogprobsMode = "processed"
	// LogprobsTemperature: after temperature, before top-k/top-p
	// truncation. SGLang's default (SGLANG_RETURN_ORIGINAL_LOGPROB unset):
	// valid when top-p is 1 and there is no top-k.
	LogprobsTemperature LogprobsMode = "temperature"
	// LogprobsRaw: the model's unmodified distribution. vLLM's default
	// (--logprobs-mode raw_logprobs) and SGLang with
	// SGLANG_RETURN_ORIGINAL_LOGPROB=1: valid only at temperature 1, top-p
	// 1, no top-k (the training default, infer.DefaultSampling).
	LogprobsRaw LogprobsMode = "raw"
)

// accepts reports whether logprobs of mode m satisfy the contract for s.
func (m LogprobsMode) accepts(s infer.Sampling) error {
	truncated := s.TopK > 0 || (s.TopP != 0 && s.TopP != 1)
	switch m {
	case LogprobsProcessed:
		return nil
	case LogprobsTemperature:
		if truncated {
			return fmt.Errorf("the server reports logprobs before top-k/top-p truncation (%s), so top-p %g, top-k %d would record the wrong distribution; use top-p 1 and no top-k, or a server with processed logprobs", m, s.TopP, s.TopK)
		}
		return nil
	case LogprobsRaw:
		if truncated || s.Temperature != 1 {
			return fmt.Errorf("the server reports raw logprobs (%s), so temperature %g, top-p %g, top-k %d would record the wrong distribution; use infer.DefaultSampling, or start vLLM with --logprobs-mode processed_logprobs", m, s.Temperature, s.TopP, s.TopK)
		}
		return nil
	default:
		return fmt.Errorf("unknown logprobs mode %q", m)
	}
}

// Options configure an Engine. The zero value of each field is its default.
type Options struct {
	// Client sends the requests. Defaults to a client whose connections
	// time out after ConnectTimeout and which has no overall timeout:
	// generations run for minutes; bound them with ctx or RequestTimeout.
	Client *http.Client
	// Model is the served model name sent as "model" (vLLM's
	// --served-model-name). Defaults to none: the field is left out and
	// vLLM serves its only model. SGLang's /generate takes no model name.
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer <key>" (the
	// servers' --api-key). Defaults to none.
	APIKey string
	// VocabSize bounds every token id, sent and received: the tokenizer's
	// size, which a released checkpoint's vocab_size pads past (Qwen3:
	// 151936 for 151,669 ids). A sampled id at or past it is
	// engine.ErrBadOutput naming the id; the server must not sample the
	// padding (docs/USAGE.md, "Remote engines"). Required.
	VocabSize int
	// ContextLength is the server's context (vLLM --max-model-len, SGLang
	// --context-length). Generate uses it to fill MaxTokens 0, to clamp
	// MaxTokens to what fits, to refuse a prompt that leaves no room
	// (infer.ErrOverlong) and to tell FinishContext from FinishLength.
	// Defaults to 0, unknown: MaxTokens 0 is then refused.
	ContextLength int
	// Version is the policy version recorded on every token until
	// SetVersion changes it. Defaults to 0.
	Version int64
	// VersionFromServer (SGLang only) records, instead of Version, the
	// meta_info.weight_version the server reports with each chunk of
	// tokens (SGLang's --weight-version, updated by the weight_version of
	// its /update_weights_from_* calls); it must be an integer. Defaults
	// to false. vLLM reports no weight version.
	VersionFromServer bool
	// Stream asks for server-sent events so emit sees tokens as they are
	// produced. Defaults to false: one JSON response, emit is called for
	// every token once it arrives. vLLM with Routing never streams: its
	// routed experts come only in non-streaming responses.
	Stream bool
	// Logprobs is what the server's logprobs are (see LogprobsMode).
	// Defaults to LogprobsProcessed for vLLM, which assumes the server runs
	// with --logprobs-mode processed_logprobs, and LogprobsTemperature for
	// SGLang.
	Logprobs LogprobsMode
	// Routing asks for the MoE routed experts of every token (vLLM and
	// SGLang both need --enable-return-routed-experts); a response without
	// them is infer.ErrBadOutput. Defaults to false (dense model, or
	// routes not recorded).
	Routing bool
	// ExpertsPerToken is the model's num_experts_per_tok. Required by
	// SGLang's routes, which come without a shape; checked against vLLM's.
	ExpertsPerToken int
	// Experts is the number of routed experts per MoE layer; expert ids
	// must be below it. Defaults to 0: ids are only checked to be >= 0 and
	// to fit an int16.
	Experts int
	// MoELayers lists, in order, which of the server's layers are MoE
	// layers; only those are kept in infer.Token.Routing. Defaults to nil:
	// every layer the server reports.
	MoELayers []int
	// RequestTimeout bounds one Generate call. Defaults to 0: ctx only.
	RequestTimeout time.Duration
	// ConnectTimeout bounds establishing a connection with the default
	// Client. Defaults to 10 s.
	ConnectTimeout time.Duration
	// MaxResponseBytes bounds a response body (routes of a long generation
	// are tens of MiB). Defaults to 1 GiB.
	MaxResponseBytes int64
}

type kind int

const (
	vllm kind = iota
	sglang
)

// Engine generates with a vLLM or SGLang server. It is safe for concurrent
// use; its method set is the local engine's Generate.
type Engine struct {
	kind    kind
	name    string // for errors: "vLLM" or "SGLang"
	url     string // the generation endpoint
	opt     Options
	client  *http.Client
	version atomic.Int64
}

// NewVLLM returns an Engine for a vLLM OpenAI-compatible server at baseURL
// (scheme://host:port, optionally ending in /v1); it posts to
// /v1/completions.
func NewVLLM(baseURL string, opt Options) (*Engine, error) {
	return newEngine(vllm, "vLLM", baseURL, opt)
}

// NewSGLang returns an Engine for an SGLang server at baseURL
// (scheme://host:port); it posts to SGLang's native /generate.
func NewSGLang(baseURL string, opt Options) (*Engine, error) {
	return newEngine(sglang, "SGLang", baseURL, opt)
}

func newEngine(k kind, name, baseURL string, opt Options) (*Engine, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: remote: %s base URL %q: want http(s)://host:port", infer.ErrInput, name, baseURL)
	}
	switch k {
	case vllm:
		if strings.HasSuffix(u.Path, "/v1") {
			u.Path += "/completions"
		} else {
			u.Path += "/v1/completions"
		}
	case sglang:
		u.Path += "/generate"
	}
	if opt.VocabSize <= 0 {
		return nil, fmt.Errorf("%w: remote: Options.VocabSize %d, must be > 0", infer.ErrInput, opt.VocabSize)
	}
	if opt.ContextLength < 0 || opt.ExpertsPerToken < 0 || opt.Experts < 0 || opt.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("%w: remote: negative Options field", infer.ErrInput)
	}
	if opt.Routing && k == sglang && opt.ExpertsPerToken == 0 {
		return nil, fmt.Errorf("%w: remote: SGLang routes come without a shape: Options.ExpertsPerToken is required", infer.ErrInput)
	}
	if opt.VersionFromServer && k != sglang {
		return nil, fmt.Errorf("%w: remote: %s reports no weight version: Options.VersionFromServer is SGLang only", infer.ErrInput, name)
	}
	for i, l := range opt.MoELayers {
		if l < 0 || (i > 0 && l <= opt.MoELayers[i-1]) {
			return nil, fmt.Errorf("%w: remote: Options.MoELayers must be increasing non-negative layer indices", infer.ErrInput)
		}
	}
	if opt.Logprobs == "" {
		opt.Logprobs = LogprobsProcessed
		if k == sglang {
			opt.Logprobs = LogprobsTemperature
		}
	}
	if err := opt.Logprobs.accepts(infer.DefaultSampling(0)); err != nil {
		return nil, fmt.Errorf("%w: remote: %v", infer.ErrInput, err)
	}
	if opt.ConnectTimeout == 0 {
		opt.ConnectTimeout = 10 * time.Second
	}
	if opt.MaxResponseBytes == 0 {
		opt.MaxResponseBytes = 1 << 30
	}
	opt.MoELayers = append([]int(nil), opt.MoELayers...)
	e := &Engine{kind: k, name: name, url: u.String(), opt: opt, client: opt.Client}
	if e.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: opt.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.MaxIdleConnsPerHost = 256 // many rollouts share one server
		e.client = &http.Client{Transport: t}
	}
	e.version.Store(opt.Version)
	return e, nil
}

// SetVersion sets the policy version recorded on the tokens of requests
// that start from now on: call it once the server has loaded the new
// weights. Requests already running keep the version they started with
// (the adapter cannot see a weight swap in the middle of a generation).
func (e *Engine) SetVersion(v int64) { e.version.Store(v) }

// Version is the policy version new requests record.
func (e *Engine) Version() int64 { return e.version.Load() }

// LogprobsMode is the server's logprob semantics this Engine assumes.
func (e *Engine) LogprobsMode() LogprobsMode { return e.opt.Logprobs }

// URL is the endpoint requests are posted to.
func (e *Engine) URL() string { return e.url }

// plan is a validated request: what to ask the server for.
type plan struct {
	maxTokens   int  // sent as max_tokens / max_new_tokens
	toContext   bool // maxTokens is what the context leaves, not the caller's bound
	temperature float64
	topP        float64
	topK        int // -1: no cut (both servers accept -1)
	stream      bool
	version     int64
}

// plan validates req the way the local engine does and decides the wire
// parameters.
func (e *Engine) plan(req infer.Request) (plan, error) {
	bad := func(format string, a ...any) (plan, error) {
		return plan{}, fmt.Errorf("%w: remote: "+format, append([]any{infer.ErrInput}, a...)...)
	}
	p := len(req.Prompt)
	if p == 0 {
		return bad("empty prompt")
	}
	for i, id := range req.Prompt {
		if id < 0 || int(id) >= e.opt.VocabSize {
			return bad("prompt token %d is id %d, outside the vocabulary of %d", i, id, e.opt.VocabSize)
		}
	}
	for _, id := range req.StopTokens {
		if id < 0 || int(id) >= e.opt.VocabSize {
			return bad("stop token %d outside the vocabulary of %d", id, e.opt.VocabSize)
		}
	}
	s := req.Sampling
	if s.Temperature == 0 {
		s.Temperature = 1 // the zero Sampling is the training default
	}
	if s.TopP == 0 {
		s.TopP = 1
	}
	if !(s.Temperature > 0) || math.IsInf(s.Temperature, 0) {
		return bad("temperature %g is not a positive number (greedy is top-k 1)", s.Temperature)
	}
	if !(s.TopP > 0 && s.TopP <= 1) {
		return bad("top-p %g outside (0, 1]", s.TopP)
	}
	if s.TopK < 0 {
		return bad("top-k %d < 0", s.TopK)
	}
	if req.MaxTokens < 0 {
		return bad("MaxTokens %d < 0", req.MaxTokens)
	}
	if err := e.opt.Logprobs.accepts(s); err != nil {
		return bad("%v", err)
	}
	pl := plan{temperature: s.Temperature, topP: s.TopP, topK: s.TopK, version: e.version.Load()}
	if pl.topK == 0 {
		pl.topK = -1
	}
	room := math.MaxInt32
	if n := e.opt.ContextLength; n > 0 {
		room = n - p
		if e.kind == sglang {
			room-- // SGLang refuses input + max_new_tokens >= context length
		}
		if room < 1 {
			return plan{}, fmt.Errorf("%w: remote: prompt of %d tokens leaves no room in the %s context of %d", infer.ErrOverlong, p, e.name, n)
		}
	}
	switch {
	case req.MaxTokens == 0 && e.opt.ContextLength == 0:
		return bad("MaxTokens 0 (up to the context) needs Options.ContextLength")
	case req.MaxTokens == 0 || req.MaxTokens > room:
		pl.maxTokens, pl.toContext = room, true
	default:
		pl.maxTokens = req.MaxTokens
	}
	pl.stream = e.opt.Stream && !(e.kind == vllm && e.opt.Routing)
	return pl, nil
}

// Generate runs req on the server. emit, if not nil, is called with every
// sampled token in order: as each chunk arrives when streaming, else once
// the whole response has arrived and been checked. A streamed token carries
// no Routing (both servers send routes with the last chunk); the returned
// Generation always has them. When Generate fails, tokens already emitted
// are not part of any result and must be dropped.
//
// Every error wraps infer.ErrInput (a request the adapter or the server
// refuses), infer.ErrOverlong (the prompt does not fit the context),
// infer.ErrBadOutput (a NaN/Inf or missing logprob, a token id outside
// the vocabulary, lengths that disagree, malformed JSON, routes of the
// wrong shape) or ErrUnavailable (network, timeout, ctx, HTTP 5xx, a cut
// stream); a cancelled or expired ctx is also wrapped.
func (e *Engine) Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	pl, err := e.plan(req)
	if err != nil {
		return infer.Generation{}, err
	}
	if e.opt.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.opt.RequestTimeout)
		defer cancel()
	}
	var body any
	if e.kind == vllm {
		body = e.vllmRequest(req, pl)
	} else {
		body = e.sglangRequest(req, pl)
	}
	resp, err := e.post(ctx, body, pl.stream)
	if err != nil {
		return infer.Generation{}, err
	}
	defer resp.Body.Close()
	r := &limitReader{r: resp.Body, left: e.opt.MaxResponseBytes}
	g := &gen{e: e, req: req, pl: pl, emit: emit}
	if pl.stream {
		err = e.readStream(ctx, r, g)
	} else {
		var data []byte
		data, err = io.ReadAll(r)
		if err != nil {
			err = e.readErr(ctx, err)
		} else if e.kind == vllm {
			err = e.vllmResponse(data, g)
		} else {
			err = e.sglangResponse(data, g)
		}
	}
	if err != nil {
		return infer.Generation{}, err
	}
	return g.finish()
}

// readStream reads the server-sent events of a streaming response.
func (e *Engine) readStream(ctx context.Context, r io.Reader, g *gen) error {
	sse := newSSEReader(r)
	for {
		data, err := sse.next()
		if err == io.EOF {
			return fmt.Errorf("%w: %s: stream ended without data: [DONE]: %w", ErrUnavailable, e.name, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return e.readErr(ctx, err)
		}
		if bytes.Equal(data, sseDone) {
			return nil
		}
		if e.kind == vllm {
			err = e.vllmChunk(data, g)
		} else {
			err = e.sglangChunk(data, g)
		}
		if err != nil {
			return err
		}
	}
}

// post sends body and returns the response once the server accepted it
// (2xx); any other status is turned into an error.
func (e *Engine) post(ctx context.Context, body any, stream bool) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: remote: encoding the %s request: %v", infer.ErrInput, e.name, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: remote: %v", infer.ErrInput, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if e.opt.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+e.opt.APIKey)
	}
	resp, err := e.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, e.name, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return nil, e.statusErr(resp.StatusCode, raw)
}

// statusErr turns a non-2xx response into an error naming the status and the
// server's message.
func (e *Engine) statusErr(code int, raw []byte) error {
	var w wireError
	msg := ""
	if decodeJSON(raw, &w) == nil {
		msg = w.text()
	}
	if msg == "" {
		msg, _, _ = strings.Cut(strings.TrimSpace(string(raw)), "\n")
	}
	if msg == "" {
		msg = "(no message)"
	}
	var sentinel error
	switch {
	case (code == 400 || code == 413 || code == 422) && isOverlong(msg):
		sentinel = infer.ErrOverlong
	case code == 408 || code == 429 || code >= 500:
		sentinel = ErrUnavailable
	case code >= 400:
		sentinel = infer.ErrInput
	default:
		sentinel = ErrUnavailable
	}
	return fmt.Errorf("%w: %s at %s: HTTP %d %s: %s", sentinel, e.name, e.url, code, http.StatusText(code), text.OneLine(msg, 300))
}

// eventErr turns an error event inside a 200 stream, or an error body, into
// an error.
func (e *Engine) eventErr(w *wireError) error {
	msg := text.OneLine(w.text(), 300)
	if msg == "" {
		msg = "(no message)"
	}
	code := w.status()
	switch {
	case isOverlong(msg):
		return fmt.Errorf("%w: %s: %s", infer.ErrOverlong, e.name, msg)
	case code >= 400 && code < 500 && code != 408 && code != 429:
		return fmt.Errorf("%w: %s: error %d: %s", infer.ErrInput, e.name, code, msg)
	default:
		return fmt.Errorf("%w: %s: error: %s", ErrUnavailable, e.name, msg)
	}
}

// readErr wraps an error from reading a response body.
func (e *Engine) readErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("%w: %s: %v (%d)", infer.ErrBadOutput, e.name, err, e.opt.MaxResponseBytes)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s: reading the response: %w", ErrUnavailable, e.name, ctx.Err())
	default:
		return fmt.Errorf("%w: %s: reading the response: %w", ErrUnavailable, e.name, err)
	}
}

// badOutput is an infer.ErrBadOutput error about e's response.
func (e *Engine) badOutput(format string, a ...any) error {
	return fmt.Errorf("%w: %s: "+format, append([]any{infer.ErrBadOutput, e.name}, a...)...)
}
