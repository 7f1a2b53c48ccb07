// Package model is the Qwen3-architecture transformer of the policy, dense
// and mixture-of-experts, in pure Go: forward passes that return the
// logprob of each completion token and the MoE routing, routing replay,
// a hand-written backward pass for every parameter, AdamW, a KV cache for
// incremental decoding, and checkpoints in the Hugging Face layout
// (config.json + model.safetensors with HF tensor names).
//
// Every float32 matrix product of the forward and backward passes goes
// through kernels.Sgemm; the model adds parallelism across sequences
// (Logprobs, Backward) and attention heads. Step, the batched inference
// step, builds its products from kernels.Dot instead, so that a token's
// results do not depend on the batch or chunk it runs in.
//
// The numerics follow the Hugging Face Qwen3 and Qwen3-MoE modeling code:
// RMSNorm before attention and MLP, grouped-query attention with a per-head
// RMSNorm on queries and keys, rotary embeddings in the rotate_half
// convention, SwiGLU MLPs, a softmax router over all experts with top-k
// selection and optional renormalisation. Internally every layer is generic
// over float32 and float64; the public Model is float32, and the float64
// instantiation exists for finite-difference gradient checks.
//
// A model scores only the ids of its support (Model.Support): the size of
// the checkpoint's tokenizer, which released checkpoints pad the
// vocabulary past. Every logit, logprob and gradient of the LM head is
// over the support; Load reads it from tokenizer.json.
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Sentinel errors of this package.
var (
	ErrConfig     = errors.New("model: bad config")
	ErrCheckpoint = errors.New("model: bad checkpoint")
	ErrInput      = errors.New("model: bad input")
)

// Config is the subset of a Hugging Face Qwen3 / Qwen3-MoE config.json the
// model uses. Fields it does not know are kept in Extra and written back.
type Config struct {
	ModelType             string  `json:"model_type"`
	VocabSize             int     `json:"vocab_size"`
	HiddenSize            int     `json:"hidden_size"`
	IntermediateSize      int     `json:"intermediate_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	NumKeyValueHeads      int     `json:"num_key_value_heads"`
	HeadDim               int     `json:"head_dim"`
	RMSNormEps            float64 `json:"rms_norm_eps"`
	RopeTheta             float64 `json:"rope_theta"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	TieWordEmbeddings     bool    `json:"tie_word_embeddings"`
	TorchDType            string  `json:"torch_dtype,omitempty"`
	HiddenAct             string  `json:"hidden_act,omitempty"`

	// Mixture of experts (Qwen3-MoE); NumExperts 0 means dense.
	NumExperts          int   `json:"num_experts,omitempty"`
	NumExpertsPerTok    int   `json:"num_experts_per_tok,omitempty"`
	NormTopKProb        bool  `json:"norm_topk_prob,omitempty"`
	MoEIntermediateSize int   `json:"moe_intermediate_size,omitempty"`
	DecoderSparseStep   int   `json:"decoder_sparse_step,omitempty"`
	MLPOnlyLayers       []int `json:"mlp_only_layers,omitempty"`

	// Extra holds every other field of config.json, written back unchanged.
	Extra map[string]json.RawMessage `json:"-"`
}

// knownKeys are the JSON keys of Config's fields plus those Validate checks.
var knownKeys = []string{"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
	"num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta",
	"max_position_embeddings", "tie_word_embeddings", "torch_dtype", "hidden_act", "num_experts",
	"num_experts_per_tok", "norm_topk_prob", "moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers"}

