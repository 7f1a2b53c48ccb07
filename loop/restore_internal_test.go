package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/storage"
)

// TestResumeVerifies damages the checkpoint of a finished update in the
// ways a disk or a killed copy does, and wants the resumed loop to rebuild
// it from the store's copy when that copy is whole, or to stop with one
// line naming the damaged file.
func TestResumeVerifies(t *testing.T) {
	files := map[string]string{"model.safetensors": strings.Repeat("w", 4096), "optimizer.safetensors": "moments",
		"config.json": `{"vocab_size": 8}`}
	flip := func(t *testing.T, dir string) {
		p := filepath.Join(dir, "model.safetensors")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[100] ^= 1
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	truncate := func(t *testing.T, dir string) {
		if err := os.Truncate(filepath.Join(dir, "optimizer.safetensors"), 2); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	const (
		intact  = iota // published whole
		absent         // never published
		damaged        // published after the damage
	)
	for _, tt := range []struct {
		name      string
		damage    func(t *testing.T, dir string)
		published int
		want      string // "" when the folder ends whole; else the error's text
	}{
		{"intact", nil, intact, ""},
		{"flipped byte, rebuilt", flip, intact, ""},
		{"truncated file, rebuilt", truncate, intact, ""},
		{"missing file, rebuilt", remove("config.json"), intact, ""},
		{"missing lineage, rebuilt", remove(checkpoint.File), intact, ""},
		{"flipped byte, never published", flip, absent,
			"checkpoint: damaged: DIR/model.safetensors has sha256 XXX, lineage.json records XXX; not rebuilt from the store: storage: object not found: nothing published under runs/r/checkpoints/v000002/"},
		{"truncated file, store's copy damaged too", truncate, damaged,
			"checkpoint: damaged: DIR/optimizer.safetensors has sha256 XXX, lineage.json records XXX; not rebuilt from the store: the store's copy: checkpoint: damaged: DIR.restore/optimizer.safetensors has sha256 XXX, lineage.json records XXX"},
		{"missing file, never published", remove("config.json"), absent,
			"checkpoint: damaged: DIR/config.json is missing (lineage.json lists it); not rebuilt from the store: storage: object not found: nothing published under runs/r/checkpoints/v000002/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := storage.NewFileStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			l := &looper{cfg: Config{Run: "r"}, o: Options{Log: &log}, st: st}
			dir := filepath.Join(t.TempDir(), "iter-000002")
			sealCheckpoint(t, dir, files)
			if tt.published == intact {
				if err := l.publish(ctx, dir); err != nil {
					t.Fatal(err)
				}
			}
			if tt.damage != nil {
				tt.damage(t, dir)
			}
			if tt.published == damaged {
				if err := l.publish(ctx, dir); err != nil {
					t.Fatal(err)
				}
			}
			err = l.verified(ctx, dir, 2)
			if _, serr := os.Stat(dir + ".restore"); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s.restore left behind (%v)", dir, serr)
			}
			if tt.want != "" {
				got := ""
				if err != nil {
					got = hexes.ReplaceAllString(strings.ReplaceAll(err.Error(), dir, "DIR"), "XXX")
				}
				if got != tt.want || !errors.Is(err, checkpoint.ErrDamaged) {
					t.Fatalf("verified:\n got %s\nwant %s", got, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for n, body := range files {
				if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(b) != body {
					t.Errorf("%s after the resume: %d bytes, %v; want the sealed %d", n, len(b), err, len(body))
				}
			}
			if rebuilt := strings.Contains(log.String(), "rebuilt from the store's copy (runs/r/checkpoints/v000002/)"); rebuilt != (tt.damage != nil) {
				t.Errorf("log %q: rebuilt %v, want %v", log.String(), rebuilt, tt.damage != nil)
			}
		})
	}
}

// sealCheckpoint writes files into dir with a lineage.json of policy
// version 2 recording their sha256, as an update seals its checkpoint.
func sealCheckpoint(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := checkpoint.Header{Format: checkpoint.Format, RunID: "r", Iteration: 1, Version: 2, Parent: checkpoint.Parent{Version: 1},
		Files: map[string]string{}}
	for n, body := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(body))
		h.Files[n] = hex.EncodeToString(sum[:])
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

var hexes = regexp.MustCompile(`\b[0-9a-f]{12}\b`)
