package remote_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/remote"
	"github.com/legorl/legorl/policy/remote/remotetest"
)

const (
	vocab = 100
	stop  = 9
)

var prompt = []int32{1, 2, 3, 4}

// The remote engine has the local engine's method.
var _ interface {
	Generate(context.Context, infer.Request, func(infer.Token)) (infer.Generation, error)
} = (*remote.Engine)(nil)

func request(maxTokens int) infer.Request {
	return infer.Request{Prompt: prompt, MaxTokens: maxTokens, StopTokens: []int32{stop}, Sampling: infer.DefaultSampling(42)}
}

// server is one of the two fakes with its engine.
type server struct {
	name string
	fake func(testing.TB, func(remotetest.Request) remotetest.Reply) *remotetest.Server
	make func(string, remote.Options) (*remote.Engine, error)
}

var servers = []server{
	{"vLLM", remotetest.NewVLLM, remote.NewVLLM},
	{"SGLang", remotetest.NewSGLang, remote.NewSGLang},
}

func start(t *testing.T, s server, opt remote.Options, reply remotetest.Reply) (*remotetest.Server, *remote.Engine) {
	t.Helper()
	fake := s.fake(t, remotetest.Fixed(reply))
	if opt.VocabSize == 0 {
		opt.VocabSize = vocab
	}
	e, err := s.make(fake.URL, opt)
	if err != nil {
		t.Fatal(err)
	}
	return fake, e
}

// run generates and collects what emit saw.
func run(t *testing.T, e *remote.Engine, ctx context.Context, req infer.Request) (infer.Generation, []infer.Token, error) {
	t.Helper()
	var mu sync.Mutex
	var seen []infer.Token
	g, err := e.Generate(ctx, req, func(tok infer.Token) {
		mu.Lock()
		seen = append(seen, tok)
		mu.Unlock()
	})
	return g, seen, err
}

