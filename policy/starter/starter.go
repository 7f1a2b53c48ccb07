// Package starter holds the starter checkpoints committed to the
// repository, the way RL libraries start from a pretrained model: RL runs
// and the demo begin from one instead of training their own warm start.
//
// bash-sft is the SFT stage of docs/results/bash-pools.json: a
// 0.5M-parameter Qwen3 (vocabulary 1024) warm-started on the scripted bash
// solver's demonstrations of the sft split of the built-in suite (2,000
// Python instances, seed 1) until its probe pass@1 entered the 20-50% band.
// Any prefix of that suite (seed 1, n <= 2000, or more: the split of an
// instance depends on its id only) keeps its held-out tasks unseen.
// `make starter` remakes it and checks the bytes against bash-sft.sha256.
//
// bash-sed is the SFT stage of docs/results/bash-sed.json: the same model
// warm-started on demonstrations where multi-line inserts are written as
// sed (sft.sed_inserts), 3,000-instance suite, seed 1, probe band
// [0.25, 0.5] (reached after 14 epochs). It solves every trained family
// but wrong_constant. `make starter STARTER=bash-sed` remakes it.
//
// bash-early is the SFT stage of docs/results/bash-early.json: bash-sed's
// SFT (the same demonstrations, seed and schedule, bit for bit the same
// steps) stopped at the first probe at or above 15% over 64 tasks, after
// 12 epochs (probe 0.234; 0.141 after 10), to ask whether RL gains more
// from a less sharpened start. `make starter STARTER=bash-early` remakes it.
//
// tools-sft is the SFT stage of docs/results/tools-raft.json (and of
// tools-k32.json, the same bytes): the same model warm-started on the
// scripted tools solver's demonstrations (OpenAI-style tool calls) of the
// sft split of a 6,000-instance suite, seed 1, probe band [0.25, 0.5]
// (reached after 6 epochs, loss 0.046). `make starter STARTER=tools-sft`
// remakes it.
//
// tools-copy is the SFT stage of docs/results/tools-copy.json: tools-sft's
// SFT (the same demonstrations, model and band) with copy drills
// (trainer.CopyDrills: 600 steps of drills alone, then 4 in every step), so
// the model can copy a span of its context (probe band reached after 5
// epochs, 0.375, loss 0.049). `make starter STARTER=tools-copy` remakes it.
//
// tools-induct is the SFT stage of docs/results/tools-induct.json:
// tools-sft's SFT after 1,500 steps of 64 copy drills of random layouts
// and with 8 in every step, so the model copies by content (an induction
// head; probe band reached after 3 epochs, 0.281, loss 0.023).
// `make starter STARTER=tools-induct` remakes it.
//
// pi-sft is the SFT stage of docs/results/pi-raft-lr3.json: the same model
// warm-started on the real pi program's demonstrations (pi's own system
// prompt and tool schemas, its clock pinned) of the sft split of a
// 3,000-instance suite, seed 1, probe band [0.25, 0.5] (reached after
// 10 epochs, loss 0.038). `make starter STARTER=pi-sft` remakes it (it
// needs Node.js, and installs the pinned pi package).
package starter

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed bash-sft/config.json bash-sft/model.safetensors bash-sft/tokenizer.json bash-sft/lineage.json bash-sft.sha256
//go:embed bash-sed/config.json bash-sed/model.safetensors bash-sed/tokenizer.json bash-sed/lineage.json bash-sed.sha256
//go:embed tools-sft/config.json tools-sft/model.safetensors tools-sft/tokenizer.json tools-sft/lineage.json tools-sft.sha256
//go:embed tools-copy/config.json tools-copy/model.safetensors tools-copy/tokenizer.json tools-copy/lineage.json tools-copy.sha256
//go:embed tools-induct/config.json tools-induct/model.safetensors tools-induct/tokenizer.json tools-induct/lineage.json tools-induct.sha256
//go:embed bash-early/config.json bash-early/model.safetensors bash-early/tokenizer.json bash-early/lineage.json bash-early.sha256
//go:embed pi-sft/config.json pi-sft/model.safetensors pi-sft/tokenizer.json pi-sft/lineage.json pi-sft.sha256
var files embed.FS

// Prefix marks a starter in a loop config's policy: "starter:bash-sft".
const Prefix = "starter:"

// ErrUnknown is returned for a starter name this build does not hold.
var ErrUnknown = errors.New("starter: no such starter")

// Names lists the starters.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Sums returns the sha256 of each hashed file of starter name (weights,
// config, tokenizer; lineage.json records paths and times and is not
// hashed).
func Sums(name string) (map[string]string, error) {
	b, err := files.ReadFile(name + ".sha256")
	if err != nil {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("starter: %s.sha256: bad line %q", name, sc.Text())
		}
		sums[file] = sum
	}
	return sums, nil
}

// Install writes starter name into dir and returns dir. Every hashed
// file, embedded or already in dir (an earlier install, resumed), must
// match its sha256; a dir holding other bytes is an error, not overwritten.
func Install(name, dir string) (string, error) {
	sums, err := Sums(name)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); err == nil {
		return dir, check(name, sums, func(f string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, f)) }, dir)
	}
	embedded := func(f string) ([]byte, error) { return files.ReadFile(name + "/" + f) }
	if err := check(name, sums, embedded, "the embedded copy"); err != nil {
		return "", err
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("starter: %w", err)
	}
	ents, err := fs.ReadDir(files, name)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		b, err := embedded(e.Name())
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644); err != nil {
			return "", fmt.Errorf("starter: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("starter: %w", err)
	}
	return dir, nil
}

func check(name string, sums map[string]string, read func(string) ([]byte, error), where string) error {
	for file, want := range sums {
		b, err := read(file)
		if err != nil {
			return fmt.Errorf("starter %s: %s: %w", name, where, err)
		}
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != want {
			return fmt.Errorf("starter %s: %s/%s has sha256 %s, want %s", name, where, file, hex.EncodeToString(got[:])[:16], want[:16])
		}
	}
	return nil
}