// ParseConfig decodes and validates a config.json. Missing head_dim
// defaults to hidden_size / num_attention_heads, missing
// num_key_value_heads to num_attention_heads, decoder_sparse_step to 1,
// rms_norm_eps to 1e-6 and rope_theta to 1e6.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	for k, v := range all {
		if !slices.Contains(knownKeys, k) {
			if c.Extra == nil {
				c.Extra = map[string]json.RawMessage{}
			}
			c.Extra[k] = v
		}
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.DecoderSparseStep == 0 {
		c.DecoderSparseStep = 1
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 1e6
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfig reads and validates a config.json file.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// MarshalJSON writes the known fields and Extra as one object.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config
	b, err := json.Marshal(plain(c))
	if err != nil {
		return nil, err
	}
	if len(c.Extra) == 0 {
		return b, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range c.Extra {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// Validate checks that the config describes a model this package runs.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	switch c.ModelType {
	case "", "qwen3", "qwen3_moe":
	default:
		return bad("model_type %q is not qwen3 or qwen3_moe", c.ModelType)
	}
	pos := []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim}, {"decoder_sparse_step", c.DecoderSparseStep},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return bad("%s must be positive, got %d", p.name, p.v)
		}
	}
	if c.HeadDim%2 != 0 {
		return bad("head_dim %d must be even for rotary embeddings", c.HeadDim)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return bad("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.VocabSize > 1<<31-1 {
		return bad("vocab_size %d does not fit int32 token ids", c.VocabSize)
	}
	if !(c.RMSNormEps > 0) || !(c.RopeTheta > 0) {
		return bad("rms_norm_eps and rope_theta must be positive, got %g and %g", c.RMSNormEps, c.RopeTheta)
	}
	if c.MaxPositionEmbeddings < 0 {
		return bad("max_position_embeddings %d is negative", c.MaxPositionEmbeddings)
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return bad("hidden_act %q is not silu", c.HiddenAct)
	}
	switch c.TorchDType {
	case "", "float32", "bfloat16", "float16":
	default:
		return bad("torch_dtype %q is not float32, bfloat16 or float16", c.TorchDType)
	}
	for _, k := range []string{"rope_scaling", "attention_bias", "use_sliding_window"} {
		if v, ok := c.Extra[k]; ok && string(v) != "null" && string(v) != "false" {
			return bad("%s %s is not supported", k, v)
		}
	}
	if c.NumExperts < 0 {
		return bad("num_experts %d is negative", c.NumExperts)
	}
	if c.NumExperts > 1<<15 {
		return bad("num_experts %d does not fit int16 expert ids", c.NumExperts)
	}
	for _, l := range c.MLPOnlyLayers {
		if l < 0 || l >= c.NumHiddenLayers {
			return bad("mlp_only_layers names layer %d of %d", l, c.NumHiddenLayers)
		}
	}
	if c.NumExperts > 0 && c.MoELayers() > 0 {
		if c.NumExpertsPerTok <= 0 || c.NumExpertsPerTok > c.NumExperts {
			return bad("num_experts_per_tok %d must be in 1..num_experts (%d)", c.NumExpertsPerTok, c.NumExperts)
		}
		if c.MoEIntermediateSize <= 0 {
			return bad("moe_intermediate_size must be positive, got %d", c.MoEIntermediateSize)
		}
	}
	if c.MoELayers() < c.NumHiddenLayers && c.IntermediateSize <= 0 {
		return bad("intermediate_size must be positive, got %d", c.IntermediateSize)
	}
	return nil
}

// IsMoE reports whether decoder layer l has a sparse MoE block instead of a
// dense MLP, by the rule of the HF code: the layer is not in mlp_only_layers,
// num_experts > 0 and (l+1) is a multiple of decoder_sparse_step.
func (c Config) IsMoE(l int) bool {
	if c.NumExperts <= 0 || slices.Contains(c.MLPOnlyLayers, l) {
		return false
	}
	step := c.DecoderSparseStep
	if step <= 0 {
		step = 1
	}
	return (l+1)%step == 0
}

// MoELayers returns the number of MoE layers: the routing of a token has
// one entry of K expert ids per MoE layer, in layer order.
func (c Config) MoELayers() int {
	n := 0
	for l := 0; l < c.NumHiddenLayers; l++ {
		if c.IsMoE(l) {
			n++
		}
	}
	return n
}
