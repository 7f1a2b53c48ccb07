package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
)

// templates are the chat templates --template names.
var templateNames = "qwen3 or qwen3-coder"

func templateByName(name string) (proxy.Template, error) {
	switch name {
	case "qwen3":
		return chat.Qwen3{}, nil
	case "qwen3-coder":
		return chat.Qwen3Coder{}, nil
	}
	return nil, fmt.Errorf("unknown --template %q: want %s", name, templateNames)
}

// policyDir is a loaded checkpoint folder: weights, tokenizer and the
// version its lineage.json records (0 without one).
type policyDir struct {
	model   *model.Model
	tok     *tokenizer.Tokenizer
	version int64
}

// loadPolicy reads an HF checkpoint folder (config.json, model.safetensors,
// tokenizer.json). A model whose vocabulary is larger than the tokenizer's
// (real Qwen3 checkpoints pad it) gets a warning: a sampled id past the
// tokenizer is bad output, and the call that sampled it fails.
func loadPolicy(dir, cmd string, stderr io.Writer) (*policyDir, error) {
	m, err := model.Load(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if v := m.Config().VocabSize; v > tok.VocabSize() {
		fmt.Fprintf(stderr, "legorl %s: warning: the model's vocab_size %d exceeds the tokenizer's %d ids; a sampled id past them is bad output (the call fails)\n", cmd, v, tok.VocabSize())
	}
	p := &policyDir{model: m, tok: tok}
	if p.version, err = checkpoint.Version(dir); err != nil {
		return nil, err
	}
	return p, nil
}