func TestGenerate(t *testing.T) {
	for _, s := range servers {
		for _, c := range []struct {
			name      string
			opt       remote.Options
			req       infer.Request
			reply     remotetest.Reply
			sentMax   int
			finish    string
			streamed  bool
			sentTopP  float64
			sentTopK  int
			versionOf int64
		}{
			{
				name:    "stop",
				opt:     remote.Options{Version: 3},
				req:     request(8),
				reply:   remotetest.Reply{Tokens: []int32{5, 6, stop}, Logprobs: []float64{-0.1, -0.2, -0.3}, Finish: "stop", CachedTokens: 2},
				sentMax: 8, finish: infer.FinishStop, sentTopP: 1, sentTopK: -1, versionOf: 3,
			},
			{
				name:    "length stream",
				opt:     remote.Options{Stream: true, Version: 5},
				req:     request(3),
				reply:   remotetest.Reply{Tokens: []int32{5, 6, 7}, Logprobs: []float64{-1, -2, -3}, Finish: "length", Chunk: 2},
				sentMax: 3, finish: infer.FinishLength, streamed: true, sentTopP: 1, sentTopK: -1, versionOf: 5,
			},
			{
				name:    "incremental stream",
				opt:     remote.Options{Stream: true},
				req:     request(3),
				reply:   remotetest.Reply{Tokens: []int32{5, 6, stop}, Logprobs: []float64{-1, -2, -3}, Finish: "stop", Chunk: 2, Incremental: true},
				sentMax: 3, finish: infer.FinishStop, streamed: true, sentTopP: 1, sentTopK: -1,
			},
			{
				name:    "up to the context",
				opt:     remote.Options{ContextLength: 10},
				req:     request(0),
				reply:   remotetest.Reply{Tokens: []int32{5, 6, 7, 8, 10, 11}, Finish: "length"},
				sentMax: 6, finish: infer.FinishContext, sentTopP: 1, sentTopK: -1,
			},
			{
				name:    "clamped to the context",
				opt:     remote.Options{ContextLength: 10, Stream: true},
				req:     request(50),
				reply:   remotetest.Reply{Tokens: []int32{5, 6, 7, 8, 10, 11}, Finish: "length"},
				sentMax: 6, finish: infer.FinishContext, streamed: true, sentTopP: 1, sentTopK: -1,
			},
			{
				name:    "stop token at max tokens",
				req:     request(2),
				reply:   remotetest.Reply{Tokens: []int32{5, stop}, Finish: "length"},
				sentMax: 2, finish: infer.FinishStop, sentTopP: 1, sentTopK: -1,
			},
			{
				name:    "processed logprobs forward top-p and top-k",
				opt:     remote.Options{Logprobs: remote.LogprobsProcessed},
				req:     infer.Request{Prompt: prompt, MaxTokens: 1, Sampling: infer.Sampling{Temperature: 0.7, TopP: 0.9, TopK: 20, Seed: 42}},
				reply:   remotetest.Reply{Tokens: []int32{5}},
				sentMax: 1, finish: infer.FinishLength, sentTopP: 0.9, sentTopK: 20,
			},
		} {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				if s.name == "SGLang" && c.opt.ContextLength > 0 {
					c.sentMax-- // SGLang refuses input + max_new_tokens >= context
					c.reply.Tokens = c.reply.Tokens[:c.sentMax]
				}
				fake, e := start(t, s, c.opt, c.reply)
				g, seen, err := run(t, e, context.Background(), c.req)
				if err != nil {
					t.Fatal(err)
				}
				want := c.reply.Tokens
				if !slices.Equal(g.Tokens, want) {
					t.Errorf("tokens %v, want %v", g.Tokens, want)
				}
				if g.Finish != c.finish {
					t.Errorf("finish %q, want %q", g.Finish, c.finish)
				}
				if len(g.Logprobs) != len(want) || len(g.Versions) != len(want) {
					t.Fatalf("%d logprobs, %d versions for %d tokens", len(g.Logprobs), len(g.Versions), len(want))
				}
				for i := range want {
					wantLP := float32(-0.5)
					if i < len(c.reply.Logprobs) {
						wantLP = float32(c.reply.Logprobs[i])
					}
					if g.Logprobs[i] != wantLP || g.Versions[i] != c.versionOf {
						t.Errorf("token %d: logprob %v version %d, want %v %d", i, g.Logprobs[i], g.Versions[i], wantLP, c.versionOf)
					}
				}
				if g.PromptTokens != len(prompt) || g.CachedTokens != c.reply.CachedTokens {
					t.Errorf("prompt %d cached %d", g.PromptTokens, g.CachedTokens)
				}
				if g.Routing != nil || g.PromptRouting != nil {
					t.Errorf("routes without Options.Routing")
				}
				if len(seen) != len(want) {
					t.Fatalf("emit saw %d tokens, want %d", len(seen), len(want))
				}
				for i, tok := range seen {
					if tok.ID != want[i] || tok.Logprob != g.Logprobs[i] || tok.Version != g.Versions[i] {
						t.Errorf("emitted %+v, want token %d of %v", tok, i, g)
					}
				}
				reqs := fake.Requests()
				if len(reqs) != 1 {
					t.Fatalf("%d requests", len(reqs))
				}
				r := reqs[0]
				if !slices.Equal(r.Prompt, prompt) || r.MaxTokens != c.sentMax || r.Temperature != c.req.Sampling.Temperature ||
					r.TopP != c.sentTopP || r.TopK != c.sentTopK || r.Seed != int64(c.req.Sampling.Seed) ||
					!slices.Equal(r.StopTokens, c.req.StopTokens) || !r.IgnoreEOS || r.Stream != c.streamed {
					t.Errorf("server got %+v", r)
				}
			})
		}
	}
}

