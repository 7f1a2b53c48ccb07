package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sealed writes a checkpoint folder whose lineage.json records the sha256
// of each file, as the trainer seals one.
func sealed(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	h := Header{Format: Format, Version: 2, Parent: Parent{Version: 1}, Files: map[string]string{}}
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
	if err := os.WriteFile(filepath.Join(dir, File), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestVerify(t *testing.T) {
	files := map[string]string{"model.safetensors": strings.Repeat("weights ", 1000), "config.json": `{"vocab_size": 8}`,
		"optimizer.safetensors": "moments"}
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string // "" for a folder that verifies; else the error's tail
	}{
		{"intact", func(*testing.T, string) {}, ""},
		{"extra file", func(t *testing.T, dir string) { write(t, dir, "notes.txt", "not listed") }, ""},
		{"flipped byte", func(t *testing.T, dir string) {
			b := []byte(files["model.safetensors"])
			b[4000] ^= 0x01
			write(t, dir, "model.safetensors", string(b))
		}, "model.safetensors has sha256 "},
		{"truncated file", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "optimizer.safetensors"), 3); err != nil {
				t.Fatal(err)
			}
		}, "optimizer.safetensors has sha256 "},
		{"missing file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
				t.Fatal(err)
			}
		}, "config.json is missing (lineage.json lists it)"},
		{"folder in place of a file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "config.json"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "config.json: not a regular file (d---------)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := sealed(t, files)
			tt.damage(t, dir)
			h, err := Verify(dir)
			if v, verr := VerifiedVersion(dir); (verr == nil) != (err == nil) || err == nil && v != 2 {
				t.Errorf("VerifiedVersion: %d, %v; Verify said %v", v, verr, err)
			}
			if tt.want == "" {
				if err != nil || h == nil || h.Version != 2 {
					t.Fatalf("Verify: %+v, %v; want the header", h, err)
				}
				return
			}
			if !errors.Is(err, ErrDamaged) || h != nil {
				t.Fatalf("Verify: %+v, %v; want ErrDamaged", h, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "checkpoint: damaged: "+dir+string(filepath.Separator)) || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming %s/...%s", msg, dir, tt.want)
			}
		})
	}
}

func TestVerifyHeaders(t *testing.T) {
	dir := t.TempDir()
	if h, err := Verify(dir); h != nil || err != nil {
		t.Errorf("a folder without lineage.json: %+v, %v; want nil, nil", h, err)
	}
	write(t, dir, File, `{`)
	if _, err := Verify(dir); !errors.Is(err, ErrHeader) {
		t.Errorf("a lineage.json that is not JSON: %v, want ErrHeader", err)
	}
	write(t, dir, File, `{"format": "legorl-lineage/1", "version": 1, "files": {"../escape": "00"}}`)
	if _, err := Verify(dir); !errors.Is(err, ErrHeader) || !strings.Contains(err.Error(), `"../escape"`) {
		t.Errorf("a lineage.json naming a file outside the folder: %v, want ErrHeader naming it", err)
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
