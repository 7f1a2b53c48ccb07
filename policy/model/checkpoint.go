package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/safetensors"
	"github.com/legorl/legorl/policy/tokenizer"
)

// ConfigFile is the name of a checkpoint's config.
const ConfigFile = "config.json"

// TokenizerFile is the name of a checkpoint's tokenizer; its size is the
// model's Support.
const TokenizerFile = "tokenizer.json"

// TokenizerFileNames are the tokenizer files of an HF checkpoint folder that
// travel with the weights.
var TokenizerFileNames = []string{TokenizerFile, "tokenizer_config.json", "vocab.json", "merges.txt",
	"special_tokens_map.json", "added_tokens.json", "generation_config.json"}

// SaveOptions control Save.
type SaveOptions struct {
	// DType is the tensor type written: safetensors.F32 or BF16 (rounded to
	// nearest even). Defaults to F32.
	DType safetensors.DType
	// TokenizerFiles are copied into the folder under their base names.
	// Defaults to none.
	TokenizerFiles []string
}

// Save writes the model to dir in the Hugging Face layout: config.json and
// model.safetensors with HF tensor names, plus the tokenizer files. It
// creates dir if needed and replaces files of those names.
func (m *Model) Save(dir string, opt SaveOptions) error {
	if opt.DType == "" {
		opt.DType = safetensors.F32
	}
	cfg := m.cfg
	switch opt.DType {
	case safetensors.F32:
		cfg.TorchDType = "float32"
	case safetensors.BF16:
		cfg.TorchDType = "bfloat16"
	default:
		return fmt.Errorf("%w: cannot save as %q", safetensors.ErrDType, opt.DType)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	cb, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("model: encode config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), append(cb, '\n'), 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	ts := make([]safetensors.Tensor, len(m.p.all))
	for i, t := range m.p.all {
		ts[i] = safetensors.Tensor{Name: t.name, Shape: t.shape, Data: t.data}
	}
	if err := safetensors.WriteFile(filepath.Join(dir, safetensors.SingleFile), ts, opt.DType, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	for _, f := range opt.TokenizerFiles {
		if err := copyFile(f, filepath.Join(dir, filepath.Base(f))); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("model: tokenizer file: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("model: copy %s: %w", src, err)
	}
	return out.Close()
}

// Load reads a checkpoint folder in the Hugging Face layout: config.json and
// model.safetensors or a sharded model.safetensors.index.json, F32 or BF16.
// Every tensor the config implies must be present with its shape, and no
// other tensor may be; errors name the tensor. The model's Support is the
// size of the folder's tokenizer.json (tokenizer.LoadSize), capped at
// vocab_size; without a tokenizer.json it is vocab_size. A folder with a
// lineage.json is first checked against the sha256 it records of each file
// (checkpoint.Verify): a damaged checkpoint fails with
// checkpoint.ErrDamaged naming the file, before a byte of it is used.
func Load(dir string) (*Model, error) {
	if _, err := checkpoint.Verify(dir); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	cfg, err := LoadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	set, err := safetensors.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, dir, err)
	}
	p := newParams[float32](cfg)
	want := map[string]bool{}
	for _, t := range p.all {
		want[t.name] = true
		v, err := set.Float32(t.name, t.shape)
		if err != nil {
			if errors.Is(err, safetensors.ErrMissing) && t == p.lmHead && !cfg.TieWordEmbeddings {
				err = fmt.Errorf("%w (config.json has tie_word_embeddings false)", err)
			}
			return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, dir, err)
		}
		copy(t.data, v)
	}
	for _, name := range set.Names() {
		if !want[name] {
			hint := ""
			if name == "lm_head.weight" {
				hint = " (config.json has tie_word_embeddings true)"
			}
			return nil, fmt.Errorf("%w: %s: unexpected tensor %q for this config%s", ErrCheckpoint, dir, name, hint)
		}
	}
	if name := p.nonFinite(); name != "" {
		return nil, fmt.Errorf("%w: %s: tensor %q holds NaN or infinity", ErrCheckpoint, dir, name)
	}
	support, err := loadSupport(dir, cfg.VocabSize)
	if err != nil {
		return nil, err
	}
	return &Model{cfg: cfg, p: p, be: backend.NewCPU(), support: support}, nil
}

// TrimVocab returns a copy of m whose vocabulary is m's Support:
// vocab_size becomes Support() and the embedding and LM head keep their
// first Support() rows. It scores, samples and trains exactly as m does
// (the rows it drops are never an input the tokenizer makes, nor a logit
// m computes), so a server that knows nothing of the support (vLLM,
// SGLang) serves it without ever sampling an id the tokenizer cannot
// decode. The copy runs on m's backend.
func (m *Model) TrimVocab() *Model {
	cfg := m.cfg
	cfg.VocabSize = m.support
	cfg.MLPOnlyLayers = slices.Clone(cfg.MLPOnlyLayers)
	cfg.Extra = maps.Clone(cfg.Extra)
	p := newParams[float32](cfg)
	for i, t := range p.all { // the same tensors in the same order
		copy(t.data, m.p.all[i].data) // [vocab, hidden] ones: their first rows
	}
	return &Model{cfg: cfg, p: p, be: m.be, support: cfg.VocabSize}
}

// loadSupport returns the Support of a checkpoint in dir with vocab ids:
// the size of its tokenizer.json, at most vocab; vocab without one.
func loadSupport(dir string, vocab int) (int, error) {
	path := filepath.Join(dir, TokenizerFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return vocab, nil
	}
	n, err := tokenizer.LoadSize(path)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: the tokenizer's size bounds the ids the model samples: %w", ErrCheckpoint, dir, err)
	}
	return min(n, vocab), nil
}