func TestRoutes(t *testing.T) {
	const p, layers, k = 4, 3, 2
	tokens := []int32{5, 6, stop}
	rows := p + len(tokens) - 1
	table := remotetest.Routes(rows, layers, k, func(r, l, j int) int32 { return int32((r*7 + l*3 + j) % 16) })
	check := func(t *testing.T, g infer.Generation, seen []infer.Token, keep []int, streamed bool) {
		t.Helper()
		if len(g.PromptRouting) != p || len(g.Routing) != len(tokens) || g.Routing[len(tokens)-1] != nil {
			t.Fatalf("routing: %d prompt, %d completion entries, last %v", len(g.PromptRouting), len(g.Routing), g.Routing[len(g.Routing)-1])
		}
		for r := range rows {
			got := g.PromptRouting
			i := r
			if r >= p {
				got, i = g.Routing, r-p
			}
			if len(got[i]) != len(keep) {
				t.Fatalf("row %d has %d layers", r, len(got[i]))
			}
			for li, l := range keep {
				for j := range k {
					if int32(got[i][li][j]) != table[r][l][j] {
						t.Fatalf("row %d layer %d slot %d: %d, want %d", r, l, j, got[i][li][j], table[r][l][j])
					}
				}
			}
		}
		for i, tok := range seen {
			switch {
			case streamed && tok.Routing != nil:
				t.Errorf("streamed token %d has routes", i)
			case !streamed && i < len(tokens)-1 && len(tok.Routing) != len(keep):
				t.Errorf("emitted token %d without its routes", i)
			}
		}
	}
	for _, c := range []struct {
		name   string
		s      server
		opt    remote.Options
		reply  remotetest.Reply
		keep   []int
		stream bool
	}{
		{"vLLM int32", servers[0], remote.Options{}, remotetest.Reply{}, []int{0, 1, 2}, false},
		{"vLLM uint8 no stream", servers[0], remote.Options{Stream: true}, remotetest.Reply{RouteDType: "|u1"}, []int{0, 1, 2}, false},
		{"vLLM uint16 split", servers[0], remote.Options{}, remotetest.Reply{RouteDType: "<u2", SplitRoutes: true, PromptRows: p}, []int{0, 1, 2}, false},
		{"vLLM MoE layers", servers[0], remote.Options{MoELayers: []int{0, 2}, Experts: 16, ExpertsPerToken: k}, remotetest.Reply{}, []int{0, 2}, false},
		{"SGLang", servers[1], remote.Options{ExpertsPerToken: k}, remotetest.Reply{}, []int{0, 1, 2}, false},
		{"SGLang stream", servers[1], remote.Options{ExpertsPerToken: k, Stream: true}, remotetest.Reply{Chunk: 2}, []int{0, 1, 2}, true},
		{"SGLang MoE layer", servers[1], remote.Options{ExpertsPerToken: k, MoELayers: []int{1}}, remotetest.Reply{}, []int{1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opt.Routing = true
			c.reply.Tokens, c.reply.Finish, c.reply.Routes = tokens, "stop", table
			fake, e := start(t, c.s, c.opt, c.reply)
			g, seen, err := run(t, e, context.Background(), request(8))
			if err != nil {
				t.Fatal(err)
			}
			check(t, g, seen, c.keep, c.stream)
			if r := fake.Requests()[0]; r.Stream != c.stream || (c.s.name == "SGLang" && !r.Routes) {
				t.Errorf("request stream %v routes %v", r.Stream, r.Routes)
			}
		})
	}
}

// TestZeroSampling: the zero Sampling is the training default, sent as
// temperature 1, top-p 1, no top-k.
func TestZeroSampling(t *testing.T) {
	for _, s := range servers {
		fake, e := start(t, s, remote.Options{Logprobs: remote.LogprobsRaw}, remotetest.Reply{Tokens: []int32{5}})
		req := request(1)
		req.Sampling = infer.Sampling{}
		if _, _, err := run(t, e, context.Background(), req); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if r := fake.Requests()[0]; r.Temperature != 1 || r.TopP != 1 || r.TopK != -1 || r.Seed != 0 {
			t.Errorf("%s: sent %+v", s.name, r)
		}
	}
}

