package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

const testTokenizerPath = "../../policy/tokenizer/testdata/small/tokenizer.json"

// testPolicy makes a random-weight checkpoint with `legorl model init`
// whose vocab_size is the test tokenizer's (policy/model/testdata/tiny.json
// has 4096, past this tokenizer's ids, which a random model samples).
func testPolicy(t *testing.T) string {
	t.Helper()
	policy, _ := initPolicy(t, 1)
	return policy
}

// initPolicy makes a tiny random-weight Qwen3 checkpoint with `legorl model
// init` (args added to its flags) whose vocab_size is pad times the test
// tokenizer's ids. It returns the folder and the tokenizer.
func initPolicy(t *testing.T, pad int, args ...string) (string, *tokenizer.Tokenizer) {
	t.Helper()
	dir := t.TempDir()
	tok, err := tokenizer.Load(testTokenizerPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": %d, "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"max_position_embeddings": 4096, "tie_word_embeddings": true}`, pad*tok.VocabSize())), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy")
	argv := append([]string{"model", "init", "--config", cfg, "--tokenizer", testTokenizerPath, "--out", policy}, args...)
	if code, _, stderr := runCLI(t, testEnv(nil), argv...); code != 0 {
		t.Fatal(stderr)
	}
	return policy, tok
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startServe runs `legorl serve` with args until ctx ends. It returns the
// API's URL (.../v1) from the banner, the command's stderr and a channel
// that gets its exit code.
func startServe(t *testing.T, ctx context.Context, args ...string) (url string, stderr *syncBuffer, done <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	stderr = &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, testEnv(nil), append([]string{"serve"}, args...), pw, stderr)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("no banner; stderr %q", stderr.String())
	}
	_, url, ok := strings.Cut(lines.Text(), " at ")
	if !ok || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("banner %q", lines.Text())
	}
	go io.Copy(io.Discard, pr)
	return url, stderr, code
}

// TestServe runs `legorl serve` with a random-weight policy: a chat call is
// answered, a periodic flush and the shutdown flush each write a segments
// file, and the recorded completion decodes to exactly what the client got.
func TestServe(t *testing.T) {
	policy := testPolicy(t)
	store := "file://" + filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, stderr, done := startServe(t, ctx, "--policy", policy, "--addr", "127.0.0.1:0", "--record", store,
		"--run", "srv", "--flush", "200ms", "--max-tokens", "12", "--seed", "3")

	chat := func(content string) string {
		body := fmt.Sprintf(`{"model": "any", "messages": [{"role": "user", "content": %q}]}`, content)
		resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct{ Content, ReasoningContent string }
			}
		}
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Choices) != 1 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return out.Choices[0].Message.Content
	}
	st, err := storage.Open(ctx, store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files := func() []storage.FileEntry {
		fs, err := storage.TableFiles(context.Background(), st, "srv", "segments")
		if err != nil && !errors.Is(err, storage.ErrNoData) {
			t.Fatal(err)
		}
		return fs
	}
	var replies []string
	replies = append(replies, chat("hello"))
	for deadline := time.Now().Add(20 * time.Second); len(files()) < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no periodic flush; stderr %q", stderr.String())
		}
	}
	replies = append(replies, chat("again"))
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := files()
	if len(got) != 2 {
		t.Fatalf("%d segments files, want 2: %+v", len(got), got)
	}
	tok, _ := tokenizer.Load(testTokenizerPath)
	for i, e := range got {
		segs, err := storage.ReadRows[schemas.Segment](context.Background(), st, e)
		if err != nil || len(segs) != 1 {
			t.Fatalf("file %d: %d segments, %v", i, len(segs), err)
		}
		s := segs[0]
		if err := s.Validate(tok.VocabSize()); err != nil || s.RolloutID != fmt.Sprintf("serve-%06d", i) || s.RunID != "srv" {
			t.Errorf("file %d: %v, rollout %q run %q", i, err, s.RolloutID, s.RunID)
		}
		prompt, _ := tok.Decode(s.PromptTokenIDs)
		completion, _ := tok.Decode(s.CompletionTokenIDs)
		if want := []string{"hello", "again"}[i]; !strings.Contains(string(prompt), want) {
			t.Errorf("file %d: prompt %q lacks %q", i, prompt, want)
		}
		// JSON carries each byte of invalid UTF-8 as U+FFFD.
		if !strings.Contains(jsonText(completion), replies[i]) {
			t.Errorf("file %d: completion %q does not hold the reply %q", i, completion, replies[i])
		}
	}
}

// TestServeToken runs `legorl serve --token-file`: requests without the
// token, or with another, get 401 and generate nothing; with it (as an
// OpenAI bearer token or an Anthropic x-api-key) they are served, /metrics
// included. Without --token-file (TestServe) requests need no token.
func TestServeToken(t *testing.T) {
	policy := testPolicy(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, stderr, done := startServe(t, ctx, "--policy", policy, "--addr", "127.0.0.1:0", "--max-tokens", "4", "--token-file", tokenFile)
	base := strings.TrimSuffix(url, "/v1")
	call := func(path string, header ...string) int {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{"model": "any", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}`))
		if path == "/metrics" {
			req.Method = "GET"
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path   string
		header []string
		want   int
	}{
		{"/v1/chat/completions", nil, 401},
		{"/v1/chat/completions", []string{"Authorization", "Bearer wrong"}, 401},
		{"/v1/messages", []string{"x-api-key", "t0ken-4"}, 401},
		{"/metrics", nil, 401},
		{"/v1/chat/completions", []string{"Authorization", "Bearer t0ken-42"}, 200},
		{"/v1/messages", []string{"x-api-key", "t0ken-42", "anthropic-version", "2023-06-01"}, 200},
		{"/metrics", []string{"Authorization", "Bearer t0ken-42"}, 200},
	} {
		if got := call(tc.path, tc.header...); got != tc.want {
			t.Errorf("%s %v: status %d, want %d", tc.path, tc.header, got, tc.want)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "exposed") {
		t.Errorf("a loopback serve printed an exposure: %q", stderr.String())
	}
}

func TestServeBadInput(t *testing.T) {
	policy := testPolicy(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--policy is required"},
		{[]string{"--policy", policy, "--template", "llama"}, "unknown --template"},
		{[]string{"--policy", policy, "--remote", "tgi"}, "unknown --remote"},
		{[]string{"--policy", policy, "--remote", "vllm"}, "needs --remote-url"},
		{[]string{"--policy", policy, "--flush", "0s"}, "--flush"},
		{[]string{"--policy", policy, "--top-p", "1.5"}, "top"},
		{[]string{"--policy", policy, "--addr", "256.0.0.1:1"}, "listen: bad address"},
		{[]string{"--policy", policy, "--addr", "10.0.0.1:8000"}, "add --expose to mean it"},
		{[]string{"--policy", policy, "--addr", ":8000"}, "every interface"},
		{[]string{"--policy", policy, "--token-file", filepath.Join(t.TempDir(), "none")}, "proxy: token file"},
		{[]string{"--policy", t.TempDir()}, "config.json"},
		{[]string{"--policy", policy, "--compute", "tpu"}, `unknown backend "tpu"`},
	} {
		code, _, stderr := runCLI(t, testEnv(nil), append([]string{"serve"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// jsonText is b as encoding/json sends it: each byte of invalid UTF-8
// becomes U+FFFD.
func jsonText(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out.WriteRune(r) // utf8.RuneError is U+FFFD
		b = b[n:]
	}
	return out.String()
}
