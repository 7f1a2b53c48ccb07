package grade

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/tasks"
)

// pytestCmd runs the required tests by node id with pinned settings: the
// interpreter isolated (-I: no PYTHON* variables, no user site, no script
// folder on sys.path), no plugin autoload, the grader's own config file
// (the repository's pytest.ini/tox.ini/setup.cfg/pyproject.toml are not
// read), addopts emptied, conftest.py search stopped at the workspace, no
// cache, JUnit XML and the grader plugin's report in the results mount.
func (g *Grader) pytestCmd(inst *tasks.Instance) sandbox.Cmd {
	args := []string{g.opts.Python, "-I", "-B", RunnerDir + "/run_pytest.py", ResultsDir,
		"-c", RunnerDir + "/pytest.ini", "--rootdir=" + WorkspaceDir, "--confcutdir=" + WorkspaceDir,
		"-p", "no:cacheprovider", "-o", "addopts=", "-o", "pythonpath=" + WorkspaceDir,
		"--junitxml=" + ResultsDir + "/junit.xml", "-o", "junit_family=xunit2", "-q", "-rN", "--color=no",
	}
	args = append(args, inst.FailToPass...)
	args = append(args, inst.PassToPass...)
	return sandbox.Cmd{Args: args, Dir: WorkspaceDir, Env: []string{
		"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "PYTEST_ADDOPTS=", "PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1",
	}}
}

// fastDeclined is the fast runner's exit status when it will not answer
// for pytest (runner/run_fast.py): the grade is run again with pytest.
const fastDeclined = 86

// fastCmd runs the required tests with the fast runner: the interpreter
// pinned and isolated as for pytest (same flags, same environment, so the
// task's code sees the same), the reports in the same files.
func (g *Grader) fastCmd(inst *tasks.Instance) sandbox.Cmd {
	c := g.pytestCmd(inst)
	args := []string{g.opts.Python, "-I", "-B", RunnerDir + "/run_fast.py", ResultsDir, WorkspaceDir}
	args = append(args, inst.FailToPass...)
	c.Args = append(args, inst.PassToPass...)
	return c
}

// maxPlainEntries bounds the walk of plainWorkspace; a larger workspace
// goes to pytest.
const maxPlainEntries = 5000

// plainWorkspace reports whether the workspace, as the grading sandbox
// will get it, can only import the way the fast runner imports: nothing
// but folders and regular files, and none of the files that change how
// Python or pytest imports (conftest.py, __init__.py, .pth,
// sitecustomize/usercustomize, compiled bytecode). The fast runner checks
// the rest (the hidden tests' shape, modules shadowing installed ones)
// before any code of the task runs.
func plainWorkspace(ws string) bool {
	n := 0
	ok := true
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxPlainEntries {
			ok = false
			return filepath.SkipAll
		}
		name := d.Name()
		switch {
		case d.IsDir():
			if name == "__pycache__" {
				ok = false
			}
		case !d.Type().IsRegular():
			ok = false
		case name == "conftest.py", name == "__init__.py", name == "sitecustomize.py", name == "usercustomize.py",
			strings.HasSuffix(name, ".pth"), strings.HasSuffix(name, ".pyc"), strings.HasSuffix(name, ".pyo"):
			ok = false
		}
		if !ok {
			return filepath.SkipAll
		}
		return nil
	})
	return ok && err == nil
}

// junitCase is one <testcase> of a JUnit XML report.
type junitCase struct {
	Classname string    `xml:"classname,attr"`
	Name      string    `xml:"name,attr"`
	Failure   *struct{} `xml:"failure"`
	Error     *struct{} `xml:"error"`
	Skipped   *struct{} `xml:"skipped"`
}

// junitKey maps a pytest node id to JUnit's (classname, name).
func junitKey(nodeid string) string {
	parts := strings.Split(nodeid, "::")
	cls := strings.ReplaceAll(strings.TrimSuffix(parts[0], ".py"), "/", ".")
	for _, p := range parts[1 : len(parts)-1] {
		cls += "." + p
	}
	return cls + "\x00" + parts[len(parts)-1]
}

