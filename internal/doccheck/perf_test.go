package doccheck

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

var update = flag.Bool("update", false, "rewrite docs/PERFORMANCE.md's generated tables from docs/perf")

// TestPerformanceTables fails when a generated table of docs/PERFORMANCE.md
// is not what its committed benchmark output makes.
func TestPerformanceTables(t *testing.T) {
	name := filepath.Join(root, "docs", "PERFORMANCE.md")
	doc, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Update(doc, Tables, os.DirFS(filepath.Join(root, "docs", "perf")))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if string(got) != string(doc) {
			tmp := name + ".tmp"
			if err := os.WriteFile(tmp, got, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, name); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if string(got) != string(doc) {
		t.Fatal("docs/PERFORMANCE.md's generated tables differ from docs/perf: run go test ./internal/doccheck -run TestPerformanceTables -update")
	}
}

const sample = `command: make bench-x
machine: 2 cores
load: 1.0-2.0
goos: linux
pkg: example
BenchmarkA/anchor-2   	     10	   1000 ns/op	  100.0 p50-us
BenchmarkA/fast-2     	     10	   1500 ns/op	  130.0 p50-us	 3 allocs/op
BenchmarkA/anchor-2   	     10	   1200 ns/op	  140.0 p50-us
BenchmarkA/fast-2     	     10	   1600 ns/op	  150.0 p50-us	 5 allocs/op
PASS
ok  	example	1.0s
`

func TestRender(t *testing.T) {
	o, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	tab := Table{
		Name:    "x",
		Columns: []Column{{"p50 us", []string{"p50-us"}}, {"allocs", []string{"allocs/op"}}},
		Ratios:  []Ratio{{Head: "minus anchor", Unit: "p50-us", Anchor: fixed(`^BenchmarkA/`, "BenchmarkA/anchor"), Diff: true}},
	}
	want := "`make bench-x` on 2 cores, load average 1.0-2.0:\n\n" +
		"| benchmark | p50 us | allocs | minus anchor |\n| --- | --- | --- | --- |\n" +
		"| A/anchor | 120 (100-140) |  |  |\n" +
		"| A/fast | 140 (130-150) | 4 (3-5) | +20 |\n"
	if got := tab.Render(o); got != want {
		t.Fatalf("Render:\n%s\nwant:\n%s", got, want)
	}
	tab.Ratios = append(tab.Ratios, Ratio{Head: "no anchor run", Unit: "p50-us", Anchor: replace("/fast", "/base")})
	if got := tab.Render(o); !strings.Contains(got, "| benchmark | p50 us | allocs | minus anchor |\n") {
		t.Fatalf("Render kept a ratio column without a figure:\n%s", got)
	}
	tab.Ratios = tab.Ratios[:1]
	tab.Ratios[0].Diff = false
	if got := tab.Render(o); !strings.Contains(got, "| A/fast | 140 (130-150) | 4 (3-5) | 1.17x |") {
		t.Fatalf("Render with a ratio:\n%s", got)
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 28: "28", 9: "9", 1234567: "1,234,567", -2500: "-2,500", 2.5: "2.50",
		12.34: "12.3", 123.4: "123", 0.849: "0.849", 0.000012: "0.000012", 1.5e-7: "0",
	} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse(strings.NewReader("goos: linux\nPASS\n")); !errors.Is(err, ErrNoResults) {
		t.Errorf("Parse without results: %v, want ErrNoResults", err)
	}
	if _, err := Parse(strings.NewReader("BenchmarkA-2 1 x ns/op\n")); err == nil || !strings.Contains(err.Error(), `value "x" of ns/op`) {
		t.Errorf("Parse of a bad value: %v", err)
	}
}

func TestUpdate(t *testing.T) {
	tabs := []Table{
		{Name: "x", Columns: []Column{{"p50 us", []string{"p50-us"}}}},
		{Name: "y", Columns: []Column{{"p50 us", []string{"p50-us"}}}},
	}
	block := func(name, body string) string {
		return "<!-- bench table " + name + ": old text -->\n" + body + "<!-- end of bench table " + name + " -->"
	}
	doc := "# P\n\n" + block("x", "stale\n") + "\ntext\n" + block("y", "") + "\n"
	perf := fstest.MapFS{"x.txt": {Data: []byte(sample)}}
	got, err := Update([]byte(doc), tabs, perf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<!-- bench table x: made from docs/perf/x.txt by `go test ./internal/doccheck -update`; do not edit -->\n`make bench-x`",
		"| A/fast | 140 (130-150) |\n<!-- end of bench table x -->\ntext\n",
		"No output recorded yet: `make bench-y` writes docs/perf/y.txt.\n<!-- end of bench table y -->\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("Update lacks %q:\n%s", want, got)
		}
	}
	again, err := Update(got, tabs, perf)
	if err != nil || string(again) != string(got) {
		t.Errorf("Update is not idempotent (%v):\n%s", err, again)
	}
	for _, bad := range []string{
		block("x", ""), // y has no block
		block("x", "") + block("y", "") + block("z", ""), // z has no table
		block("x", "") + block("x", "") + block("y", ""), // twice
		block("x", "") + "<!-- bench table y: -->\n",     // no end
	} {
		if _, err := Update([]byte(bad), tabs, perf); !errors.Is(err, ErrBlocks) {
			t.Errorf("Update(%q) = %v, want ErrBlocks", bad, err)
		}
	}
}
