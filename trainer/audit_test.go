package trainer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/storage"
)

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestAuditLineage: a checkpoint passes when every file and, for the
// audited run, every data manifest and file its lineage lists has the
// recorded sha256; each kind of mismatch fails and names what differs.
func TestAuditLineage(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	manifest, data := []byte(`{"manifest": 1}`), []byte("parquet bytes")
	for key, b := range map[string][]byte{"runs/r/manifests/m.json": manifest, "runs/r/data/f.parquet": data} {
		if err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	weights := []byte("weights")
	good := func() Lineage {
		return Lineage{Format: LineageFormat, RunID: "r", Version: 3, Parent: ParentRef{Version: 2},
			Files: map[string]string{"model.safetensors": sha(weights)},
			Data: DataUse{Manifests: []ManifestUse{{Key: "runs/r/manifests/m.json", SHA256: sha(manifest),
				Files: []storage.FileEntry{{Key: "runs/r/data/f.parquet", SHA256: sha(data)}}}}}}
	}
	for _, tc := range []struct {
		name    string
		lin     func(*Lineage) // nil: no lineage.json
		raw     string         // lineage.json as written, when set
		ok      bool
		version int64
		detail  string
	}{
		{name: "base checkpoint", ok: true, detail: "no lineage.json (a base checkpoint, policy version 0)"},
		{name: "every hash matches", lin: func(*Lineage) {}, ok: true, version: 3, detail: "version 3 (parent 2), 1 files and 1 data manifests match"},
		{name: "another run's checkpoint", lin: func(l *Lineage) { l.RunID = "q" }, ok: true, version: 3, detail: "trained on run q, not this one"},
		{name: "a checkpoint file changed", lin: func(l *Lineage) { l.Files["model.safetensors"] = sha([]byte("other")) }, version: 3,
			detail: "model.safetensors has sha256 " + sha(weights)[:12]},
		{name: "a checkpoint file missing", lin: func(l *Lineage) { l.Files["optimizer.safetensors"] = sha(nil) }, version: 3,
			detail: "optimizer.safetensors has sha256"},
		{name: "a data manifest changed", lin: func(l *Lineage) { l.Data.Manifests[0].SHA256 = sha(nil) }, version: 3,
			detail: "data manifest runs/r/manifests/m.json has sha256 " + sha(manifest)[:12]},
		{name: "a data file changed", lin: func(l *Lineage) { l.Data.Manifests[0].Files[0].SHA256 = sha(nil) }, version: 3,
			detail: "data file runs/r/data/f.parquet has sha256 " + sha(data)[:12]},
		{name: "a data file missing", lin: func(l *Lineage) { l.Data.Manifests[0].Files[0].Key = "runs/r/data/gone.parquet" }, version: 3,
			detail: "data file runs/r/data/gone.parquet:"},
		{name: "lineage not JSON", raw: "{", detail: "lineage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), weights, 0o644); err != nil {
				t.Fatal(err)
			}
			raw := []byte(tc.raw)
			if tc.lin != nil {
				l := good()
				tc.lin(&l)
				raw, _ = json.Marshal(l)
			}
			if len(raw) > 0 {
				if err := os.WriteFile(filepath.Join(dir, LineageFile), raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			v, line := AuditLineage(ctx, st, "r", dir)
			if line.OK != tc.ok || v != tc.version || !strings.HasPrefix(line.Detail, dir+": ") || !strings.Contains(line.Detail, tc.detail) {
				t.Errorf("got version %d, %+v; want ok %v, version %d, detail with %q", v, line, tc.ok, tc.version, tc.detail)
			}
		})
	}
}

// TestAuditLogprobs: a policy version whose checkpoint cannot be loaded is
// a failed line naming the iteration and version, and no weights give no
// lines.
func TestAuditLogprobs(t *testing.T) {
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if lines := AuditLogprobs(context.Background(), st, "r", 0, nil, 4, 0.99); len(lines) != 0 {
		t.Errorf("no weights: %+v", lines)
	}
	dir := t.TempDir()
	lines := AuditLogprobs(context.Background(), st, "r", 2, map[int64]string{5: dir}, 4, 0.99)
	if len(lines) != 1 || lines[0].OK || !strings.HasPrefix(lines[0].Detail, "iteration 2, version 5 ("+dir+"): ") {
		t.Errorf("a folder without a model: %+v", lines)
	}
}
