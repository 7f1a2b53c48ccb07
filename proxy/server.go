package proxy

import (
	"errors"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/legorl/legorl/policy/chat"
)

// routes builds the proxy's paths. For every wire format NAME (chat/completions,
// responses, messages):
//
//	POST /rollout/{id}/v1/NAME   a call of rollout id
//	POST /v1/NAME                a call of DefaultRollout
//
// Anthropic's token counting (recorded nowhere, generates nothing):
//
//	POST /rollout/{id}/v1/messages/count_tokens, /v1/messages/count_tokens
//
// and for model discovery (OpenAI and Anthropic clients both read it):
//
//	GET /rollout/{id}/v1/models, /rollout/{id}/v1/models/{model}
//	GET /v1/models, /v1/models/{model}
//
// Anything else is a 404 in the caller's format.
func (p *Proxy) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for name, f := range p.formats {
		api := apis[name]
		mux.Handle("/rollout/{id}/v1/"+name, p.guard(f, func(w http.ResponseWriter, r *http.Request) {
			p.serveTurn(w, r, f, api, r.PathValue("id"))
		}))
		mux.Handle("/v1/"+name, p.guard(f, func(w http.ResponseWriter, r *http.Request) {
			p.serveTurn(w, r, f, api, DefaultRollout)
		}))
	}
	if f, ok := p.formats["messages"].(tokenCounter); ok {
		mf := p.formats["messages"]
		mux.Handle("/rollout/{id}/v1/messages/count_tokens", p.guard(mf, func(w http.ResponseWriter, r *http.Request) {
			p.serveCount(w, r, mf, f, r.PathValue("id"))
		}))
		mux.Handle("/v1/messages/count_tokens", p.guard(mf, func(w http.ResponseWriter, r *http.Request) {
			p.serveCount(w, r, mf, f, DefaultRollout)
		}))
	}
	models := func(id func(*http.Request) string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f := p.formatFor(r)
			p.guard(f, func(w http.ResponseWriter, r *http.Request) { p.serveModels(w, r, f, id(r)) }).ServeHTTP(w, r)
		})
	}
	pathID := func(r *http.Request) string { return r.PathValue("id") }
	defaultID := func(*http.Request) string { return DefaultRollout }
	mux.Handle("/rollout/{id}/v1/models", models(pathID))
	mux.Handle("/rollout/{id}/v1/models/{model}", models(pathID))
	mux.Handle("/v1/models", models(defaultID))
	mux.Handle("/v1/models/{model}", models(defaultID))
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.formatFor(r).fail(w, notFound("", "proxy: no route for %s %s", r.Method, r.URL.Path))
	}))
	return mux
}

// formatFor guesses the caller's wire format for a path that has none of
// its own (models, unknown paths): Anthropic clients send an
// anthropic-version header and call .../messages.
func (p *Proxy) formatFor(r *http.Request) wireFormat {
	if f, ok := p.formats["messages"]; ok &&
		(r.Header.Get("anthropic-version") != "" || strings.HasSuffix(r.URL.Path, "/messages")) {
		return f
	}
	return p.formats["chat/completions"]
}

// serveTurn serves one call of wire API api (the metrics' label) and
// reports it to the metrics.
func (p *Proxy) serveTurn(w http.ResponseWriter, r *http.Request, f wireFormat, api, id string) {
	start := time.Now()
	// Until turn returns, the call has failed: a panic ends it that way
	// (guard answers it with a server error).
	c := &callStats{fail: serverError("proxy: internal error")}
	defer func() { p.opt.ServerMetrics.observe(api, time.Since(start), c) }()
	c.fail = p.turn(w, r, f, id, c)
}

