package storage_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// The -update flag rewrites golden files under testdata. It is defined here
// unless another test file of the package defined it first; duckdbUpdate
// reads it at test time, after flags are parsed.
var _ = func() bool {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata")
	}
	return true
}()

func duckdbUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const duckdbGolden = "testdata/duckdb_types.golden"

// duckdbDescription is one line of tools/duckdb/describe.mjs's output.
type duckdbDescription struct {
	File    string `json:"file"`
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows  int64 `json:"rows"`
	Extra struct {
		Footer   map[string]string `json:"footer"`
		Segments map[string]any    `json:"segments"`
		Rollouts map[string]any    `json:"rollouts"`
	} `json:"extra"`
}

// TestDuckDBReadsEveryTable writes synthetic rows of every table, opens the
// files in DuckDB (through tools/duckdb/describe.mjs, as a data scientist
// would) and checks the column names and SQL types against the golden file,
// the row counts, the footer, and list aggregates of the segments and
// rollouts computed by DuckDB against the same values computed in Go.
func TestDuckDBReadsEveryTable(t *testing.T) {
	root := duckdbRepoRoot(t)
	script := duckdbScript(t, root)

	ctx := context.Background()
	dir := t.TempDir()
	st, err := storage.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	it := synth.Run(synth.Config{
		RunID: "duckdb", Seed: 7, Iterations: 1, Tasks: 3, GroupSize: 4, Turns: 3,
		PromptTokens: 96, TurnTokens: 24, ObsTokens: 16, MoELayers: 3, TopK: 4, Experts: 64,
	})[0]
	ref := storage.ManifestRef{RunID: "duckdb", Iteration: 0, Stage: "rollout"}

	tables := schemas.Tables()
	paths := make([]string, len(tables))
	rows := make([]int, len(tables))
	for i, table := range tables {
		foot := schemas.Footer{SchemaVersion: schemas.Version, Table: table, RunID: "duckdb", PolicyVersion: 3, CodeVersion: "test"}
		key := ref.DataKey(string(table), "shard-0")
		var e storage.FileEntry
		switch table {
		case schemas.TableRollouts:
			e, err = storage.WriteFile(ctx, st, key, foot, it.Rollouts)
		case schemas.TableSegments:
			// Several row groups, as big files have them.
			e = writeRowGroups(t, st, key, foot, it.Segments, 8<<10)
			if g := rowGroupRows(t, mustGet(t, st, e.Key)); len(g) < 3 {
				t.Fatalf("segments in row groups of %v rows, want 3 or more", g)
			}
		case schemas.TableSteps:
			e, err = storage.WriteFile(ctx, st, key, foot, it.Steps)
		case schemas.TableTrainSteps:
			e, err = storage.WriteFile(ctx, st, key, foot, it.TrainSteps)
		case schemas.TableReplay:
			e, err = storage.WriteFile(ctx, st, key, foot, it.Replays)
		default:
			t.Fatalf("table %s: add it to this test", table)
		}
		if err != nil {
			t.Fatalf("write %s: %v", table, err)
		}
		if e.Rows == 0 {
			t.Fatalf("write %s: no rows", table)
		}
		paths[i] = filepath.Join(dir, filepath.FromSlash(e.Key))
		rows[i] = int(e.Rows)
	}

	descs := duckdbDescribe(t, root, script, paths)

	// Column names and DuckDB types, against the golden file.
	var got strings.Builder
	for i, table := range tables {
		d := descs[i]
		want, err := schemas.ArrowSchema(table)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Columns) != len(want.Fields()) {
			t.Errorf("%s: DuckDB sees %d columns, the Arrow schema has %d", table, len(d.Columns), len(want.Fields()))
		}
		for j, c := range d.Columns {
			fmt.Fprintf(&got, "%s.%s: %s\n", table, c.Name, c.Type)
			if j >= len(want.Fields()) {
				continue
			}
			f := want.Field(j)
			if c.Name != f.Name {
				t.Errorf("%s column %d: DuckDB name %q, Arrow schema %q", table, j, c.Name, f.Name)
			}
			// The golden file is generated; this keeps it honest: each type
			// must be the SQL type documented for the Arrow type.
			if doc, ok := duckdbTypeOf(f.Type); !ok {
				t.Errorf("%s.%s: no documented DuckDB type for Arrow %s", table, f.Name, f.Type)
			} else if c.Type != doc {
				t.Errorf("%s.%s: DuckDB reads %s, documented type for Arrow %s is %s", table, f.Name, c.Type, f.Type, doc)
			}
		}
	}
	duckdbCompareGolden(t, duckdbGolden, got.String())

	for i, table := range tables {
		d := descs[i]
		if d.Rows != int64(rows[i]) {
			t.Errorf("%s: DuckDB counts %d rows, wrote %d", table, d.Rows, rows[i])
		}
		if d.Extra.Footer[schemas.FooterTable] != string(table) ||
			d.Extra.Footer[schemas.FooterSchemaVersion] != strconv.Itoa(schemas.Version) ||
			d.Extra.Footer[schemas.FooterRunID] != "duckdb" {
			t.Errorf("%s: DuckDB reads footer %v", table, d.Extra.Footer)
		}
	}

	// Segments: list aggregates in DuckDB equal the same sums in Go.
	seg := descs[duckdbTableIndex(tables, schemas.TableSegments)].Extra.Segments
	if seg == nil {
		t.Fatal("segments: describe.mjs returned no segment aggregates")
	}
	var prompt, completion, sampled, routing, maxExpert int64
	var lpSum, sampledLPSum float64
	maxExpert = -1
	for _, s := range it.Segments {
		prompt += int64(len(s.PromptTokenIDs))
		completion += int64(len(s.CompletionTokenIDs))
		for j, m := range s.LossMask {
			sampled += int64(m)
			lpSum += float64(s.Logprobs[j])
			sampledLPSum += float64(s.Logprobs[j]) * float64(m)
		}
		routing += int64(len(s.RoutingExperts))
		for _, e := range s.RoutingExperts {
			maxExpert = max(maxExpert, int64(e))
		}
	}
	if routing == 0 {
		t.Fatal("synthetic segments carry no routing; set MoELayers")
	}
	n := int64(len(it.Segments))
	duckdbCheckInt(t, "segments", seg, "prompt_tokens", prompt)
	duckdbCheckInt(t, "segments", seg, "completion_tokens", completion)
	duckdbCheckInt(t, "segments", seg, "sampled_tokens", sampled)
	duckdbCheckInt(t, "segments", seg, "routing_ids", routing)
	duckdbCheckInt(t, "segments", seg, "routing_max_expert", maxExpert)
	duckdbCheckInt(t, "segments", seg, "routing_shape_ok", n)
	duckdbCheckInt(t, "segments", seg, "lengths_ok", n)
	duckdbCheckFloat(t, "segments", seg, "logprob_sum", lpSum)
	duckdbCheckFloat(t, "segments", seg, "sampled_logprob_sum", sampledLPSum)

	// Rollouts: status counts and rewards.
	ro := descs[duckdbTableIndex(tables, schemas.TableRollouts)].Extra.Rollouts
	if ro == nil {
		t.Fatal("rollouts: describe.mjs returned no rollout aggregates")
	}
	var completed, masked, f2p int64
	var reward float64
	for _, r := range it.Rollouts {
		if r.Status == schemas.StatusCompleted {
			completed++
		} else {
			masked++
		}
		reward += r.Reward
		f2p += int64(len(r.F2PPassed))
	}
	duckdbCheckInt(t, "rollouts", ro, "completed", completed)
	duckdbCheckInt(t, "rollouts", ro, "masked", masked)
	duckdbCheckInt(t, "rollouts", ro, "f2p_passed", f2p)
	duckdbCheckFloat(t, "rollouts", ro, "reward_sum", reward)
}

