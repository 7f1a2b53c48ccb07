package starter_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/starter"
)

func TestInstall(t *testing.T) {
	if got := strings.Join(starter.Names(), ","); got != "bash-early,bash-sed,bash-sft,pi-sft,tools-copy,tools-induct,tools-sft" {
		t.Fatalf("starters %q", got)
	}
	for _, name := range starter.Names() {
		d := filepath.Join(t.TempDir(), name)
		if _, err := starter.Install(name, d); err != nil {
			t.Fatal(err)
		}
		cfg, err := model.LoadConfig(filepath.Join(d, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.VocabSize != 1024 || cfg.HiddenSize != 128 {
			t.Errorf("%s: config %+v", name, cfg)
		}
	}
	dir := filepath.Join(t.TempDir(), "bash-sft")
	if _, err := starter.Install("bash-sft", dir); err != nil {
		t.Fatal(err)
	}
	// Installing again over the same bytes is a no-op; other bytes are refused.
	if _, err := starter.Install("bash-sft", dir); err != nil {
		t.Fatalf("reinstall: %v", err)
	}
	f := filepath.Join(dir, "model.safetensors")
	b, _ := os.ReadFile(f)
	b[len(b)-1] ^= 1
	os.WriteFile(f, b, 0o644)
	if _, err := starter.Install("bash-sft", dir); err == nil || !strings.Contains(err.Error(), "model.safetensors has sha256") {
		t.Errorf("a changed weight file: err %v", err)
	}
	if _, err := starter.Install("nope", t.TempDir()+"/x"); !errors.Is(err, starter.ErrUnknown) {
		t.Errorf("unknown starter: %v", err)
	}
}
