package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/model"
)

const modelTestConfig = `{"model_type":"qwen3_moe","vocab_size":50,"hidden_size":16,"intermediate_size":24,
"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":8,"rms_norm_eps":1e-6,
"rope_theta":10000,"tie_word_embeddings":true,"num_experts":4,"num_experts_per_tok":2,"norm_topk_prob":true,
"moe_intermediate_size":8,"mlp_only_layers":[0],"bos_token_id":1}`

// TestModelInitAndLogprobs initialises a checkpoint with the CLI, scores
// lines with it (free and replayed routing) and checks the output against
// the library.
func TestModelInitAndLogprobs(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(modelTestConfig), 0o644)
	tokDir := t.TempDir()
	os.WriteFile(filepath.Join(tokDir, "tokenizer.json"), []byte(`{"model":{"vocab":{"a":49}}}`), 0o644) // vocab_size 50: no padding
	os.WriteFile(filepath.Join(tokDir, "tokenizer_config.json"), []byte(`{}`), 0o644)
	out := filepath.Join(dir, "ckpt")
	env := testEnv(nil)
	code, stdout, stderr := runCLI(t, env, "model", "init", "--config", cfg, "--tokenizer", filepath.Join(tokDir, "tokenizer.json"), "--out", out, "--seed", "7")
	if code != 0 || !strings.Contains(stdout, "1 MoE layers") {
		t.Fatalf("init: %d %q %q", code, stdout, stderr)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("checkpoint lacks %s", f)
		}
	}
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(`{"prompt_ids":[1,2,3],"completion_ids":[4,5,6]}
{"prompt_ids":[9],"completion_ids":[8,7],"temperature":0.5,"routing":[[[0,1]],[[2,3]],[[3,0]]]}
`), 0o644)
	code, stdout, stderr = runCLI(t, env, "model", "logprobs", "--model", out, "--input", in)
	if code != 0 {
		t.Fatalf("logprobs: %d %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d output lines: %q", len(lines), stdout)
	}
	m, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Logprobs([]model.Sequence{
		{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, 6}},
		{Prompt: []int32{9}, Completion: []int32{8, 7}, Temperature: 0.5, Routing: [][][]int16{{{0, 1}}, {{2, 3}}, {{3, 0}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		var got logprobsOut
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(logprobsOut{Logprobs: want[i].Logprobs, Routing: want[i].Routing})
		if string(g) != string(w) || len(got.Routing) != 3+3*(1-i) {
			t.Errorf("line %d: %s, want %s", i, g, w)
		}
	}
	if !strings.Contains(lines[1], `"routing":[[[0,1]],[[2,3]],[[3,0]]]`) {
		t.Errorf("replayed routing not echoed: %s", lines[1])
	}
}

func TestModelBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(modelTestConfig), 0o644)
	ckpt := filepath.Join(dir, "ckpt")
	if code, _, stderr := runCLI(t, testEnv(nil), "model", "init", "--config", cfg, "--out", ckpt); code != 0 {
		t.Fatal(stderr)
	}
	badCfg := filepath.Join(dir, "bad.json")
	os.WriteFile(badCfg, []byte(`{"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":3}`), 0o644)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"model"}, "want a subcommand"},
		{"unknown subcommand", []string{"model", "train"}, `unknown subcommand "train"`},
		{"init flags", []string{"model", "init", "--config", cfg}, "--config and --out are required"},
		{"init exists", []string{"model", "init", "--config", cfg, "--out", ckpt}, "already exists"},
		{"init bad config", []string{"model", "init", "--config", badCfg, "--out", filepath.Join(dir, "x")}, "intermediate_size must be positive"},
		{"init dtype", []string{"model", "init", "--config", cfg, "--out", filepath.Join(dir, "y"), "--dtype", "f16"}, `unknown --dtype "f16"`},
		{"no model", []string{"model", "logprobs", "--model", dir, "--input", cfg}, "model.safetensors"},
		{"bad json", []string{"model", "logprobs", "--model", ckpt, "--input", write("a.jsonl", "{\"prompt_ids\":[1]}\n{\n")}, "line 2:"},
		{"unknown field", []string{"model", "logprobs", "--model", ckpt, "--input", write("b.jsonl", `{"prompt":[1]}`)}, `line 1: json: unknown field "prompt"`},
		{"bad id", []string{"model", "logprobs", "--model", ckpt, "--input", write("c.jsonl", "{\"prompt_ids\":[1],\"completion_ids\":[2]}\n{\"prompt_ids\":[1],\"completion_ids\":[50]}\n")}, "line 2: model: bad input: sequence 1: completion token 0 is id 50"},
		{"bad routing", []string{"model", "logprobs", "--model", ckpt, "--input", write("d.jsonl", `{"prompt_ids":[1],"completion_ids":[2],"routing":[[[0,1]]]}`)}, "routing has 1 tokens, the sequence 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, testEnv(nil), tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want %q", code, stderr, tc.want)
			}
		})
	}
}
