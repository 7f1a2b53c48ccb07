package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       int64
		err        bool
	}{
		{"absent", "", 0, false},
		{"update", `{"format": "legorl-lineage/1", "run_id": "r", "iteration": 2, "version": 3, "parent": {"version": 2, "path": "p", "weights_sha256": "ab"}, "files": {"model.safetensors": "cd"}, "gate": {"pearson": 1}}`, 3, false},
		{"sft", `{"format": "legorl-lineage/1", "kind": "sft", "version": 1, "parent": {"version": 0}}`, 1, false},
		{"other format", `{"format": "other/1", "version": 3}`, 0, true},
		{"negative", `{"format": "legorl-lineage/1", "version": -1}`, 0, true},
		{"not json", `{`, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.body != "" {
				if err := os.WriteFile(filepath.Join(dir, File), []byte(tt.body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			v, err := Version(dir)
			if tt.err != (err != nil) || (err != nil && !errors.Is(err, ErrHeader)) {
				t.Fatalf("err %v, want error %v wrapping ErrHeader", err, tt.err)
			}
			if v != tt.want {
				t.Errorf("version %d, want %d", v, tt.want)
			}
			h, err := Read(dir)
			if err == nil && tt.name == "update" && (h.Parent.Version != 2 || h.Files["model.safetensors"] != "cd" || h.Iteration != 2) {
				t.Errorf("header %+v", h)
			}
		})
	}
}
