package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/trainer"
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
// (real Qwen3 checkpoints pad it) gets a note: the local engine samples
// only the tokenizer's ids (the model's Support), and a remote server must
// be set up to do the same (README, "Remote engines"). A tokenizer larger
// than the model gets a warning.
func loadPolicy(dir, cmd string, stderr io.Writer) (*policyDir, error) {
	m, err := model.Load(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	switch v := m.Config().VocabSize; {
	case v > tok.VocabSize():
		fmt.Fprintf(stderr, "legorl %s: note: the model's vocab_size %d pads past the tokenizer's %d ids: the engine samples only those (a remote server must too: README, Remote engines)\n", cmd, v, tok.VocabSize())
	case v < tok.VocabSize():
		fmt.Fprintf(stderr, "legorl %s: warning: the tokenizer's %d ids exceed the model's vocab_size %d: a prompt with an id past it is refused\n", cmd, tok.VocabSize(), v)
	}
	p := &policyDir{model: m, tok: tok}
	lin, err := trainer.ReadLineage(dir)
	if err != nil {
		return nil, err
	}
	if lin != nil {
		p.version = lin.Version
	}
	return p, nil
}
