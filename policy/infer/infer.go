// Package infer is the generation contract: what a caller asks an engine
// for (Request, Sampling) and what it gets back (Token as it streams,
// Generation at the end, the sentinel errors). The local engine
// (policy/engine) and the vLLM/SGLang adapters (policy/remote) implement
// it; the proxy and the rollout runner consume it without importing
// either engine.
//
// The one-method interface a consumer needs is declared by that consumer
// (proxy.Generator): Generate(ctx, Request, func(Token)) (Generation, error).
package infer

import (
	"errors"
	"fmt"
	"math"
)

// Sentinel errors; every error an engine (local or remote) returns wraps
// one of them. Their text still says "engine", the role they describe.
var (
	// ErrInput: a request the engine cannot run (empty prompt, token id
	// outside the vocabulary, bad sampling settings).
	ErrInput = errors.New("engine: bad request")
	// ErrOverlong: the prompt leaves no room to generate within the model's
	// context (max_position_embeddings). The proxy marks the rollout
	// overlong.
	ErrOverlong = errors.New("engine: context overflow")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("engine: closed")
	// ErrBadOutput: an engine produced a NaN/Inf logprob or a token id
	// outside the vocabulary (a remote engine, or a broken checkpoint).
	ErrBadOutput = errors.New("engine: bad output")
)

// Sampling is how each token of a generation is drawn. Training rollouts use
// temperature 1, top-p 1 and no top-k (DefaultSampling); other settings are
// recorded with the data. Every setting draws from the model's support
// only (model.Model.Support, the tokenizer's ids).
type Sampling struct {
	// Temperature divides the logits: positive, or 0 for the default 1 (the
	// zero Sampling is the training default; 0 does not mean greedy).
	// Greedy decoding is TopK 1 (every logprob is then 0: the distribution
	// drawn from is a point mass).
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP, in (0, 1]; 0 means 1 (no cut).
	TopP float64
	// TopK keeps the K most likely tokens; 0 means no cut.
	TopK int
	// Seed makes the generation reproducible: the same seed, weights and
	// prompt give the same tokens, whatever else runs concurrently. The
	// i-th token's random number is a hash of (Seed, i).
	Seed uint64
}

// DefaultSampling is the training default: temperature 1, top-p 1, no top-k.
func DefaultSampling(seed uint64) Sampling { return Sampling{Temperature: 1, TopP: 1, Seed: seed} }

// Normalize fills in the defaults of a Sampling: temperature 0 and top-p 0
// mean 1.
func (s Sampling) Normalize() Sampling {
	if s.Temperature == 0 {
		s.Temperature = 1
	}
	if s.TopP == 0 {
		s.TopP = 1
	}
	return s
}

// Validate checks normalized settings; the message names the bad field and
// wraps ErrInput.
func (s Sampling) Validate() error {
	switch {
	case !(s.Temperature > 0) || math.IsInf(s.Temperature, 0):
		return fmt.Errorf("%w: Sampling.Temperature %g is not a positive number", ErrInput, s.Temperature)
	case !(s.TopP > 0 && s.TopP <= 1):
		return fmt.Errorf("%w: Sampling.TopP %g is outside (0, 1]", ErrInput, s.TopP)
	case s.TopK < 0:
		return fmt.Errorf("%w: Sampling.TopK %d is negative", ErrInput, s.TopK)
	}
	return nil
}

// Request is one generation.
type Request struct {
	// Session groups the requests of one conversation (one rollout): a
	// request whose prompt begins with the previous request's prompt and
	// completion reuses that KV cache and only prefills the rest. Empty
	// means no reuse.
	Session string
	// Prompt is the full prompt, token ids; at least one.
	Prompt []int32
	// MaxTokens bounds the completion; 0 means up to the context limit.
	MaxTokens int
	// StopTokens end the generation; the stop token is part of the
	// completion (it was sampled and carries a logprob).
	StopTokens []int32
	Sampling   Sampling
}

// Token is one sampled token, as it is streamed to the caller.
type Token struct {
	ID int32
	// Logprob is log p(ID) under exactly the distribution ID was drawn from
	// (after temperature, top-k and top-p renormalisation).
	Logprob float32
	// Routing is the experts of this token in every MoE layer, [layers][k];
	// nil for a dense model. It is known once the token has run through the
	// model, one step after it was sampled, so an MoE model streams each
	// token one step later than a dense one.
	Routing [][]int16
	// Version is the policy version whose weights produced the token.
	Version int64
}

// Finish reasons of a Generation.
const (
	FinishStop   = "stop"   // a stop token was sampled
	FinishLength = "length" // MaxTokens reached
	// FinishContext: the context (max_position_embeddings) filled up before
	// a stop token or MaxTokens; the proxy marks the rollout overlong.
	FinishContext = "context"
)

// Generation is the result of one Request.
type Generation struct {
	// Tokens, Logprobs, Versions and Routing have one entry per completion
	// token.
	Tokens   []int32
	Logprobs []float32
	Versions []int64
	Routing  [][][]int16 // [tokens][MoE layers][k]; nil for a dense model
	// PromptRouting is the routing of every prompt token (cached ones
	// included, as computed when they entered the cache); nil for dense.
	// Routing and PromptRouting are those of the KV cache the last token
	// was computed with: for a generation that spans a swap, the cache was
	// recomputed with the new weights, so both hold the new version's
	// routing, and tokens streamed before the swap carried the old one.
	PromptRouting [][][]int16
	Finish        string
	// PromptTokens is len(Prompt); CachedTokens how many of them were
	// reused from a cache instead of prefilled: the session's own, or a
	// copy of another session's holding a longer prefix.
	PromptTokens, CachedTokens int
}
