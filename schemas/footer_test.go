package schemas_test

import (
	"errors"
	"testing"

	"github.com/legorl/legorl/schemas"
)

func TestFooterRoundTrip(t *testing.T) {
	f := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableSegments, RunID: "run-7",
		ConfigHash: "abc123", PolicyVersion: 42, CodeVersion: "v0.1.0"}
	got, err := schemas.ParseFooter(f.KeyValues())
	if err != nil {
		t.Fatal(err)
	}
	if got != f {
		t.Fatalf("got %+v, want %+v", got, f)
	}
}

func TestParseFooterErrors(t *testing.T) {
	good := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableRollouts, RunID: "r"}.KeyValues()
	tests := []struct {
		name string
		edit func(map[string]string)
		want error
	}{
		{"not a legorl file", func(kv map[string]string) { delete(kv, schemas.FooterSchemaVersion) }, schemas.ErrSchemaVersion},
		{"newer schema", func(kv map[string]string) { kv[schemas.FooterSchemaVersion] = "99" }, schemas.ErrSchemaVersion},
		{"garbage version", func(kv map[string]string) { kv[schemas.FooterSchemaVersion] = "x" }, schemas.ErrSchemaVersion},
		{"unknown table", func(kv map[string]string) { kv[schemas.FooterTable] = "trajectories" }, schemas.ErrUnknownTable},
		{"no run id", func(kv map[string]string) { kv[schemas.FooterRunID] = "" }, schemas.ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := map[string]string{}
			for k, v := range good {
				kv[k] = v
			}
			tt.edit(kv)
			if _, err := schemas.ParseFooter(kv); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestArrowSchemaForEveryTable(t *testing.T) {
	for _, tab := range schemas.Tables() {
		sc, err := schemas.ArrowSchema(tab)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, f := range sc.Fields() {
			if seen[f.Name] {
				t.Errorf("%s: duplicate column %s", tab, f.Name)
			}
			seen[f.Name] = true
		}
		if !seen["run_id"] || !seen["iteration"] {
			t.Errorf("%s: every table is partitioned by run_id and iteration", tab)
		}
	}
	if _, err := schemas.ArrowSchema("nope"); !errors.Is(err, schemas.ErrUnknownTable) {
		t.Fatalf("unknown table: got %v", err)
	}
}
