package remote

import (
	"fmt"
	"math"
	"slices"

	"github.com/legorl/legorl/policy/infer"
)

// gen gathers one generation as the server's response or stream arrives and
// checks every piece of it before the caller sees it.
type gen struct {
	e    *Engine
	req  infer.Request
	pl   plan
	emit func(infer.Token)
	out  infer.Generation

	done   bool   // a finish reason arrived
	reason string // the server's finish reason: "stop" or "length"

	counted                bool // the server reported its token counts
	promptCount, completed int
	cached                 int
	echo                   []int64 // vLLM's prompt_token_ids, when sent

	routes       string // base64 routed experts, as sent
	promptRoutes string // vLLM releases that send prompt routes apart
}

// logprob checks one reported logprob: present, finite, at most 0 (allowing
// rounding), and not vLLM's -9999.0, which stands in for -Inf.
func logprob(n number) (float32, error) {
	switch {
	case !n.ok:
		return 0, fmt.Errorf("logprob is null (NaN or ±Inf on the server)")
	case math.IsNaN(n.v) || math.IsInf(n.v, 0):
		return 0, fmt.Errorf("logprob is %v", n.v)
	case n.v > 1e-3:
		return 0, fmt.Errorf("logprob %g > 0", n.v)
	case n.v <= -9999:
		return 0, fmt.Errorf("logprob %g: the sampled token had probability 0", n.v)
	}
	return float32(min(n.v, 0)), nil
}

// add checks a run of sampled tokens and appends it; a stream emits them at
// once.
func (g *gen) add(ids []int64, lps []number, version int64) error {
	e := g.e
	if len(ids) != len(lps) {
		return e.badOutput("%d token ids but %d logprobs", len(ids), len(lps))
	}
	if len(ids) == 0 {
		return nil
	}
	if g.done {
		return e.badOutput("%d tokens after the finish reason", len(ids))
	}
	n := len(g.out.Tokens)
	if n+len(ids) > g.pl.maxTokens {
		return e.badOutput("%d tokens, more than the %d asked for", n+len(ids), g.pl.maxTokens)
	}
	vals := make([]float32, len(ids))
	for i, id := range ids {
		switch {
		case id < 0:
			return e.badOutput("token %d is id %d, outside the vocabulary of %d", n+i, id, e.opt.VocabSize)
		case id >= int64(e.opt.VocabSize):
			return e.badOutput("token %d is id %d, past the tokenizer's %d ids: the server sampled the model's vocabulary padding "+
				"(serve a checkpoint trimmed to the tokenizer, legorl model trim; docs/USAGE.md, Remote engines)", n+i, id, e.opt.VocabSize)
		}
		v, err := logprob(lps[i])
		if err != nil {
			return e.badOutput("token %d (id %d): %v", n+i, id, err)
		}
		vals[i] = v
	}
	for i, id := range ids {
		g.out.Tokens = append(g.out.Tokens, int32(id))
		g.out.Logprobs = append(g.out.Logprobs, vals[i])
		g.out.Versions = append(g.out.Versions, version)
		if g.pl.stream && g.emit != nil {
			g.emit(infer.Token{ID: int32(id), Logprob: vals[i], Version: version})
		}
	}
	return nil
}

// setFinish records the server's finish reason.
func (g *gen) setFinish(reason string) error {
	if g.done {
		return g.e.badOutput("a second finish reason %q", reason)
	}
	g.done, g.reason = true, reason
	return nil
}