// readPytestResults reads the plugin's report and pytest's JUnit XML from
// the results folder and returns "passed" for a required id only when
// both say so. Disagreements and missing reports come back as flags.
func readPytestResults(dir string, required []string) (map[string]string, []string) {
	var notes []string
	var plugin struct {
		Tests         map[string]string `json:"tests"`
		CollectErrors []string          `json:"collect_errors"`
	}
	b, err := readSmall(filepath.Join(dir, "plugin.json"))
	if err != nil {
		notes = append(notes, "report_missing:plugin.json")
	} else if err := json.Unmarshal(b, &plugin); err != nil {
		notes = append(notes, "report_corrupt:plugin.json")
	}
	junit := map[string]string{}
	b, err = readSmall(filepath.Join(dir, "junit.xml"))
	if err != nil {
		notes = append(notes, "report_missing:junit.xml")
	} else {
		dec := xml.NewDecoder(bytes.NewReader(b))
		for {
			tok, err := dec.Token()
			if err != nil {
				if err != io.EOF {
					notes = append(notes, "report_corrupt:junit.xml")
				}
				break
			}
			se, ok := tok.(xml.StartElement)
			if !ok || se.Name.Local != "testcase" {
				continue
			}
			var c junitCase
			if err := dec.DecodeElement(&c, &se); err != nil {
				notes = append(notes, "report_corrupt:junit.xml")
				break
			}
			k := c.Classname + "\x00" + c.Name
			st := "passed"
			switch {
			case c.Failure != nil || c.Error != nil:
				st = "failed"
			case c.Skipped != nil:
				st = "skipped"
			}
			if prev, ok := junit[k]; ok && prev != st {
				st = "failed" // a test reported twice, differently: trust neither
			}
			junit[k] = st
		}
	}
	out := map[string]string{}
	for _, id := range required {
		p, j := plugin.Tests[id], junit[junitKey(id)]
		switch {
		case p == "passed" && j == "passed":
			out[id] = "passed"
		case p == "" && j == "":
			out[id] = "missing"
		default:
			if (p == "passed") != (j == "passed") {
				notes = append(notes, "report_mismatch:"+id)
			}
			out[id] = "failed"
		}
	}
	return out, notes
}

func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 32<<20))
}

// goCmd runs the required tests by name with go test -json: offline
// (GOPROXY=off, GOTOOLCHAIN=local, GOFLAGS=-mod=mod), no cgo, no vet, no
// workspace file. GOCACHE is this grade's own writable layer over the
// seed cache (layerCache): the standard library comes from the seed, what
// the task compiles is written to the layer (the go command needs to
// write it), and nothing the tests do reaches the seed or a later grade.
// The JSON events go to the host through stdout (a pipe the host owns).
func (g *Grader) goCmd(inst *tasks.Instance, stdout io.Writer) sandbox.Cmd {
	names := append(append([]string{}, inst.FailToPass...), inst.PassToPass...)
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	run := "^(" + strings.Join(quoted, "|") + ")$"
	script := `exec go test -json -count=1 -vet=off -p 1 -run "$1" ./...`
	return sandbox.Cmd{
		Args: []string{"/bin/sh", "-c", script, "sh", run},
		Dir:  WorkspaceDir, Stdout: stdout,
		Env: append(goEnv(g.goRoot()), "GOCACHE="+GoCacheDir),
	}
}

func goEnv(goroot string) []string {
	return []string{
		"PATH=" + goroot + "/bin:/usr/local/bin:/usr/bin:/bin", "GOROOT=" + goroot,
		"GOPATH=/tmp/gopath", "GOMODCACHE=/tmp/gopath/pkg/mod", "GOPROXY=off", "GOSUMDB=off",
		"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOTELEMETRY=off", "CGO_ENABLED=0", "GOWORK=off", "GOENV=off",
	}
}

func (g *Grader) goRoot() string {
	if g.opts.GoRoot != "" {
		return g.opts.GoRoot
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err == nil && len(bytes.TrimSpace(out)) > 0 {
		return string(bytes.TrimSpace(out))
	}
	return runtime.GOROOT()
}

// goEvent is one line of go test -json.
type goEvent struct {
	Action  string
	Package string
	Test    string
}

// parseGoTest reads go test -json output: a required test passed when it
// has a pass event and no fail or skip event.
func parseGoTest(out []byte, truncated bool) (map[string]string, []string) {
	var notes []string
	if truncated {
		notes = append(notes, "report_truncated")
	}
	st := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e goEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "pass":
			if st[e.Test] == "" {
				st[e.Test] = "passed"
			}
		case "fail":
			st[e.Test] = "failed"
		case "skip":
			if st[e.Test] != "failed" {
				st[e.Test] = "skipped"
			}
		}
	}
	return st, notes
}

