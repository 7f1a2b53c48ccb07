package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/legorl/legorl/policy/infer"
)

// SGLang's native /generate, as documented in
// https://docs.sglang.ai/basic_usage/sampling_params.html and
// https://docs.sglang.ai/basic_usage/native_api.html (GenerateReqInput in
// python/sglang/srt/managers/io_struct.py); the response's meta_info is
// built in the tokenizer manager's output processor.

type sglangRequest struct {
	InputIDs       []int32        `json:"input_ids"`
	SamplingParams sglangSampling `json:"sampling_params"`
	ReturnLogprob  bool           `json:"return_logprob"`
	// LogprobStartLen -1: logprobs of the output tokens only.
	LogprobStartLen int  `json:"logprob_start_len"`
	Stream          bool `json:"stream"`
	// ReturnRoutedExperts needs a server started with
	// --enable-return-routed-experts; left out when false so servers
	// without the feature accept the request.
	ReturnRoutedExperts bool `json:"return_routed_experts,omitempty"`
}

// sglangSampling sends every field that shapes the distribution: SGLang
// takes the ones left out from generation_config.json by default
// (--sampling-defaults model).
type sglangSampling struct {
	MaxNewTokens      int     `json:"max_new_tokens"`
	Temperature       float64 `json:"temperature"`
	TopP              float64 `json:"top_p"`
	TopK              int     `json:"top_k"` // -1: no cut
	MinP              float64 `json:"min_p"`
	RepetitionPenalty float64 `json:"repetition_penalty"`
	FrequencyPenalty  float64 `json:"frequency_penalty"`
	PresencePenalty   float64 `json:"presence_penalty"`
	StopTokenIDs      []int32 `json:"stop_token_ids"`
	// IgnoreEOS: only StopTokenIDs end a generation, as in the contract.
	IgnoreEOS bool `json:"ignore_eos"`
	// NoStopTrim keeps the matched stop token in output_ids.
	NoStopTrim        bool  `json:"no_stop_trim"`
	SkipSpecialTokens bool  `json:"skip_special_tokens"`
	SamplingSeed      int64 `json:"sampling_seed"`
}

func (e *Engine) sglangRequest(req infer.Request, pl plan) sglangRequest {
	stop := req.StopTokens
	if stop == nil {
		stop = []int32{}
	}
	return sglangRequest{
		InputIDs: req.Prompt,
		SamplingParams: sglangSampling{
			MaxNewTokens:      pl.maxTokens,
			Temperature:       pl.temperature,
			TopP:              pl.topP,
			TopK:              pl.topK,
			RepetitionPenalty: 1,
			StopTokenIDs:      stop,
			IgnoreEOS:         true,
			NoStopTrim:        true,
			SamplingSeed:      int64(req.Sampling.Seed),
		},
		ReturnLogprob:       true,
		LogprobStartLen:     -1,
		Stream:              pl.stream,
		ReturnRoutedExperts: e.opt.Routing,
	}
}

// sglangLogprob is one entry of meta_info.output_token_logprobs:
// [logprob, token_id, text-or-null].
type sglangLogprob struct {
	lp number
	id int64
}

func (t *sglangLogprob) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	if len(parts) < 2 {
		return fmt.Errorf("logprob entry %s, want [logprob, token_id, text]", b)
	}
	if err := t.lp.UnmarshalJSON(parts[0]); err != nil {
		return err
	}
	return json.Unmarshal(parts[1], &t.id)
}

// sglangFinish is meta_info.finish_reason: {"type": "stop", "matched":
// <token id or string>}, {"type": "length", "length": N} or {"type":
// "abort", "message": ..., "status_code": ...}; null until the end.
type sglangFinish struct {
	Type       string          `json:"type"`
	Matched    json.RawMessage `json:"matched"`
	Message    string          `json:"message"`
	StatusCode int             `json:"status_code"`
}

type sglangMeta struct {
	FinishReason        *sglangFinish   `json:"finish_reason"`
	PromptTokens        *int            `json:"prompt_tokens"`
	CompletionTokens    *int            `json:"completion_tokens"`
	CachedTokens        int             `json:"cached_tokens"`
	WeightVersion       json.RawMessage `json:"weight_version"`
	OutputTokenLogprobs []sglangLogprob `json:"output_token_logprobs"`
	// RoutedExperts: base64 of the flattened int32 array (tokens-1,
	// layers, k), from servers started with --enable-return-routed-experts.
	RoutedExperts *string `json:"routed_experts"`
}

type sglangResponse struct {
	wireError
	OutputIDs []int64     `json:"output_ids"`
	MetaInfo  *sglangMeta `json:"meta_info"`
}