// finish checks the whole generation, attaches its routes and, when not
// streaming, emits its tokens.
func (g *gen) finish() (infer.Generation, error) {
	e := g.e
	p, c := len(g.req.Prompt), len(g.out.Tokens)
	if !g.done {
		return infer.Generation{}, e.badOutput("response without a finish reason")
	}
	if c == 0 {
		return infer.Generation{}, e.badOutput("finished (%q) without a token", g.reason)
	}
	stop := func(id int32) bool { return slices.Contains(g.req.StopTokens, id) }
	for i, id := range g.out.Tokens[:c-1] {
		if stop(id) {
			return infer.Generation{}, e.badOutput("token %d is stop token %d but the generation went on", i, id)
		}
	}
	switch {
	case stop(g.out.Tokens[c-1]) && (g.reason == "stop" || g.reason == "length"):
		g.out.Finish = infer.FinishStop
	case g.reason == "stop":
		return infer.Generation{}, e.badOutput("finish reason \"stop\" but the last token %d is not a stop token", g.out.Tokens[c-1])
	case g.reason == "length":
		if c != g.pl.maxTokens {
			return infer.Generation{}, e.badOutput("finish reason \"length\" after %d tokens, %d asked for", c, g.pl.maxTokens)
		}
		g.out.Finish = infer.FinishLength
		if g.pl.toContext {
			g.out.Finish = infer.FinishContext
		}
	default:
		return infer.Generation{}, e.badOutput("unknown finish reason %q", g.reason)
	}
	if g.counted && (g.promptCount != p || g.completed != c) {
		return infer.Generation{}, e.badOutput("server counts %d prompt and %d completion tokens, got %d and %d", g.promptCount, g.completed, p, c)
	}
	if g.echo != nil {
		if len(g.echo) != p {
			return infer.Generation{}, e.badOutput("server echoed a prompt of %d tokens, sent %d", len(g.echo), p)
		}
		for i, id := range g.echo {
			if id != int64(g.req.Prompt[i]) {
				return infer.Generation{}, e.badOutput("server echoed prompt token %d as %d, sent %d", i, id, g.req.Prompt[i])
			}
		}
	}
	if g.cached < 0 || g.cached > p {
		return infer.Generation{}, e.badOutput("%d cached tokens for a prompt of %d", g.cached, p)
	}
	g.out.PromptTokens, g.out.CachedTokens = p, g.cached
	if e.opt.Routing {
		if err := g.attachRoutes(); err != nil {
			return infer.Generation{}, err
		}
	}
	if !g.pl.stream && g.emit != nil {
		for i, id := range g.out.Tokens {
			t := infer.Token{ID: id, Logprob: g.out.Logprobs[i], Version: g.out.Versions[i]}
			if g.out.Routing != nil {
				t.Routing = g.out.Routing[i]
			}
			g.emit(t)
		}
	}
	return g.out, nil
}

// attachRoutes decodes the server's routed experts into PromptRouting (one
// entry per prompt token) and Routing (one per completion token; the last
// is nil, as that token never went through the model).
func (g *gen) attachRoutes() error {
	e := g.e
	p, c := len(g.req.Prompt), len(g.out.Tokens)
	rows := p + c - 1
	if g.routes == "" && g.promptRoutes == "" {
		return e.badOutput("no routed experts in the response: start the server with --enable-return-routed-experts")
	}
	var t routeTable
	var err error
	switch e.kind {
	case vllm:
		if g.promptRoutes != "" {
			if t, err = decodeNPYRoutes(g.promptRoutes); err != nil {
				return e.badOutput("prompt %v", err)
			}
		}
		if g.routes != "" {
			var u routeTable
			if u, err = decodeNPYRoutes(g.routes); err != nil {
				return e.badOutput("%v", err)
			}
			if t, err = t.concat(u); err != nil {
				return e.badOutput("routed experts: %v", err)
			}
		}
	case sglang:
		if t, err = decodeRawRoutes(g.routes, rows, e.opt.ExpertsPerToken); err != nil {
			return e.badOutput("%v", err)
		}
	}
	if t.rows != rows {
		return e.badOutput("routed experts for %d tokens, want %d (%d prompt + %d completion - 1)", t.rows, rows, p, c)
	}
	if t.layers == 0 || t.k == 0 {
		return e.badOutput("routed experts of shape (%d, %d, %d)", t.rows, t.layers, t.k)
	}
	if k := e.opt.ExpertsPerToken; k > 0 && t.k != k {
		return e.badOutput("routed experts have %d experts per token, want %d", t.k, k)
	}
	layers := e.opt.MoELayers
	if layers == nil {
		layers = make([]int, t.layers)
		for i := range layers {
			layers[i] = i
		}
	}
	if last := layers[len(layers)-1]; last >= t.layers {
		return e.badOutput("routed experts have %d layers; Options.MoELayers names layer %d", t.layers, last)
	}
	limit := int32(math.MaxInt16)
	if e.opt.Experts > 0 {
		limit = int32(min(e.opt.Experts-1, math.MaxInt16))
	}
	nl := len(layers)
	flat := make([]int16, rows*nl*t.k)
	perLayer := make([][]int16, rows*nl)
	table := make([][][]int16, rows)
	for r := range rows {
		table[r] = perLayer[r*nl : (r+1)*nl]
		for li, l := range layers {
			s := flat[(r*nl+li)*t.k : (r*nl+li+1)*t.k]
			for j := range s {
				v := t.at(r, l, j)
				if v < 0 || v > limit {
					return e.badOutput("routed expert %d at token %d, layer %d is outside [0, %d]", v, r, l, limit)
				}
				s[j] = int16(v)
			}
			table[r][li] = s
		}
	}
	g.out.PromptRouting = table[:p:p]
	g.out.Routing = make([][][]int16, c)
	copy(g.out.Routing, table[p:])
	return nil
}