// TestDuckDBDescribeFails checks that the tool reports an unreadable file as
// one line on stderr and exit status 1.
func TestDuckDBDescribeFails(t *testing.T) {
	root := duckdbRepoRoot(t)
	script := duckdbScript(t, root)
	bad := filepath.Join(t.TempDir(), "bad.parquet")
	if err := os.WriteFile(bad, []byte("not parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, bad)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("describe.mjs on a bad file: got %v, want exit status 1 (stderr: %s)", err, stderr.String())
	}
	msg := stderr.String()
	if strings.Count(strings.TrimRight(msg, "\n"), "\n") != 0 || !strings.Contains(msg, bad) {
		t.Errorf("stderr is not one line naming the file: %q", msg)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout not empty on error: %q", stdout.String())
	}
}

// duckdbTypeOf is the SQL type DuckDB documents for an Arrow type of our
// schemas (Parquet INT32/INT64/FLOAT/DOUBLE with their logical annotations).
func duckdbTypeOf(dt arrow.DataType) (string, bool) {
	switch dt.ID() {
	case arrow.STRING:
		return "VARCHAR", true
	case arrow.BOOL:
		return "BOOLEAN", true
	case arrow.INT8:
		return "TINYINT", true
	case arrow.INT16:
		return "SMALLINT", true
	case arrow.INT32:
		return "INTEGER", true
	case arrow.INT64:
		return "BIGINT", true
	case arrow.FLOAT32:
		return "FLOAT", true
	case arrow.FLOAT64:
		return "DOUBLE", true
	case arrow.LIST:
		elem, ok := duckdbTypeOf(dt.(*arrow.ListType).Elem())
		return elem + "[]", ok
	}
	return "", false
}

func duckdbTableIndex(tables []schemas.Table, t schemas.Table) int {
	for i, x := range tables {
		if x == t {
			return i
		}
	}
	panic("table not listed: " + string(t))
}

func duckdbCheckInt(t *testing.T, table string, m map[string]any, key string, want int64) {
	t.Helper()
	v, ok := m[key].(float64) // encoding/json decodes numbers as float64
	if !ok {
		t.Errorf("%s: DuckDB %s = %v (%T), want %d", table, key, m[key], m[key], want)
		return
	}
	if int64(v) != want || v != math.Trunc(v) {
		t.Errorf("%s: DuckDB %s = %v, Go computes %d", table, key, v, want)
	}
}

func duckdbCheckFloat(t *testing.T, table string, m map[string]any, key string, want float64) {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Errorf("%s: DuckDB %s = %v (%T), want %g", table, key, m[key], m[key], want)
		return
	}
	if math.Abs(v-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Errorf("%s: DuckDB %s = %.9g, Go computes %.9g", table, key, v, want)
	}
}

