package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/safetensors"
)

// runModel dispatches `legorl model init|trim|logprobs`.
func runModel(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	sub := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"init":     runModelInit,
		"trim":     runModelTrim,
		"logprobs": runModelLogprobs,
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stderr, "usage: legorl model init --config config.json [--tokenizer tokenizer.json] --out DIR [--seed N] [--dtype f32|bf16]")
		fmt.Fprintln(stderr, "       legorl model trim --model DIR --out DIR   (vocab_size cut to the tokenizer's size, for vLLM/SGLang)")
		fmt.Fprintln(stderr, "       legorl model logprobs --model DIR --input FILE.jsonl   (one JSON line out per line in)")
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return errors.New("want a subcommand: init, trim or logprobs (see legorl model -h)")
	}
	f, ok := sub[args[0]]
	if !ok {
		return fmt.Errorf("unknown subcommand %q: want init, trim or logprobs", args[0])
	}
	return f(ctx, args[1:], stdout, stderr)
}

// runModelInit writes a randomly initialised checkpoint.
func runModelInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model init", stderr)
	cfgPath := fs.String("config", "", "HF config.json of a Qwen3 or Qwen3-MoE model (required)")
	tok := fs.String("tokenizer", "", "tokenizer.json to copy along, with the tokenizer files beside it")
	out := fs.String("out", "", "checkpoint folder to create; must not exist (required)")
	seed := fs.Uint64("seed", 0, "random seed of the initialisation")
	dtype := fs.String("dtype", "f32", "tensor type written: f32 or bf16")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *cfgPath == "" || *out == "" {
		return errors.New("--config and --out are required")
	}
	dt := map[string]safetensors.DType{"f32": safetensors.F32, "bf16": safetensors.BF16}[*dtype]
	if dt == "" {
		return fmt.Errorf("unknown --dtype %q: want f32 or bf16", *dtype)
	}
	if _, err := os.Stat(*out); err == nil {
		return fmt.Errorf("--out %s already exists", *out)
	}
	cfg, err := model.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	var toks []string
	if *tok != "" {
		if _, err := os.Stat(*tok); err != nil {
			return fmt.Errorf("--tokenizer: %w", err)
		}
		toks = append(toks, *tok)
		for _, n := range model.TokenizerFileNames {
			p := filepath.Join(filepath.Dir(*tok), n)
			if _, err := os.Stat(p); err == nil && n != filepath.Base(*tok) {
				toks = append(toks, p)
			}
		}
	}
	m, err := model.New(cfg, *seed)
	if err != nil {
		return err
	}
	if err := saveNew(m, *out, model.SaveOptions{DType: dt, TokenizerFiles: toks}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "legorl model init: wrote %s (%d parameters, %d layers, %d MoE layers, seed %d)\n",
		*out, m.NumParams(), cfg.NumHiddenLayers, cfg.MoELayers(), *seed)
	return nil
}

// saveNew writes m to the folder out, which must not exist, beside it first
// and renamed, so a failure leaves nothing.
func saveNew(m *model.Model, out string, opt model.SaveOptions) error {
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(out)), ".legorl-model-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := m.Save(tmp, opt); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// runModelTrim writes a copy of a checkpoint whose vocab_size is its
// tokenizer's size (model.Model.TrimVocab): what a vLLM or SGLang server
// must serve so that it never samples an id the tokenizer cannot decode.
func runModelTrim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model trim", stderr)
	dir := fs.String("model", "", "checkpoint folder (config.json, safetensors, tokenizer.json) (required)")
	out := fs.String("out", "", "checkpoint folder to create; must not exist (required)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return errors.New("--model and --out are required")
	}
	if _, err := os.Stat(*out); err == nil {
		return fmt.Errorf("--out %s already exists", *out)
	}
	if _, err := os.Stat(filepath.Join(*dir, model.TokenizerFile)); err != nil {
		return fmt.Errorf("--model %s: the tokenizer's size is the vocabulary to keep: %w", *dir, err)
	}
	m, err := model.Load(*dir)
	if err != nil {
		return err
	}
	from := m.Config().VocabSize
	if m.Support() == from {
		return fmt.Errorf("--model %s: nothing to trim: vocab_size %d is the tokenizer's size", *dir, from)
	}
	var toks []string
	for _, n := range model.TokenizerFileNames {
		p := filepath.Join(*dir, n)
		if _, err := os.Stat(p); err == nil {
			toks = append(toks, p)
		}
	}
	dt := safetensors.F32
	if m.Config().TorchDType == "bfloat16" {
		dt = safetensors.BF16 // exact: the weights were read from bf16
	}
	if err := saveNew(m.TrimVocab(), *out, model.SaveOptions{DType: dt, TokenizerFiles: toks}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "legorl model trim: wrote %s (vocab_size %d -> %d, the tokenizer's ids)\n", *out, from, m.Support())
	return nil
}

type logprobsIn struct {
	PromptIDs     []int32     `json:"prompt_ids"`
	CompletionIDs []int32     `json:"completion_ids"`
	Routing       [][][]int16 `json:"routing"`
	Temperature   float64     `json:"temperature"`
}

type logprobsOut struct {
	Logprobs []float32   `json:"logprobs"`
	Routing  [][][]int16 `json:"routing,omitempty"`
}

// runModelLogprobs scores completions with a checkpoint: the audit path and
// the cross-check against other implementations.
func runModelLogprobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model logprobs", stderr)
	dir := fs.String("model", "", "checkpoint folder (config.json + safetensors) (required)")
	input := fs.String("input", "", `JSON lines {"prompt_ids":[...],"completion_ids":[...],"routing":optional,"temperature":optional}; - for stdin (required)`)
	batch := fs.Int("batch", 16, "lines scored together (in parallel)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *dir == "" || *input == "" {
		return errors.New("--model and --input are required")
	}
	if *batch < 1 {
		return fmt.Errorf("--batch %d must be positive", *batch)
	}
	var r io.Reader = os.Stdin
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	m, err := model.Load(*dir)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	var seqs []model.Sequence
	first, line := 0, 0
	flush := func() error {
		if len(seqs) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := m.Logprobs(seqs)
		if err != nil {
			var bad int
			if _, scanErr := fmt.Sscanf(errAfter(err.Error(), "sequence "), "%d", &bad); scanErr == nil {
				return fmt.Errorf("line %d: %w", first+bad+1, err)
			}
			return err
		}
		for _, x := range res {
			b, err := json.Marshal(logprobsOut{Logprobs: x.Logprobs, Routing: x.Routing})
			if err != nil {
				return err
			}
			w.Write(append(b, '\n'))
		}
		seqs, first = seqs[:0], line
		return nil
	}
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			return fmt.Errorf("line %d: empty line", line)
		}
		var in logprobsIn
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return fmt.Errorf("line %d: %v", line, err)
		}
		seqs = append(seqs, model.Sequence{Prompt: in.PromptIDs, Completion: in.CompletionIDs, Routing: in.Routing, Temperature: in.Temperature})
		if len(seqs) == *batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", line+1, err)
	}
	return flush()
}

// errAfter returns the text of s after the first occurrence of marker, or "".
func errAfter(s, marker string) string {
	if i := bytes.Index([]byte(s), []byte(marker)); i >= 0 {
		return s[i+len(marker):]
	}
	return ""
}