// turn reads and decodes the body, checks the model, waits for the
// rollout's turn and runs the call. It returns the error the caller got,
// nil when the call succeeded.
func (p *Proxy) turn(w http.ResponseWriter, r *http.Request, f wireFormat, id string, c *callStats) *apiError {
	fail := func(e *apiError) *apiError {
		f.fail(w, e)
		return e
	}
	body, e := p.readBody(w, r)
	if e != nil {
		return fail(e)
	}
	turn, memo, base, e := p.decode(f, body, p.lookup(id))
	if e != nil {
		return fail(e)
	}
	if !p.accepts(turn.Model) {
		return fail(unknownModel(turn.Model))
	}
	ro, err := p.lockRollout(r.Context(), id)
	if err != nil {
		if errors.Is(err, ErrNoRollout) {
			return fail(unknownRollout(id))
		}
		e, _, _ := engineError(err)
		return fail(e)
	}
	defer ro.unlock()
	return p.call(r.Context(), w, f, ro, turn, memo, base, c)
}

// tokenCounter is a wire format with a token-counting endpoint (Anthropic
// Messages' count_tokens).
type tokenCounter interface {
	decodeCountTokens(body []byte) (Turn, *apiError)
	countTokens(w http.ResponseWriter, inputTokens int)
}

// readBody reads a POST request body of at most the configured size; the
// error is the one to answer with.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, methodNotAllowed(r.Method)
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, p.opt.MaxBodyBytes), bodySize(r.ContentLength, p.opt.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, tooLarge(mb.Limit)
		}
		return nil, badRequest("", "proxy: reading the request body: %v", err)
	}
	return body, nil
}

// readAll is io.ReadAll with room for size bytes (the request's
// Content-Length, -1 when unknown) from the start, so that a body of known
// length is read into one buffer without regrowing it.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, max(size+1, 512)) // +1: the read that sees EOF
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// bodySize is the size to read a body of Content-Length n (-1 when
// unknown) into: n, unless the limit refuses it anyway.
func bodySize(n, limit int64) int64 {
	if n > limit {
		return -1
	}
	return n
}

// serveCount answers a token count: the length of the prompt the call
// would send the engine, exactly (the recorder places it without recording
// anything: a call that extends its segment counts the recorded tokens
// plus the new suffix, which may differ from tokenizing the whole text).
func (p *Proxy) serveCount(w http.ResponseWriter, r *http.Request, f wireFormat, c tokenCounter, id string) {
	body, e := p.readBody(w, r)
	if e != nil {
		f.fail(w, e)
		return
	}
	turn, e := c.decodeCountTokens(body)
	if e != nil {
		f.fail(w, e)
		return
	}
	if !p.accepts(turn.Model) {
		f.fail(w, unknownModel(turn.Model))
		return
	}
	prompt, err := p.opt.Template.Render(turn.Messages, turn.Tools,
		chat.Options{AddGenerationPrompt: true, DisableThinking: turn.DisableThinking})
	if err != nil {
		f.fail(w, badRequest("messages", "proxy: the conversation cannot be rendered: %v", err))
		return
	}
	ro, err := p.lockRollout(r.Context(), id)
	if err != nil {
		if errors.Is(err, ErrNoRollout) {
			f.fail(w, unknownRollout(id))
			return
		}
		e, _, _ := engineError(err)
		f.fail(w, e)
		return
	}
	pl := ro.rec.place(describe(prompt, turn), p.encode)
	ro.unlock()
	c.countTokens(w, len(pl.prompt))
}

// guard recovers a panic in h into a 500 in f's format (or, once a stream
// has begun, ends the connection): a bug in one request never takes the
// process down.
func (p *Proxy) guard(f wireFormat, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			p.opt.Logger.Error("proxy: recovered panic", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			if tw.wrote {
				panic(http.ErrAbortHandler) // a stream already began: cut it
			}
			f.fail(tw, serverError("proxy: internal error"))
		}()
		h(tw, r)
	})
}

// trackWriter notes whether a response has begun.
type trackWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *trackWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush passes flushes through, for event streams.
func (w *trackWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *trackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
