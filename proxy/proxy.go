// Package proxy is the model server a harness talks to: OpenAI Chat
// Completions, OpenAI Responses and Anthropic Messages under a per-rollout
// base URL (/rollout/<id>/v1), backed by the policy engine, recording what
// the policy saw and sampled as segments for training.
//
// Each request is decoded at the edge into a Turn (the wire formats only
// translate), rendered with the model's chat template, tokenized (only the
// part that is new since the last call: history is never re-tokenized),
// generated with the rollout's own sampling settings (harnesses send none
// that count), parsed back into content, reasoning and tool calls, and
// answered in the caller's wire format, streamed or not. The segment
// recorder (recorder.go) decides whether the call grows the current segment,
// starts a new one (and why), is a side request, or retries the last call.
// Every failure reaches the caller as a well-formed API error in its own
// format; nothing a client sends crashes or hangs the proxy.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/tokenizer"
)

// Generator runs one generation, calling emit for each sampled token as it
// is produced (from the calling goroutine or another, but never after
// Generate returns). The local engine (policy/engine) and the remote
// adapters (policy/remote) satisfy it.
type Generator interface {
	Generate(ctx context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error)
}

// Template renders conversations to prompt text and parses completions
// back; chat.Qwen3 and chat.Qwen3Coder are Templates.
type Template interface {
	chat.Renderer
	Parse(text string, tools []chat.Tool) chat.Parsed
}

// DefaultRollout is the rollout that the routes without the /rollout/<id>
// prefix use (legorl serve). New opens it; a server that runs for long
// drains it with Finish and opens it again.
const DefaultRollout = "default"

// Sentinel errors of the package.
var (
	// ErrOptions: New was given incomplete options.
	ErrOptions = errors.New("proxy: bad options")
	// ErrRolloutExists: Open was given an id already open.
	ErrRolloutExists = errors.New("proxy: rollout already open")
	// ErrNoRollout: no open rollout has that id.
	ErrNoRollout = errors.New("proxy: no such rollout")
)

// Options configure a Proxy. Generator, Tokenizer and Template are required.
type Options struct {
	Generator Generator
	Tokenizer *tokenizer.Tokenizer
	Template  Template
	// ModelName is the model's name in replies and in /v1/models. Defaults
	// to "legorl".
	ModelName string
	// Models are the model names a request may ask for; a request naming
	// another model gets a 404. A request without a model is accepted.
	// Defaults to nil: any name is accepted (harnesses are configured with
	// names of their own choosing, and there is one policy to serve).
	Models []string
	// Sampling is the sampling of rollouts opened without their own; its
	// Seed is ignored (each call's seed derives from the rollout's). Zero
	// fields take the engine's defaults (temperature 1, top-p 1, no
	// top-k). Defaults to infer.DefaultSampling.
	Sampling infer.Sampling
	// MaxTokens bounds a completion when the request sets no limit; 0
	// means up to the context limit. Defaults to 0.
	MaxTokens int
	// MaxBodyBytes bounds a request body; a larger one gets a 413.
	// Defaults to 32 MiB.
	MaxBodyBytes int64
	// Clock gives the time of replies (their "created" fields). Defaults
	// to time.Now.
	Clock func() time.Time
	// Logger receives recovered panics and failed writes. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// ServerMetrics, when not nil, counts every model call in Prometheus
	// metrics (NewServerMetrics). Defaults to nil: no metrics.
	ServerMetrics *ServerMetrics
}

// Proxy serves the wire formats for every open rollout. It is an
// http.Handler; see routes for the paths it serves.
type Proxy struct {
	opt     Options
	tok     *tokenizer.Tokenizer
	stops   []int32 // end-of-turn token ids: a generation stops on them
	formats map[string]wireFormat
	mux     *http.ServeMux

	mu       sync.Mutex // guards rollouts
	rollouts map[string]*rollout

	// noMemos turns callMemo off: every call decoded and rendered whole
	// (tests compare the two).
	noMemos bool
}

// New returns a proxy with DefaultRollout open.
func New(opt Options) (*Proxy, error) {
	if opt.Generator == nil || opt.Tokenizer == nil || opt.Template == nil {
		return nil, fmt.Errorf("%w: Generator, Tokenizer and Template are required", ErrOptions)
	}
	if opt.ModelName == "" {
		opt.ModelName = "legorl"
	}
	s, err := normalSampling(opt.Sampling)
	if err != nil {
		return nil, err
	}
	opt.Sampling = s
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = 32 << 20
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	p := &Proxy{opt: opt, tok: opt.Tokenizer, formats: wireFormats(), rollouts: map[string]*rollout{}}
	for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := opt.Tokenizer.TokenID(s); ok {
			p.stops = append(p.stops, id)
		}
	}
	if len(p.stops) == 0 {
		return nil, fmt.Errorf("%w: the tokenizer has no <|im_end|> or <|endoftext|> token", ErrOptions)
	}
	p.mux = p.routes()
	if err := p.Open(DefaultRollout, RolloutOptions{}); err != nil {
		return nil, err
	}
	return p, nil
}

// wireFormats maps the API path after /v1/ to the format that serves it.
func wireFormats() map[string]wireFormat {
	return map[string]wireFormat{
		"chat/completions": chatFormat{},
		"responses":        responsesFormat{},
		"messages":         messagesFormat{},
	}
}

// normalSampling fills the engine's defaults in (temperature 0 and top-p 0
// mean 1), so that rows record what was used, and refuses settings the
// engine would.
func normalSampling(s infer.Sampling) (infer.Sampling, error) {
	if s.Temperature == 0 {
		s.Temperature = 1
	}
	if s.TopP == 0 {
		s.TopP = 1
	}
	if !(s.Temperature > 0) || !(s.TopP > 0 && s.TopP <= 1) || s.TopK < 0 {
		return s, fmt.Errorf("%w: sampling temperature %v top-p %v top-k %d", ErrOptions, s.Temperature, s.TopP, s.TopK)
	}
	return s, nil
}

// ServeHTTP serves one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// accepts reports whether a request may name model.
func (p *Proxy) accepts(model string) bool {
	if model == "" || len(p.opt.Models) == 0 || model == p.opt.ModelName {
		return true
	}
	for _, m := range p.opt.Models {
		if m == model {
			return true
		}
	}
	return false
}
