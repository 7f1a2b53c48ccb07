package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/legorl/legorl"

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// top returns the top-level folder of a project import path, or "" for an
// import outside the project.
func top(path string) string {
	if path != module && !strings.HasPrefix(path, module+"/") {
		return ""
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	first, _, _ := strings.Cut(rest, "/")
	return first
}

// violations checks every package's project imports against the layers.
func violations(pkgs []pkg, layers []Layer) ([]string, error) {
	allowed, err := Allowed(layers)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, p := range pkgs {
		from := top(p.ImportPath)
		ok, known := allowed[from]
		if !known {
			bad = append(bad, fmt.Sprintf("%s: folder %q is not in the layer table (internal/archtest/doc.go, docs/ARCHITECTURE.md)", p.ImportPath, from))
			continue
		}
		for _, imps := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range imps {
				if to := top(imp); to != "" && !ok[to] {
					bad = append(bad, fmt.Sprintf("%s imports %s: %s may not import %s", p.ImportPath, imp, from, to))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad, nil
}

// patterns returns a `go list` pattern for each top-level folder of the
// module that git does not ignore. Not module/...: run outputs under
// ignored folders (legorl-work/ holds generated suites of thousands of Go
// packages) are not the project's, and listing them can exhaust memory.
// A new folder shows up whether or not it is tracked yet.
func patterns(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			dirs = append(dirs, e.Name())
		}
	}
	cmd := exec.Command("git", append([]string{"check-ignore", "--"}, dirs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: none ignored
		t.Fatalf("git check-ignore: %v", err)
	}
	ignored := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		ignored[filepath.Base(l)] = true
	}
	var pats []string
	for _, d := range dirs {
		if !ignored[d] {
			pats = append(pats, module+"/"+d+"/...")
		}
	}
	return pats
}

func TestImportsPointDown(t *testing.T) {
	cmd := exec.Command("go", append([]string{"list", "-json"}, patterns(t)...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 4 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	bad, err := violations(pkgs, Layers)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	for _, b := range forbidden(pkgs, Forbidden) {
		t.Error(b)
	}
}

// under reports whether import path p is the module package rel or below it.
func under(p, rel string) bool {
	full := module + "/" + rel
	return p == full || strings.HasPrefix(p, full+"/")
}

// forbidden checks every package's non-test imports against the edges.
func forbidden(pkgs []pkg, edges []Edge) []string {
	var bad []string
	for _, p := range pkgs {
		for _, e := range edges {
			if !under(p.ImportPath, e.From) {
				continue
			}
			for _, imp := range p.Imports {
				if under(imp, e.To) {
					bad = append(bad, fmt.Sprintf("%s imports %s: %s", p.ImportPath, imp, e.Why))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// The checker itself must catch violations, or the test above proves nothing.
func TestViolationsAreFound(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/schemas", Imports: []string{"fmt", module + "/storage"}},
		{ImportPath: module + "/storage", XTestImports: []string{module + "/cmd/legorl"}},
		{ImportPath: module + "/trainer", Imports: []string{module + "/policy/engine", module + "/schemas"}},
		{ImportPath: module + "/sandbox", Imports: []string{module + "/schemas"}}, // via tasks: allowed
		{ImportPath: module + "/stray/pkg"},
	}
	bad, err := violations(pkgs, Layers)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 3 {
		t.Fatalf("got %d violations, want 3: %q", len(bad), bad)
	}
	for i, want := range []string{"schemas may not import storage", "storage may not import cmd", `folder "stray"`} {
		if !strings.Contains(strings.Join(bad, "\n"), want) {
			t.Errorf("violation %d (%q) not reported: %q", i, want, bad)
		}
	}
	fb := forbidden([]pkg{
		{ImportPath: module + "/proxy", Imports: []string{module + "/policy/engine"}},
		{ImportPath: module + "/proxy", TestImports: []string{module + "/policy/engine"}}, // tests may
		{ImportPath: module + "/policy/remote/x", Imports: []string{module + "/policy/engine/y"}},
		{ImportPath: module + "/proxyfoo", Imports: []string{module + "/policy/engine"}}, // not under proxy
	}, Forbidden)
	if len(fb) != 2 {
		t.Errorf("forbidden edges: got %q, want 2", fb)
	}
	if _, err := Allowed([]Layer{{"a", []string{"b"}}, {"b", nil}}); err == nil {
		t.Error("a layer importing one listed after it was accepted")
	}
}

// cmdBudget bounds cmd/legorl's non-test Go: the CLI parses flags and calls
// one library function per command, so logic that grows there belongs in
// a package with tests of its own. Lower the budget when code moves out;
// raising it needs a reason in the commit.
const (
	cmdBudgetLines   = 3034 // all non-test files (3,540 on 2026-12-03; 2,898 once audit, serve, rollout, monitor, demo and export logic moved out; 2,962 with legorl compare, 48 lines of flags over loop.CompareEvals; 3,008 with listen addresses, tokens and export --format slime|verl, 47 lines of flags over proxy/listen, proxy.TokenGuard and storage/handoff; 3,011 with run --replicates; +23 for legorl audit --replay: flags and the branch to replay.Run)
	cmdBudgetPerFile = 280  // the largest: rollout_pipeline.go, 274
)

func TestCmdStaysThin(t *testing.T) {
	files, err := filepath.Glob("../../cmd/legorl/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("cmd/legorl: %v (%d files)", err, len(files))
	}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		total += n
		if n > cmdBudgetPerFile {
			t.Errorf("%s: %d lines, over the %d a command file may have: move the logic into its package", filepath.Base(f), n, cmdBudgetPerFile)
		}
	}
	if total > cmdBudgetLines {
		t.Errorf("cmd/legorl: %d lines of non-test Go, over the budget of %d: move logic into the packages", total, cmdBudgetLines)
	}
}
