package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/checkpoint"
)

// TestDamagedPolicyRefused gives serve (local and remote engine) and eval
// a checkpoint whose weights lost a bit after its lineage sealed them:
// each refuses it with one line naming the file, before serving a token.
func TestDamagedPolicyRefused(t *testing.T) {
	suite, policy, self, store := evalFixture(t)
	sealPolicy(t, policy)
	weights := filepath.Join(policy, "model.safetensors")
	b, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0x04
	if err := os.WriteFile(weights, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--policy", policy, "--addr", "127.0.0.1:0"},
		{"serve", "--policy", policy, "--addr", "127.0.0.1:0", "--remote", "vllm", "--remote-url", "http://127.0.0.1:1"},
		{"eval", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "2", "--store", store, "--run", "ev",
			"--max-turns", "2", "--max-tokens", "16", "--agent", self},
	} {
		code, _, stderr := runCLI(t, testEnv(nil), args...)
		if code == 0 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "checkpoint: damaged: "+weights+" has sha256 ") {
			t.Errorf("%s: exit %d, stderr %q; want one line naming %s", args[0], code, stderr, weights)
		}
	}
}

// sealPolicy writes dir/lineage.json recording the sha256 of each file in
// dir, as the trainer seals a checkpoint.
func sealPolicy(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := checkpoint.Header{Format: checkpoint.Format, Version: 1, Files: map[string]string{}}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		h.Files[e.Name()] = hex.EncodeToString(sum[:])
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
