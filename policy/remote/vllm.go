package remote

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/legorl/legorl/policy/infer"
)

// vLLM's OpenAI-compatible /v1/completions, as documented in
// vllm/entrypoints/openai/completion/protocol.py (CompletionRequest,
// CompletionResponse, CompletionStreamResponse) and
// https://docs.vllm.ai/en/stable/serving/openai_compatible_server.html.

// vllmRequest is the request body. Every sampling field is sent, because
// vLLM fills the ones left out from the model's generation_config.json
// (Qwen3's has top_k 20, top_p 0.95), which would silently change the
// distribution.
type vllmRequest struct {
	Model             string  `json:"model,omitempty"`
	Prompt            []int32 `json:"prompt"` // token ids: no tokenization, no BOS added
	MaxTokens         int     `json:"max_tokens"`
	Temperature       float64 `json:"temperature"`
	TopP              float64 `json:"top_p"`
	TopK              int     `json:"top_k"` // -1: no cut
	MinP              float64 `json:"min_p"`
	RepetitionPenalty float64 `json:"repetition_penalty"`
	PresencePenalty   float64 `json:"presence_penalty"`
	FrequencyPenalty  float64 `json:"frequency_penalty"`
	Seed              int64   `json:"seed"`
	N                 int     `json:"n"`
	// Logprobs 1: the sampled token's logprob (and one alternative).
	Logprobs     int     `json:"logprobs"`
	StopTokenIDs []int32 `json:"stop_token_ids"`
	// IgnoreEOS: only StopTokenIDs end a generation, as in the contract
	// (otherwise vLLM also stops at the generation_config EOS ids).
	IgnoreEOS              bool               `json:"ignore_eos"`
	SkipSpecialTokens      bool               `json:"skip_special_tokens"`
	IncludeStopStrInOutput bool               `json:"include_stop_str_in_output"`
	ReturnTokensAsTokenIDs bool               `json:"return_tokens_as_token_ids"` // logprobs.tokens are "token_id:N"
	ReturnTokenIDs         bool               `json:"return_token_ids"`           // choices[].token_ids, prompt_token_ids
	Stream                 bool               `json:"stream"`
	StreamOptions          *vllmStreamOptions `json:"stream_options,omitempty"`
}

type vllmStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func (e *Engine) vllmRequest(req infer.Request, pl plan) vllmRequest {
	stop := req.StopTokens
	if stop == nil {
		stop = []int32{}
	}
	r := vllmRequest{
		Model:                  e.opt.Model,
		Prompt:                 req.Prompt,
		MaxTokens:              pl.maxTokens,
		Temperature:            pl.temperature,
		TopP:                   pl.topP,
		TopK:                   pl.topK,
		RepetitionPenalty:      1,
		Seed:                   int64(req.Sampling.Seed), // vLLM takes any int64
		N:                      1,
		Logprobs:               1,
		StopTokenIDs:           stop,
		IgnoreEOS:              true,
		IncludeStopStrInOutput: true,
		ReturnTokensAsTokenIDs: true,
		ReturnTokenIDs:         true,
		Stream:                 pl.stream,
	}
	if pl.stream {
		r.StreamOptions = &vllmStreamOptions{IncludeUsage: true}
	}
	return r
}

type vllmLogprobs struct {
	Tokens        []string `json:"tokens"`
	TokenLogprobs []number `json:"token_logprobs"`
}

type vllmChoice struct {
	Index          int           `json:"index"`
	Logprobs       *vllmLogprobs `json:"logprobs"`
	FinishReason   *string       `json:"finish_reason"`
	TokenIDs       []int64       `json:"token_ids"`
	PromptTokenIDs []int64       `json:"prompt_token_ids"`
	// RoutedExperts: base64 of np.save of (tokens-1, layers, k), from
	// servers started with --enable-return-routed-experts; non-streaming
	// responses only.
	RoutedExperts *string `json:"routed_experts"`
}

type vllmUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// vllmResponse is a response body or one stream chunk; an error body or
// error event fills the embedded wireError instead.
type vllmResponse struct {
	wireError
	Choices []vllmChoice `json:"choices"`
	Usage   *vllmUsage   `json:"usage"`
	// PromptRoutedExperts: some releases (0.21) send the prompt's routes
	// here and the completion's on the choice.
	PromptRoutedExperts *string `json:"prompt_routed_experts"`
}

func (e *Engine) vllmResponse(data []byte, g *gen) error {
	var r vllmResponse
	if err := decodeJSON(data, &r); err != nil {
		return e.badOutput("malformed JSON response: %v", err)
	}
	if r.present() {
		return e.eventErr(&r.wireError)
	}
	if len(r.Choices) != 1 {
		return e.badOutput("%d choices, want 1", len(r.Choices))
	}
	if err := e.vllmChoice(&r.Choices[0], g); err != nil {
		return err
	}
	if r.PromptRoutedExperts != nil {
		g.promptRoutes = *r.PromptRoutedExperts
	}
	e.vllmUsage(r.Usage, g)
	return nil
}

func (e *Engine) vllmChunk(data []byte, g *gen) error {
	var r vllmResponse
	if err := decodeJSON(data, &r); err != nil {
		return e.badOutput("malformed JSON in stream: %v", err)
	}
	if r.present() {
		return e.eventErr(&r.wireError)
	}
	switch len(r.Choices) {
	case 0: // the usage chunk
	case 1:
		if err := e.vllmChoice(&r.Choices[0], g); err != nil {
			return err
		}
	default:
		return e.badOutput("stream chunk with %d choices, want 1", len(r.Choices))
	}
	e.vllmUsage(r.Usage, g)
	return nil
}

func (e *Engine) vllmUsage(u *vllmUsage, g *gen) {
	if u == nil {
		return
	}
	g.counted, g.promptCount, g.completed = true, u.PromptTokens, u.CompletionTokens
	if u.PromptTokensDetails != nil {
		g.cached = u.PromptTokensDetails.CachedTokens
	}
}

func (e *Engine) vllmChoice(ch *vllmChoice, g *gen) error {
	if ch.Index != 0 {
		return e.badOutput("choice index %d, want 0", ch.Index)
	}
	ids := ch.TokenIDs
	var lps []number
	if ch.Logprobs != nil {
		lps = ch.Logprobs.TokenLogprobs
		named := make([]int64, len(ch.Logprobs.Tokens))
		for i, t := range ch.Logprobs.Tokens {
			s, ok := strings.CutPrefix(t, "token_id:")
			n, err := strconv.ParseInt(s, 10, 64)
			if !ok || err != nil {
				return e.badOutput("logprobs token %q is not \"token_id:N\" (does the server honour return_tokens_as_token_ids?)", t)
			}
			named[i] = n
		}
		switch {
		case ids == nil:
			ids = named
		case !slices.Equal(ids, named):
			return e.badOutput("token_ids %v disagree with the logprobs tokens %v", clip(ids), clip(named))
		}
	} else if len(ids) > 0 {
		return e.badOutput("%d tokens without logprobs", len(ids))
	}
	if ch.PromptTokenIDs != nil {
		if g.echo != nil {
			return e.badOutput("prompt_token_ids sent twice")
		}
		g.echo = ch.PromptTokenIDs
	}
	if err := g.add(ids, lps, g.pl.version); err != nil {
		return err
	}
	if ch.RoutedExperts != nil {
		g.routes = *ch.RoutedExperts
	}
	if ch.FinishReason == nil {
		return nil
	}
	switch r := *ch.FinishReason; r {
	case "stop", "length":
		return g.setFinish(r)
	case "abort", "error":
		return fmt.Errorf("%w: %s: the server ended the request (finish reason %q)", ErrUnavailable, e.name, r)
	default:
		return e.badOutput("unknown finish reason %q", r)
	}
}

// clip shortens a token list for an error message.
func clip(ids []int64) []int64 {
	if len(ids) > 8 {
		return ids[:8]
	}
	return ids
}
