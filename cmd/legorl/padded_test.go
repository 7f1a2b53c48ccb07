package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/remote/remotetest"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks/builtin"
	"github.com/legorl/legorl/trainer"
)

// paddedPolicy makes a random-weight checkpoint with `legorl model init`
// whose vocab_size is four times the test tokenizer's ids, as released
// checkpoints pad theirs (Qwen3: 151936 for 151,669 ids): without the
// model's support, three sampled tokens in four would be ids the tokenizer
// cannot decode. It returns the folder and the tokenizer.
func paddedPolicy(t *testing.T) (string, *tokenizer.Tokenizer) {
	t.Helper()
	return initPolicy(t, 4, "--seed", "4")
}

// TestServePaddedVocabulary serves a padded checkpoint: every chat call is
// answered (none fails on an undecodable id), and the recorded segments
// hold sampled tokens, every one an id of the tokenizer.
func TestServePaddedVocabulary(t *testing.T) {
	policy, tok := paddedPolicy(t)
	store := "file://" + filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, stderr, done := startServe(t, ctx, "--policy", policy, "--addr", "127.0.0.1:0", "--record", store,
		"--run", "pad", "--flush", "1h", "--max-tokens", "24", "--seed", "3")
	for i := range 4 {
		body := fmt.Sprintf(`{"model": "any", "messages": [{"role": "user", "content": "question %d"}]}`, i)
		resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: status %d: %s", i, resp.StatusCode, b)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	if want := fmt.Sprintf("pads past the tokenizer's %d ids", tok.VocabSize()); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks the note %q", stderr.String(), want)
	}
	st, err := storage.Open(context.Background(), store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := storage.TableFiles(context.Background(), st, "pad", "segments")
	if err != nil || len(files) != 1 {
		t.Fatalf("%d segments files: %v", len(files), err)
	}
	segs, err := storage.ReadRows[schemas.Segment](context.Background(), st, files[0])
	if err != nil || len(segs) != 4 {
		t.Fatalf("%d segments, %v; want one per call", len(segs), err)
	}
	for i, s := range segs {
		sampled := 0
		for _, m := range s.LossMask {
			sampled += int(m)
		}
		if err := s.Validate(tok.VocabSize()); err != nil || sampled == 0 {
			t.Errorf("segment %d: %v, %d sampled tokens", i, err, sampled)
		}
	}
}

// TestRolloutGroupPaddedVocabulary runs `legorl rollout --group 2` with
// the bash agent on a padded checkpoint: no rollout is masked (before the
// model's support every one was, harness_error: the engine sampled ids the
// tokenizer cannot decode), the segments hold sampled tokens, `legorl
// train` trains on them with the train-inference check passing, and
// `legorl audit` recomputes the same logprobs.
func TestRolloutGroupPaddedVocabulary(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 2, Seed: 8, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy, tok := paddedPolicy(t)
	self, _ := os.Executable()
	store := "file://" + filepath.Join(dir, "store")
	code, stdout, stderr := runCLI(t, testEnv(nil), "rollout", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "2",
		"--store", store, "--run", "pad", "--max-turns", "2", "--max-tokens", "16", "--agent", self)
	t.Log(strings.TrimSpace(stdout))
	if code != 0 {
		t.Fatalf("rollout: exit %d: %s", code, stderr)
	}
	st, err := storage.Open(context.Background(), store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LoadConfig(filepath.Join(policy, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := trainer.Load(context.Background(), st, "pad", 0, trainer.LoadOptions{Model: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(data.Masked) != 0 || len(data.Rollouts) < 2 {
		t.Fatalf("%d completed rollouts, masked %v; want none masked", len(data.Rollouts), data.Masked)
	}
	sampled := 0
	for _, s := range data.Samples {
		for i, m := range s.Mask {
			if m == 1 {
				sampled++
				if int(s.Completion[i]) >= tok.VocabSize() {
					t.Fatalf("%s: sampled id %d, past the tokenizer's %d", s.Source, s.Completion[i], tok.VocabSize())
				}
			}
		}
	}
	if sampled == 0 {
		t.Fatal("the segments hold no sampled token")
	}
	ckpt := filepath.Join(dir, "v1")
	code, stdout, stderr = runCLI(t, testEnv(nil), "train", "--store", store, "--run", "pad", "--iteration", "0", "--policy", policy, "--out", ckpt)
	t.Log(strings.TrimSpace(stdout))
	if code != 0 || !strings.Contains(stdout, "policy v0 -> v1") {
		t.Fatalf("train: exit %d: %s %s", code, stdout, stderr)
	}
	lin, err := trainer.ReadLineage(ckpt)
	if err != nil || lin == nil {
		t.Fatalf("lineage: %v", err)
	}
	m, err := model.Load(ckpt)
	if err != nil || m.Support() != tok.VocabSize() {
		t.Fatalf("the new checkpoint: %v, support %d, want the tokenizer's %d", err, m.Support(), tok.VocabSize())
	}
	code, stdout, stderr = runCLI(t, testEnv(nil), "audit", "--store", store, "--run", "pad", "--checkpoints", policy+","+ckpt)
	t.Log(stdout)
	if code != 0 || !strings.Contains(stdout, "ok   logprobs   iteration 0, version 0") {
		t.Fatalf("audit: exit %d: %s %s", code, stdout, stderr)
	}
	var line struct{ Logprobs []float32 }
	in := filepath.Join(dir, "padded.jsonl")
	os.WriteFile(in, []byte(fmt.Sprintf(`{"prompt_ids":[1,2],"completion_ids":[3,%d]}`+"\n", tok.VocabSize())), 0o644)
	if code, _, stderr := runCLI(t, testEnv(nil), "model", "logprobs", "--model", policy, "--input", in); code == 0 ||
		!strings.Contains(stderr, fmt.Sprintf("outside the model's support of %d ids", tok.VocabSize())) {
		t.Errorf("model logprobs of a padded id: exit %d: %s", code, stderr)
	}
	os.WriteFile(in, []byte(`{"prompt_ids":[1,2],"completion_ids":[3,4]}`+"\n"), 0o644)
	code, stdout, stderr = runCLI(t, testEnv(nil), "model", "logprobs", "--model", policy, "--input", in)
	if code != 0 || json.Unmarshal([]byte(stdout), &line) != nil || len(line.Logprobs) != 2 {
		t.Errorf("model logprobs: exit %d: %s %s", code, stdout, stderr)
	}
}

// TestServeRemotePaddedID serves a padded checkpoint through a fake vLLM
// and a fake SGLang server that sample an id of the padding: the call
// fails, and the error the client gets names the id, the tokenizer's size
// and the fix.
func TestServeRemotePaddedID(t *testing.T) {
	policy, tok := paddedPolicy(t)
	bad := int32(tok.VocabSize() + 5)
	for _, kind := range []string{"vllm", "sglang"} {
		t.Run(kind, func(t *testing.T) {
			reply := remotetest.Fixed(remotetest.Reply{Tokens: []int32{7, bad}})
			fake := map[string]func(testing.TB, func(remotetest.Request) remotetest.Reply) *remotetest.Server{
				"vllm": remotetest.NewVLLM, "sglang": remotetest.NewSGLang}[kind](t, reply)
			defer fake.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			url, _, done := startServe(t, ctx, "--policy", policy, "--addr", "127.0.0.1:0",
				"--remote", kind, "--remote-url", fake.URL, "--max-tokens", "8")
			resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(`{"model": "any", "messages": [{"role": "user", "content": "hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf("token 1 is id %d, past the tokenizer's %d ids: the server sampled the model's vocabulary padding", bad, tok.VocabSize())
			if resp.StatusCode != 500 || !strings.Contains(string(body), want) || !strings.Contains(string(body), "legorl model trim") {
				t.Errorf("status %d: %s; want 500 with %q", resp.StatusCode, body, want)
			}
			cancel()
			<-done
		})
	}
}

// TestModelTrim cuts a padded checkpoint to its tokenizer's ids: the copy
// has vocab_size the tokenizer's size and scores every line as the padded
// checkpoint does; what cannot be trimmed is a one-line error.
func TestModelTrim(t *testing.T) {
	policy, tok := paddedPolicy(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "trimmed")
	code, stdout, stderr := runCLI(t, testEnv(nil), "model", "trim", "--model", policy, "--out", out)
	if want := fmt.Sprintf("vocab_size %d -> %d", 4*tok.VocabSize(), tok.VocabSize()); code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("trim: exit %d: %q %q; want %q", code, stdout, stderr, want)
	}
	m, err := model.Load(out)
	if err != nil || m.Config().VocabSize != tok.VocabSize() || m.Support() != tok.VocabSize() {
		t.Fatalf("trimmed: %v, vocab_size %d", err, m.Config().VocabSize)
	}
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(fmt.Sprintf(`{"prompt_ids":[1,2,3],"completion_ids":[4,%d,0]}`+"\n", tok.VocabSize()-1)), 0o644)
	var scored []string
	for _, p := range []string{policy, out} {
		code, stdout, stderr := runCLI(t, testEnv(nil), "model", "logprobs", "--model", p, "--input", in)
		if code != 0 {
			t.Fatalf("logprobs of %s: %s", p, stderr)
		}
		scored = append(scored, stdout)
	}
	if scored[0] != scored[1] {
		t.Errorf("the trimmed checkpoint scores %s, the padded one %s", scored[1], scored[0])
	}
	bare := filepath.Join(dir, "bare")
	os.MkdirAll(bare, 0o755)
	for _, f := range []string{"config.json", "model.safetensors"} {
		data, _ := os.ReadFile(filepath.Join(policy, f))
		os.WriteFile(filepath.Join(bare, f), data, 0o644)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"already trimmed", []string{"--model", out, "--out", filepath.Join(dir, "again")}, "nothing to trim"},
		{"no tokenizer", []string{"--model", bare, "--out", filepath.Join(dir, "x")}, "the tokenizer's size is the vocabulary to keep"},
		{"out exists", []string{"--model", policy, "--out", out}, "already exists"},
		{"no out", []string{"--model", policy}, "--model and --out are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, testEnv(nil), append([]string{"model", "trim"}, tt.args...)...)
			if code != 2 || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("exit %d: %q; want one line with %q", code, stderr, tt.want)
			}
		})
	}
}