func TestVersion(t *testing.T) {
	fake, e := start(t, servers[0], remote.Options{Version: 1}, remotetest.Reply{Tokens: []int32{5}})
	_ = fake
	e.SetVersion(2)
	if e.Version() != 2 || e.LogprobsMode() != remote.LogprobsProcessed {
		t.Errorf("version %d mode %s", e.Version(), e.LogprobsMode())
	}
	g, _, err := run(t, e, context.Background(), request(1))
	if err != nil || g.Versions[0] != 2 {
		t.Errorf("versions %v, %v", g.Versions, err)
	}
	_, s := start(t, servers[1], remote.Options{VersionFromServer: true, Stream: true}, remotetest.Reply{Tokens: []int32{5, 6}, WeightVersion: "17"})
	if s.LogprobsMode() != remote.LogprobsTemperature {
		t.Errorf("SGLang mode %s", s.LogprobsMode())
	}
	g, _, err = run(t, s, context.Background(), request(2))
	if err != nil || !slices.Equal(g.Versions, []int64{17, 17}) {
		t.Errorf("SGLang versions %v, %v", g.Versions, err)
	}
}

func TestErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(-1)
	vllmOverlong := "This model's maximum context length is 10 tokens. However, you requested 20 tokens (4 in the messages, 16 in the completion). Please reduce the length of the messages or completion."
	sglangOverlong := "The input (12 tokens) is longer than the model's context length (10 tokens)."
	for _, c := range []struct {
		name  string
		only  string // "vLLM" or "SGLang"; "" both
		opt   remote.Options
		reply remotetest.Reply
		want  error
		text  string
	}{
		{name: "null logprob", reply: remotetest.Reply{Tokens: []int32{5, 6}, Logprobs: []float64{-1, nan}}, want: infer.ErrBadOutput, text: "token 1 (id 6): logprob is null"},
		{name: "inf logprob stream", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{5, 6}, Logprobs: []float64{inf, -1}}, want: infer.ErrBadOutput, text: "logprob is null"},
		{name: "positive logprob", reply: remotetest.Reply{Tokens: []int32{5}, Logprobs: []float64{0.5}}, want: infer.ErrBadOutput, text: "> 0"},
		{name: "vLLM -inf stand-in", reply: remotetest.Reply{Tokens: []int32{5}, Logprobs: []float64{-9999}}, want: infer.ErrBadOutput, text: "probability 0"},
		{name: "python NaN literal", only: "vLLM", reply: remotetest.Reply{Raw: `{"choices":[{"index":0,"logprobs":{"tokens":["token_id:5"],"token_logprobs":[NaN]},"finish_reason":"length","token_ids":[5]}]}`}, want: infer.ErrBadOutput, text: "logprob is NaN"},
		{name: "padded id", reply: remotetest.Reply{Tokens: []int32{5, vocab}}, want: infer.ErrBadOutput, text: fmt.Sprintf("token 1 is id %d, past the tokenizer's %d ids: the server sampled the model's vocabulary padding", vocab, vocab)},
		{name: "padded id stream", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{vocab + 7}}, want: infer.ErrBadOutput, text: fmt.Sprintf("token 0 is id %d, past the tokenizer's %d ids", vocab+7, vocab)},
		{name: "negative id", reply: remotetest.Reply{Tokens: []int32{-2}}, want: infer.ErrBadOutput, text: "token 0 is id -2, outside the vocabulary"},
		{name: "ids disagree", reply: remotetest.Reply{Tokens: []int32{5, 6}, IDs: []int32{5, 7}}, want: infer.ErrBadOutput, text: "disagree"},
		{name: "ids shorter", reply: remotetest.Reply{Tokens: []int32{5, 6}, IDs: []int32{5}}, want: infer.ErrBadOutput, text: "disagree"},
		{name: "logprobs missing", only: "vLLM", reply: remotetest.Reply{Raw: `{"choices":[{"index":0,"logprobs":{"tokens":["token_id:5","token_id:6"],"token_logprobs":[-1]},"finish_reason":"length","token_ids":[5,6]}]}`}, want: infer.ErrBadOutput, text: "2 token ids but 1 logprobs"},
		{name: "no logprobs", only: "vLLM", reply: remotetest.Reply{Raw: `{"choices":[{"index":0,"logprobs":null,"finish_reason":"length","token_ids":[5,6]}]}`}, want: infer.ErrBadOutput, text: "without logprobs"},
		{name: "text tokens", only: "vLLM", reply: remotetest.Reply{Raw: `{"choices":[{"index":0,"logprobs":{"tokens":["hi"],"token_logprobs":[-1]},"finish_reason":"length"}]}`}, want: infer.ErrBadOutput, text: "token_id:N"},
		{name: "two choices", only: "vLLM", reply: remotetest.Reply{Raw: `{"choices":[{"index":0},{"index":1}]}`}, want: infer.ErrBadOutput, text: "2 choices"},
		{name: "usage disagrees", reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", Usage: &[2]int{5, 2}}, want: infer.ErrBadOutput, text: "server counts 5 prompt"},
		{name: "prompt echo", only: "vLLM", reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", PromptEcho: []int32{0, 1, 2, 3, 4}}, want: infer.ErrBadOutput, text: "echoed"},
		{name: "prompt echo token", only: "vLLM", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", PromptEcho: []int32{1, 2, 3, 5}}, want: infer.ErrBadOutput, text: "echoed prompt token 3"},
		{name: "stop without stop token", reply: remotetest.Reply{Tokens: []int32{5, 6}, Finish: "stop"}, want: infer.ErrBadOutput, text: "not a stop token"},
		{name: "went on after stop", reply: remotetest.Reply{Tokens: []int32{5, stop, 6}}, want: infer.ErrBadOutput, text: "went on"},
		{name: "short length", reply: remotetest.Reply{Tokens: []int32{5}}, want: infer.ErrBadOutput, text: "1 tokens, 4 asked for"},
		{name: "too many tokens", reply: remotetest.Reply{Tokens: []int32{5, 6, 7, 8, 10}}, want: infer.ErrBadOutput, text: "more than the 4 asked for"},
		{name: "unknown finish", reply: remotetest.Reply{Tokens: []int32{5}, Finish: "weird"}, want: infer.ErrBadOutput, text: `unknown finish reason "weird"`},
		{name: "no tokens", reply: remotetest.Reply{Finish: "length"}, want: infer.ErrBadOutput, text: "without a token"},
		{name: "vLLM abort", only: "vLLM", reply: remotetest.Reply{Tokens: []int32{5}, Finish: "abort"}, want: remote.ErrUnavailable, text: "abort"},
		{name: "SGLang abort overlong", only: "SGLang", reply: remotetest.Reply{Tokens: []int32{5}, Finish: "abort", Message: sglangOverlong}, want: infer.ErrOverlong, text: "context length"},
		{name: "SGLang version not a number", only: "SGLang", opt: remote.Options{VersionFromServer: true}, reply: remotetest.Reply{Tokens: []int32{5}}, want: infer.ErrBadOutput, text: "weight_version default"},
		{name: "SGLang no meta_info", only: "SGLang", reply: remotetest.Reply{Raw: `{"output_ids":[5]}`}, want: infer.ErrBadOutput, text: "meta_info"},
		{name: "SGLang list of two", only: "SGLang", reply: remotetest.Reply{Raw: `[{}, {}]`}, want: infer.ErrBadOutput, text: "2 outputs"},
		{name: "400 overlong vLLM", only: "vLLM", reply: remotetest.Reply{Status: 400, Message: vllmOverlong}, want: infer.ErrOverlong, text: "HTTP 400 Bad Request: This model's maximum context length is 10"},
		{name: "400 overlong SGLang", only: "SGLang", reply: remotetest.Reply{Status: 400, Message: sglangOverlong}, want: infer.ErrOverlong, text: "HTTP 400 Bad Request: The input (12 tokens)"},
		{name: "400 other", reply: remotetest.Reply{Status: 400, Message: "top_k must be -1 (disable), or at least 1, got 0.\nsecond line"}, want: infer.ErrInput, text: "HTTP 400 Bad Request: top_k must be -1 (disable), or at least 1, got 0. second line"},
		{name: "500", reply: remotetest.Reply{Status: 500, Message: "CUDA error: out of memory"}, want: remote.ErrUnavailable, text: "HTTP 500 Internal Server Error: CUDA error: out of memory"},
		{name: "503", reply: remotetest.Reply{Status: 503, Message: "loading"}, want: remote.ErrUnavailable, text: "HTTP 503"},
		{name: "malformed JSON", reply: remotetest.Reply{Malformed: true}, want: infer.ErrBadOutput, text: "malformed JSON response"},
		{name: "malformed stream event", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{5, 6, 7, 8}, Malformed: true}, want: infer.ErrBadOutput, text: "malformed JSON in stream"},
		{name: "truncated stream", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{5, 6, 7, 8}, Truncate: true}, want: remote.ErrUnavailable, text: "reading the response"},
		{name: "stream error event overlong", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{5, 6, 7, 8}, StreamError: vllmOverlong}, want: infer.ErrOverlong, text: "maximum context length"},
		{name: "stream error event", only: "SGLang", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{5, 6, 7, 8}, StreamError: "bad things"}, want: remote.ErrUnavailable, text: "bad things"},
		{name: "stream error event 400", only: "vLLM", opt: remote.Options{Stream: true}, reply: remotetest.Reply{Tokens: []int32{5, 6, 7, 8}, StreamError: "bad things"}, want: infer.ErrInput, text: "error 400: bad things"},
		{name: "routes missing", opt: remote.Options{Routing: true, ExpertsPerToken: 2}, reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop"}, want: infer.ErrBadOutput, text: "--enable-return-routed-experts"},
		{name: "routes rows", opt: remote.Options{Routing: true, ExpertsPerToken: 2}, reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", Routes: remotetest.Routes(4, 2, 2, func(int, int, int) int32 { return 1 })}, want: infer.ErrBadOutput, text: "routed experts"},
		{name: "routes expert id", opt: remote.Options{Routing: true, ExpertsPerToken: 2, Experts: 8}, reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", Routes: remotetest.Routes(5, 2, 2, func(r, l, j int) int32 { return int32(r * 2) })}, want: infer.ErrBadOutput, text: "routed expert 8 at token 4"},
		{name: "routes negative", opt: remote.Options{Routing: true, ExpertsPerToken: 2}, reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", Routes: remotetest.Routes(5, 2, 2, func(r, l, j int) int32 { return -1 })}, want: infer.ErrBadOutput, text: "routed expert -1"},
		{name: "routes k", only: "vLLM", opt: remote.Options{Routing: true, ExpertsPerToken: 3}, reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", Routes: remotetest.Routes(5, 2, 2, func(int, int, int) int32 { return 0 })}, want: infer.ErrBadOutput, text: "2 experts per token, want 3"},
		{name: "routes layers", opt: remote.Options{Routing: true, ExpertsPerToken: 2, MoELayers: []int{0, 5}}, reply: remotetest.Reply{Tokens: []int32{5, stop}, Finish: "stop", Routes: remotetest.Routes(5, 2, 2, func(int, int, int) int32 { return 0 })}, want: infer.ErrBadOutput, text: "names layer 5"},
	} {
		for _, s := range servers {
			if c.only != "" && c.only != s.name {
				continue
			}
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				_, e := start(t, s, c.opt, c.reply)
				g, _, err := run(t, e, context.Background(), request(4))
				if !errors.Is(err, c.want) {
					t.Fatalf("err %v (generation %v), want %v", err, g, c.want)
				}
				if !strings.Contains(err.Error(), c.text) {
					t.Errorf("err %q does not say %q", err, c.text)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("err spans lines: %q", err)
				}
				if g.Tokens != nil {
					t.Errorf("a failed generation returned tokens %v", g.Tokens)
				}
			})
		}
	}
}

func TestTimeouts(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name+"/ctx deadline", func(t *testing.T) {
			_, e := start(t, s, remote.Options{}, remotetest.Reply{Tokens: []int32{5}, Delay: time.Minute})
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			t0 := time.Now()
			_, _, err := run(t, e, ctx, request(1))
			if !errors.Is(err, remote.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v", err)
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
		t.Run(s.name+"/cancel mid-stream", func(t *testing.T) {
			fake := s.fake(t, func(remotetest.Request) remotetest.Reply {
				return remotetest.Reply{Tokens: []int32{5, 6, 7}, Delay: 200 * time.Millisecond}
			})
			e, err := s.make(fake.URL, remote.Options{VocabSize: vocab, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got []infer.Token
			_, err = e.Generate(ctx, request(3), func(tok infer.Token) {
				got = append(got, tok)
				cancel() // the caller gives up after the first token
			})
			if !errors.Is(err, remote.ErrUnavailable) || !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v", err)
			}
			if len(got) != 1 {
				t.Errorf("emitted %d tokens before the cancel", len(got))
			}
		})
		t.Run(s.name+"/connection refused", func(t *testing.T) {
			fake := s.fake(t, remotetest.Fixed(remotetest.Reply{}))
			url := fake.URL
			fake.Close()
			e, err := s.make(url, remote.Options{VocabSize: vocab, ConnectTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Generate(context.Background(), request(1), nil)
			if !errors.Is(err, remote.ErrUnavailable) || !strings.Contains(err.Error(), "connect") {
				t.Fatalf("err %v", err)
			}
		})
		t.Run(s.name+"/response too large", func(t *testing.T) {
			_, e := start(t, s, remote.Options{MaxResponseBytes: 64}, remotetest.Reply{Tokens: []int32{5}})
			_, _, err := run(t, e, context.Background(), request(1))
			if !errors.Is(err, infer.ErrBadOutput) || !strings.Contains(err.Error(), "MaxResponseBytes") {
				t.Fatalf("err %v", err)
			}
		})
	}
}

func TestRequestTimeout(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			_, e := start(t, s, remote.Options{Stream: true, RequestTimeout: 150 * time.Millisecond}, remotetest.Reply{Tokens: []int32{5, 6, 7}, Delay: 100 * time.Millisecond})
			var n int
			_, err := e.Generate(context.Background(), request(3), func(infer.Token) { n++ })
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, remote.ErrUnavailable) {
				t.Fatalf("err %v", err)
			}
			if n == 0 || n == 3 {
				t.Errorf("emitted %d tokens before the deadline", n)
			}
		})
	}
}

// TestRefused checks requests the adapter refuses itself: the server never
// sees them.
func TestRefused(t *testing.T) {
	sampling := func(temp, topP float64, topK int) infer.Request {
		r := request(2)
		r.Sampling = infer.Sampling{Temperature: temp, TopP: topP, TopK: topK}
		return r
	}
	for _, c := range []struct {
		name string
		only string
		opt  remote.Options
		req  infer.Request
		want error
	}{
		{name: "empty prompt", req: infer.Request{MaxTokens: 1, Sampling: infer.DefaultSampling(0)}, want: infer.ErrInput},
		{name: "prompt oov", req: infer.Request{Prompt: []int32{vocab}, MaxTokens: 1, Sampling: infer.DefaultSampling(0)}, want: infer.ErrInput},
		{name: "stop oov", req: infer.Request{Prompt: prompt, StopTokens: []int32{-1}, MaxTokens: 1, Sampling: infer.DefaultSampling(0)}, want: infer.ErrInput},
		{name: "temperature -1", req: sampling(-1, 1, 0), want: infer.ErrInput},
		{name: "temperature NaN", req: sampling(math.NaN(), 1, 0), want: infer.ErrInput},
		{name: "top-p 1.5", opt: remote.Options{Logprobs: remote.LogprobsProcessed}, req: sampling(1, 1.5, 0), want: infer.ErrInput},
		{name: "top-k -1", opt: remote.Options{Logprobs: remote.LogprobsProcessed}, req: sampling(1, 1, -1), want: infer.ErrInput},
		{name: "MaxTokens -1", req: infer.Request{Prompt: prompt, MaxTokens: -1, Sampling: infer.DefaultSampling(0)}, want: infer.ErrInput},
		{name: "MaxTokens 0 no context", req: request(0), want: infer.ErrInput},
		{name: "prompt fills context", opt: remote.Options{ContextLength: 4}, req: request(0), want: infer.ErrOverlong},
		{name: "SGLang prompt fills context", only: "SGLang", opt: remote.Options{ContextLength: 5}, req: request(0), want: infer.ErrOverlong},
		{name: "SGLang top-p", only: "SGLang", req: sampling(1, 0.9, 0), want: infer.ErrInput},
		{name: "SGLang top-k", only: "SGLang", req: sampling(1, 1, 1), want: infer.ErrInput},
		{name: "raw temperature", opt: remote.Options{Logprobs: remote.LogprobsRaw}, req: sampling(0.7, 1, 0), want: infer.ErrInput},
	} {
		for _, s := range servers {
			if c.only != "" && c.only != s.name {
				continue
			}
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				fake, e := start(t, s, c.opt, remotetest.Reply{Tokens: []int32{5}})
				_, _, err := run(t, e, context.Background(), c.req)
				if !errors.Is(err, c.want) {
					t.Fatalf("err %v, want %v", err, c.want)
				}
				if n := len(fake.Requests()); n != 0 {
					t.Errorf("the server saw %d requests", n)
				}
			})
		}
	}
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		url, want string
		make      func(string, remote.Options) (*remote.Engine, error)
	}{
		{"http://gpu:8000", "http://gpu:8000/v1/completions", remote.NewVLLM},
		{"http://gpu:8000/", "http://gpu:8000/v1/completions", remote.NewVLLM},
		{"https://gpu/v1", "https://gpu/v1/completions", remote.NewVLLM},
		{"http://gpu:30000/", "http://gpu:30000/generate", remote.NewSGLang},
	} {
		e, err := c.make(c.url, remote.Options{VocabSize: 10})
		if err != nil || e.URL() != c.want {
			t.Errorf("%s: %v %v", c.url, e, err)
		}
	}
	for name, c := range map[string]struct {
		url  string
		opt  remote.Options
		make func(string, remote.Options) (*remote.Engine, error)
	}{
		"no scheme":                {"gpu:8000", remote.Options{VocabSize: 10}, remote.NewVLLM},
		"no host":                  {"http://", remote.Options{VocabSize: 10}, remote.NewVLLM},
		"no vocab":                 {"http://gpu", remote.Options{}, remote.NewVLLM},
		"negative context":         {"http://gpu", remote.Options{VocabSize: 10, ContextLength: -1}, remote.NewVLLM},
		"SGLang routes without k":  {"http://gpu", remote.Options{VocabSize: 10, Routing: true}, remote.NewSGLang},
		"vLLM version from server": {"http://gpu", remote.Options{VocabSize: 10, VersionFromServer: true}, remote.NewVLLM},
		"MoE layers order":         {"http://gpu", remote.Options{VocabSize: 10, MoELayers: []int{2, 1}}, remote.NewVLLM},
		"logprobs mode":            {"http://gpu", remote.Options{VocabSize: 10, Logprobs: "exact"}, remote.NewVLLM},
	} {
		if _, err := c.make(c.url, c.opt); !errors.Is(err, infer.ErrInput) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// TestConcurrent runs many generations at once on one Engine.
func TestConcurrent(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			fake := s.fake(t, func(r remotetest.Request) remotetest.Reply {
				return remotetest.Reply{Tokens: []int32{int32(r.Seed%50) + 10, stop}, Finish: "stop"}
			})
			e, err := s.make(fake.URL, remote.Options{VocabSize: vocab, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, 16)
			for i := range errs {
				wg.Go(func() {
					req := request(4)
					req.Sampling.Seed = uint64(i)
					g, err := e.Generate(context.Background(), req, nil)
					if err == nil && (g.Tokens[0] != int32(i)+10 || g.Finish != infer.FinishStop) {
						err = errors.New("wrong generation")
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNoEmit allows a nil emit.
func TestNoEmit(t *testing.T) {
	for _, s := range servers {
		_, e := start(t, s, remote.Options{Routing: true, ExpertsPerToken: 1}, remotetest.Reply{Tokens: []int32{5}, Routes: remotetest.Routes(4, 1, 1, func(int, int, int) int32 { return 0 })})
		if _, err := e.Generate(context.Background(), request(1), nil); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	}
}