// goCacheSeed returns a folder holding a Go build cache warmed with the
// standard library packages tests use, built once per Go version under
// CacheDir (a fresh cache would cost a minute of compiling per grade).
// Graders of one process share it through goSeedMu; processes sharing a
// CacheDir take an exclusive lock on CacheDir/gocache.lock while one of
// them builds it, so it is built once, and it appears whole (renamed into
// place) or not at all. Its files are read-only and owned by the grader's
// user; grades see it through their own layer (layerCache), never
// directly.
func (g *Grader) goCacheSeed(ctx context.Context) (string, error) {
	g.goSeedMu.Lock()
	defer g.goSeedMu.Unlock()
	if g.goSeed != "" {
		return g.goSeed, nil
	}
	if err := os.MkdirAll(g.opts.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("grade: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(g.opts.CacheDir, "gocache.lock"))
	if err != nil {
		return "", fmt.Errorf("grade: go build cache lock: %w", err)
	}
	defer unlock()
	return g.buildSeed(ctx)
}

// buildSeed builds the seed under the lock, unless it is there.
func (g *Grader) buildSeed(ctx context.Context) (string, error) {
	goroot := g.goRoot()
	ver, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("grade: go version: %w", err)
	}
	v := strings.Fields(string(ver))
	if len(v) == 0 {
		return "", fmt.Errorf("grade: empty %s/VERSION", goroot)
	}
	dir := filepath.Join(g.opts.CacheDir, "gocache-"+v[0])
	if _, err := os.Stat(filepath.Join(dir, "README")); err == nil {
		g.goSeed = dir
		return dir, nil
	}
	tmp, err := os.MkdirTemp(g.opts.CacheDir, ".gocache-build-")
	if err != nil {
		return "", fmt.Errorf("grade: %w", err)
	}
	defer os.RemoveAll(tmp)
	mod := filepath.Join(tmp, "mod")
	cache := filepath.Join(tmp, "cache")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{
		"go.mod":       "module example.com/seed\n\ngo 1.22\n",
		"seed.go":      "package seed\n\nimport (\n\t\"errors\"\n\t\"fmt\"\n\t\"math\"\n\t\"slices\"\n\t\"sort\"\n\t\"strconv\"\n\t\"strings\"\n)\n\nvar _ = []any{errors.New, fmt.Sprint, math.Abs, slices.Max[[]int], sort.Ints, strconv.Itoa, strings.ToUpper}\n",
		"seed_test.go": "package seed\n\nimport (\n\t\"reflect\"\n\t\"testing\"\n)\n\nfunc TestSeed(t *testing.T) { _ = reflect.DeepEqual(1, 1) }\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(mod, n), []byte(c), 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(goroot, "bin", "go"), "test", "-json", "-count=1", "-vet=off", "-p", "1", "-run", "^TestSeed$", "./...")
	cmd.Dir = mod
	cmd.Env = append(goEnv(goroot), "GOCACHE="+cache, "HOME="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("grade: warming the go build cache: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.WriteFile(filepath.Join(cache, "README"), []byte("legorl grader: seed of the Go build cache\n"), 0o644); err != nil {
		return "", err
	}
	if err := filepath.Walk(cache, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o444)
	}); err != nil {
		return "", err
	}
	if err := os.Rename(cache, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "README")); serr != nil {
			return "", fmt.Errorf("grade: %w", err)
		}
	}
	g.goSeed = dir
	return dir, nil
}

// goEnvErrors are what the go command appends to a failed operation on
// its own build cache when the environment, not the code, is at fault.
var goEnvErrors = regexp.MustCompile(`^(open|write|mkdir|rename|remove|create|read|sync|close) ` + regexp.QuoteMeta(GoCacheDir) + `/[^\s:]*: (read-only file system|no space left on device|disk quota exceeded|permission denied|too many open files|input/output error)$`)

// goSetupFailure reads go test -json output for a test binary that was
// never run: a build failure ([build failed], [setup failed], a
// build-fail event), or a run that exited nonzero without running any
// test. It is trusted as the environment's when the go
// command reported an error on its own cache (goEnvErrors) or GOROOT:
// those lines come from the toolchain before any of the task's code runs,
// and, unlike compiler diagnostics, they never quote the task's source.
func goSetupFailure(out []byte, exit int) *setupFailure {
	var f *setupFailure
	sawTest := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e struct {
			Action, Output, FailedBuild, Test string
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		sawTest = sawTest || e.Test != ""
		for _, line := range strings.Split(e.Output, "\n") {
			line = strings.TrimSpace(line)
			if goEnvErrors.MatchString(line) || strings.HasPrefix(line, "go: cannot find GOROOT") {
				return &setupFailure{kind: "go_toolchain", what: line, trusted: true}
			}
		}
		switch {
		case f != nil:
		case e.Action == "build-fail" || e.FailedBuild != "":
			f = &setupFailure{kind: "go_build", what: "the package did not build"}
		case strings.Contains(e.Output, "[setup failed]") || strings.Contains(e.Output, "[build failed]"):
			f = &setupFailure{kind: "go_build", what: strings.TrimSpace(e.Output)}
		}
	}
	if f == nil && exit != 0 && !sawTest {
		f = &setupFailure{kind: "go_no_tests", what: fmt.Sprintf("go test exited %d and ran no test", exit)}
	}
	return f
}

// pytestSetupFailure reads how pytest ended: an internal error (exit 3),
// a usage error (4), no tests collected (5), collection interrupted (2,
// e.g. a module that does not import) or reports missing mean the tests
// never ran as asked. None of it is trusted on its own: the task's code
// runs inside pytest and can print or cause any of it.
func pytestSetupFailure(exit int, notes []string) *setupFailure {
	switch exit {
	case 2, 3, 4, 5:
		return &setupFailure{kind: "pytest_exit_" + strconv.Itoa(exit), what: fmt.Sprintf("pytest exited %d", exit)}
	}
	for _, n := range notes {
		if strings.HasPrefix(n, "report_missing") || strings.HasPrefix(n, "report_corrupt") {
			return &setupFailure{kind: "report_missing", what: n}
		}
	}
	if exit != 0 && exit != 1 {
		return &setupFailure{kind: "runner_exit_" + strconv.Itoa(exit), what: fmt.Sprintf("the test runner exited %d", exit)}
	}
	return nil
}