// duckdbDescribe runs describe.mjs on paths and returns one description per
// path, in order.
func duckdbDescribe(t *testing.T, root, script string, paths []string) []duckdbDescription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, paths...)...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	var out []duckdbDescription
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var d duckdbDescription
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("describe.mjs printed %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	if len(out) != len(paths) {
		t.Fatalf("describe.mjs described %d files, asked for %d", len(out), len(paths))
	}
	for i, d := range out {
		if d.File != paths[i] {
			t.Fatalf("description %d is of %s, want %s", i, d.File, paths[i])
		}
	}
	return out
}

// duckdbRepoRoot walks up from the test's folder to the folder with go.mod.
func duckdbRepoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test folder")
		}
		dir = parent
	}
}

// duckdbScript returns the path of describe.mjs, failing the test (never
// skipping it) when node or the DuckDB package is missing.
func duckdbScript(t *testing.T, root string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: run `make tools` (DuckDB interop needs Node.js and tools/duckdb/node_modules)")
	}
	if _, err := os.Stat(filepath.Join(root, "tools", "duckdb", "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		t.Fatalf("tools/duckdb/node_modules has no @duckdb/node-api: run `make tools` (npm ci in tools/duckdb)")
	}
	return filepath.Join(root, "tools", "duckdb", "describe.mjs")
}

// duckdbCompareGolden compares got with the golden file at path, or rewrites it
// under -update.
func duckdbCompareGolden(t *testing.T, path, got string) {
	t.Helper()
	if duckdbUpdate() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", path)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./storage -run DuckDB -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("DuckDB column types differ from %s (rerun with -update if the change is intended):\n%s",
			path, duckdbLineDiff(string(want), got))
	}
}

// duckdbLineDiff lists the lines only in want (-) and only in got (+).
func duckdbLineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	inW, inG := map[string]bool{}, map[string]bool{}
	for _, l := range w {
		inW[l] = true
	}
	for _, l := range g {
		inG[l] = true
	}
	var b strings.Builder
	for _, l := range w {
		if !inG[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range g {
		if !inW[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}