func (e *Engine) sglangResponse(data []byte, g *gen) error {
	var r sglangResponse
	var err error
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		var list []sglangResponse
		if err = decodeJSON(t, &list); err == nil && len(list) != 1 {
			return e.badOutput("%d outputs, want 1", len(list))
		}
		if err == nil {
			r = list[0]
		}
	} else {
		err = decodeJSON(data, &r)
	}
	if err != nil {
		return e.badOutput("malformed JSON response: %v", err)
	}
	return e.sglangOutput(&r, g)
}

func (e *Engine) sglangChunk(data []byte, g *gen) error {
	var r sglangResponse
	if err := decodeJSON(data, &r); err != nil {
		return e.badOutput("malformed JSON in stream: %v", err)
	}
	return e.sglangOutput(&r, g)
}

// sglangOutput takes one response or stream chunk. A streamed chunk is
// cumulative (output_ids and output_token_logprobs hold everything so far,
// SGLang's default) or incremental (--incremental-streaming-output); which
// one is told apart by meta_info.completion_tokens, the total so far.
func (e *Engine) sglangOutput(r *sglangResponse, g *gen) error {
	if r.present() {
		return e.eventErr(&r.wireError)
	}
	m := r.MetaInfo
	if m == nil {
		return e.badOutput("response without meta_info")
	}
	if f := m.FinishReason; f != nil && f.Type == "abort" {
		w := wireError{Message: f.Message}
		if f.StatusCode != 0 {
			w.Code = json.RawMessage(strconv.Itoa(f.StatusCode))
		}
		if w.Message == "" {
			w.Message = "request aborted"
		}
		return e.eventErr(&w)
	}
	if m.CompletionTokens == nil || m.PromptTokens == nil {
		return e.badOutput("meta_info without prompt_tokens and completion_tokens")
	}
	n, k, c := len(g.out.Tokens), len(m.OutputTokenLogprobs), *m.CompletionTokens
	lps, ids := m.OutputTokenLogprobs, r.OutputIDs
	switch {
	case c == n+k && (n == 0 || k != c): // first chunk, or an increment
	case c == k && k >= n: // cumulative: skip what was seen
		for i, t := range lps[:n] {
			if int32(t.id) != g.out.Tokens[i] || t.id != int64(int32(t.id)) {
				return e.badOutput("stream chunk changes token %d from %d to %d", i, g.out.Tokens[i], t.id)
			}
		}
		lps = lps[n:]
		if ids != nil {
			if len(ids) < n {
				return e.badOutput("stream chunk with %d output_ids after %d tokens", len(ids), n)
			}
			ids = ids[n:]
		}
	default:
		return e.badOutput("%d logprob entries with completion_tokens %d after %d tokens", k, c, n)
	}
	fresh := make([]int64, len(lps))
	vals := make([]number, len(lps))
	for i, t := range lps {
		fresh[i], vals[i] = t.id, t.lp
	}
	if ids != nil {
		trimmed := len(ids) == len(fresh)-1 && m.FinishReason != nil && m.FinishReason.Type == "stop"
		if (len(ids) != len(fresh) && !trimmed) || !equalPrefix(ids, fresh) {
			return e.badOutput("output_ids %v disagree with output_token_logprobs %v", clip(ids), clip(fresh))
		}
	}
	version := g.pl.version
	if e.opt.VersionFromServer {
		v, err := weightVersion(m.WeightVersion)
		if err != nil {
			return e.badOutput("%v", err)
		}
		version = v
	}
	if err := g.add(fresh, vals, version); err != nil {
		return err
	}
	g.counted, g.promptCount, g.completed = true, *m.PromptTokens, c
	g.cached = m.CachedTokens
	if m.RoutedExperts != nil && *m.RoutedExperts != "" {
		g.routes = *m.RoutedExperts
	}
	if f := m.FinishReason; f != nil {
		switch f.Type {
		case "stop", "length":
			return g.setFinish(f.Type)
		default:
			return e.badOutput("unknown finish reason %q", f.Type)
		}
	}
	return nil
}

// equalPrefix reports whether a is a prefix of b.
func equalPrefix(a, b []int64) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// weightVersion reads meta_info.weight_version as a policy version.
func weightVersion(raw json.RawMessage) (int64, error) {
	s := strings.TrimSpace(string(raw))
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if s == "" || s == "null" {
			s = "missing"
		}
		return 0, fmt.Errorf("weight_version %s is not an integer (start SGLang with --weight-version N)", s)
	}
	return v, nil
}
