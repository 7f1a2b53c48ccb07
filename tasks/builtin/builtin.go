// Package builtin generates the built-in task suite: small real Python
// (pytest) and Go (go test) repositories with one bug each, in bug
// families (wrong operator, off by one, wrong constant, missing case, wrong
// call; swapped arguments and negated condition held out whole), each
// instance with a problem statement, hidden tests (test_patch) and a gold
// patch. The suite is a pure function of (n, seed).
//
// It is built so that a small policy has to copy, not memorise (DESIGN.md
// §6): module and function names come from pools of thousands, the
// statement from three wordings and three ways of naming the file, the
// buggy function sits among one to three correct ones at a random
// position, and instances fall into disjoint pools (Split): sft for
// demonstrations, train for RL, heldout and heldout_family for
// evaluation.
package builtin

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/legorl/legorl/tasks"
)

// Options of Generate.
type Options struct {
	N    int    // instances. Defaults to 20.
	Seed uint64 // the suite is a pure function of N and Seed. Defaults to 0.
	// Languages to draw from: "python", "go". Defaults to both (two Python
	// instances for each Go one).
	Languages []string
}

// Family names in the order of the templates.
func Families() []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range templates {
		if !seen[t.family] {
			seen[t.family] = true
			out = append(out, t.family)
		}
	}
	return out
}

// Name pools. Every surface feature a policy must read from the task is
// drawn per instance from pools far larger than any number of
// demonstrations: module names are adjective_noun (48 x 48 = 2,304),
// function names verb_noun (40 x 48 = 1,920), so that copying a name from
// the statement pays and memorising one does not.
var (
	adjectives = []string{"amber", "brisk", "calm", "dusty", "eager", "fancy", "gentle", "hollow", "icy", "jolly",
		"keen", "lofty", "mellow", "nimble", "olive", "proud", "quiet", "rapid", "silver", "tidy",
		"urban", "vivid", "witty", "young", "zesty", "bold", "crisp", "dark", "early", "fuzzy",
		"grand", "happy", "inner", "jumbo", "kind", "lucky", "misty", "noble", "odd", "plain",
		"royal", "sunny", "tiny", "upper", "vast", "warm", "yellow", "zonal"}
	nouns = []string{"order", "invoice", "sensor", "ticket", "basket", "parcel", "budget", "route", "meter", "batch",
		"cargo", "token", "shelf", "grade", "quota", "fleet", "ledger", "planner", "catalog", "payroll",
		"score", "booking", "price", "station", "harbor", "garden", "engine", "bridge", "castle", "forest",
		"island", "market", "museum", "orbit", "pocket", "quarry", "rocket", "signal", "tunnel", "valley",
		"wallet", "window", "yard", "zone", "anchor", "beacon", "canyon", "depot"}
	verbs = []string{"compute", "get", "calc", "find", "eval", "resolve", "measure", "derive", "bound", "count",
		"scale", "label", "clip", "tag", "weigh", "pack", "total", "check", "rank", "split",
		"merge", "track", "score", "sum", "limit", "mark", "rate", "tally", "fetch", "build",
		"load", "parse", "shift", "trim", "round", "fold", "map", "sort", "index", "guard"}
)

// Generate writes the suite under out: out/tasks.jsonl and one git
// repository per instance under out/repos/ID (its history is exactly the
// base commit). It returns the instances.
func Generate(ctx context.Context, out string, opt Options) ([]tasks.Instance, error) {
	if opt.N <= 0 {
		opt.N = 20
	}
	langs := opt.Languages
	if len(langs) == 0 {
		langs = []string{"python", "python", "go"}
	}
	for _, l := range langs {
		if l != "python" && l != "go" {
			return nil, fmt.Errorf("builtin: unknown language %q (want python or go)", l)
		}
	}
	if err := os.MkdirAll(filepath.Join(out, "repos"), 0o755); err != nil {
		return nil, fmt.Errorf("builtin: %w", err)
	}
	var ins []tasks.Instance
	for i := range opt.N {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		in, err := generateOne(ctx, out, opt.Seed, i, langs)
		if err != nil {
			return nil, fmt.Errorf("builtin: instance %d: %w", i, err)
		}
		ins = append(ins, in)
	}
	f, err := os.Create(filepath.Join(out, "tasks.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("builtin: %w", err)
	}
	if err := tasks.WriteJSONL(f, ins); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("builtin: %w", err)
	}
	return ins, nil
}

// Split returns the split of an instance: its family's if held out whole;
// else, by a hash of the id, one in five held out (heldout), and of the
// rest half in the SFT pool (sft: demonstrations only) and half in the RL
// pool (train). The three pools never share an instance.
func Split(id, family string) string {
	if HeldoutFamilies[family] {
		return tasks.SplitHeldoutFamily
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	switch v := h.Sum32(); {
	case v%5 == 0:
		return tasks.SplitHeldout
	case (v/5)%2 == 0:
		return tasks.SplitSFT
	default:
		return tasks.SplitTrain
	}
}

func camel(snake string) string {
	var b strings.Builder
	for _, p := range strings.Split(snake, "_") {
		if p != "" {
			b.WriteString(strings.ToUpper(p[:1]) + p[1:])
		}
	}
	return b.String()
}

func generateOne(ctx context.Context, out string, seed uint64, i int, langs []string) (tasks.Instance, error) {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	tpl := templates[i%len(templates)]
	lang := langs[r.IntN(len(langs))]
	mod := adjectives[r.IntN(len(adjectives))] + "_" + nouns[r.IntN(len(nouns))]
	used := map[string]bool{}
	pick := func() string {
		for {
			n := verbs[r.IntN(len(verbs))] + "_" + nouns[r.IntN(len(nouns))]
			if !used[n] {
				used[n] = true
				return n
			}
		}
	}
	bug := tpl.gen(r, pick())
	bug.statement = paraphrase(r, bug.statement)
	// One to three correct fillers, the buggy function at any position
	// among them (so the bug's line moves).
	var fill []fn
	for _, k := range r.Perm(len(fillers))[:1+r.IntN(3)] {
		fill = append(fill, fillers[k](r, pick()))
	}
	bugAt := r.IntN(len(fill) + 1)
	where := locations[r.IntN(len(locations))]
	id := fmt.Sprintf("builtin__%s-%d-%d", mod, seed, i)
	var base, fixed, hidden tasks.Tree
	var f2p, p2p []string
	var statement string
	switch lang {
	case "python":
		base, fixed, hidden, f2p, p2p, statement = renderPython(mod, bug, fill, bugAt, where)
	default:
		base, fixed, hidden, f2p, p2p, statement = renderGo(mod, bug, fill, bugAt, where)
	}
	gold, err := tasks.Diff(base, fixed)
	if err != nil {
		return tasks.Instance{}, err
	}
	testPatch, err := tasks.Diff(base, hidden)
	if err != nil {
		return tasks.Instance{}, err
	}
	dir := filepath.Join(out, "repos", id)
	if err := os.RemoveAll(dir); err != nil {
		return tasks.Instance{}, err
	}
	commit, err := tasks.CreateRepo(ctx, dir, base, "Initial version of "+mod)
	if err != nil {
		return tasks.Instance{}, err
	}
	return tasks.Instance{
		InstanceID: id, Repo: "legorl-builtin/" + mod, BaseCommit: commit,
		ProblemStatement: statement, FailToPass: f2p, PassToPass: p2p,
		TestPatch: testPatch, Patch: gold, Version: "2",
		Snapshot: "repos/" + id, Language: lang, Runner: map[string]string{"python": tasks.RunnerPytest, "go": tasks.RunnerGoTest}[lang],
		Family: tpl.family, Template: tpl.family + "/" + tpl.name, Split: Split(id, tpl.family),
	}, nil
}

// variant is a template text in the buggy or the correct version: bugText
// when buggy and the template has one, else text.
func variant(buggy bool, text, bugText string) string {
	if buggy && bugText != "" {
		return bugText
	}
	return text
}

// trees are an instance's three trees: common's files in each; the source
// file srcPath buggy in base and hidden and correct in fixed; and the test
// file testFile replaced in hidden by hiddenTests, the visible tests plus
// the hidden one.
func trees(common tasks.Tree, srcPath, buggy, correct, testFile, hiddenTests string) (base, fixed, hidden tasks.Tree) {
	base, fixed, hidden = tasks.Tree{}, tasks.Tree{}, tasks.Tree{}
	for p, f := range common {
		base[p], fixed[p], hidden[p] = f, f, f
	}
	base[srcPath] = tasks.File{Data: []byte(buggy), Mode: tasks.ModeFile}
	hidden[srcPath] = base[srcPath]
	fixed[srcPath] = tasks.File{Data: []byte(correct), Mode: tasks.ModeFile}
	hidden[testFile] = tasks.File{Data: []byte(hiddenTests), Mode: tasks.ModeFile}
	return base, fixed, hidden
}

func renderPython(mod string, bug fn, fill []fn, bugAt int, where string) (base, fixed, hidden tasks.Tree, f2p, p2p []string, statement string) {
	src := func(buggy bool) string {
		var b strings.Builder
		fmt.Fprintf(&b, "\"\"\"The %s module.\"\"\"\n\n", mod)
		if pre := variant(buggy, bug.pyPre, bug.pyPreBug); pre != "" {
			b.WriteString(pre + "\n")
		}
		body := variant(buggy, bug.py, bug.pyBug)
		var parts []string
		for _, f := range fill {
			parts = append(parts, strings.ReplaceAll(f.py, "{f}", f.name))
		}
		parts = slices.Insert(parts, bugAt, strings.ReplaceAll(body, "{f}", bug.name))
		b.WriteString(strings.Join(parts, "\n\n"))
		return b.String()
	}
	testFn := func(name string, f fn, cases []tcase) string {
		var b strings.Builder
		fmt.Fprintf(&b, "\n\ndef %s():\n", name)
		for _, c := range cases {
			fmt.Fprintf(&b, "    assert %s.%s(%s) == %s\n", mod, f.name, args(pyLit, c.args), pyLit(c.want))
		}
		return b.String()
	}
	testFile := "tests/test_" + mod + ".py"
	visible := "import " + mod + "\n"
	for _, f := range fill {
		visible += testFn("test_"+f.name, f, f.cases)
		p2p = append(p2p, testFile+"::test_"+f.name)
	}
	if len(bug.visibleOK) > 0 {
		visible += testFn("test_"+bug.name+"_basic", bug, bug.visibleOK)
		p2p = append(p2p, testFile+"::test_"+bug.name+"_basic")
	}
	hiddenFile := visible + testFn("test_"+bug.name, bug, bug.cases)
	f2p = []string{testFile + "::test_" + bug.name}
	common := tasks.Tree{
		"README.md":      {Data: []byte(fmt.Sprintf("# %s\n\nA small Python module. Run the tests with `python3 -m pytest`.\n", mod)), Mode: tasks.ModeFile},
		"pyproject.toml": {Data: []byte(fmt.Sprintf("[project]\nname = %q\nversion = \"0.1.0\"\n\n[tool.pytest.ini_options]\npythonpath = [\".\"]\ntestpaths = [\"tests\"]\n", mod)), Mode: tasks.ModeFile},
		testFile:         {Data: []byte(visible), Mode: tasks.ModeFile},
	}
	base, fixed, hidden = trees(common, mod+".py", src(true), src(false), testFile, hiddenFile)
	statement = fillStatement(bug, bug.name, fmt.Sprintf("%s(%s)", bug.name, args(pyLit, bug.cases[0].args)), pyLit(bug.cases[0].want)) +
		"\n\n" + strings.ReplaceAll(where, "{file}", mod+".py")
	return
}

func renderGo(mod string, bug fn, fill []fn, bugAt int, where string) (base, fixed, hidden tasks.Tree, f2p, p2p []string, statement string) {
	src := func(buggy bool) string {
		var b strings.Builder
		fmt.Fprintf(&b, "// Package %s is a small example package.\npackage %s\n\n", mod, mod)
		if len(bug.goImports) > 0 {
			b.WriteString("import (\n")
			for _, im := range bug.goImports {
				fmt.Fprintf(&b, "\t%q\n", im)
			}
			b.WriteString(")\n\n")
		}
		if pre := variant(buggy, bug.goPre, bug.goPreBug); pre != "" {
			b.WriteString(pre + "\n")
		}
		body := variant(buggy, bug.goSrc, bug.goBug)
		var parts []string
		for _, f := range fill {
			parts = append(parts, strings.ReplaceAll(f.goSrc, "{F}", camel(f.name)))
		}
		parts = slices.Insert(parts, bugAt, strings.ReplaceAll(body, "{F}", camel(bug.name)))
		b.WriteString(strings.Join(parts, "\n"))
		return b.String()
	}
	testFn := func(name string, f fn, cases []tcase) string {
		var b strings.Builder
		fmt.Fprintf(&b, "\nfunc %s(t *testing.T) {\n", name)
		for _, c := range cases {
			call := fmt.Sprintf("%s(%s)", camel(f.name), args(goLit, c.args))
			fmt.Fprintf(&b, "\tif got := %s; got != %s {\n\t\tt.Errorf(\"%%s = %%v, want %%v\", %s, got, %s)\n\t}\n", call, goLit(c.want), strconv.Quote(call), goLit(c.want))
		}
		b.WriteString("}\n")
		return b.String()
	}
	testFile := mod + "_test.go"
	visible := "package " + mod + "\n\nimport \"testing\"\n"
	for _, f := range fill {
		visible += testFn("Test"+camel(f.name), f, f.cases)
		p2p = append(p2p, "Test"+camel(f.name))
	}
	if len(bug.visibleOK) > 0 {
		visible += testFn("Test"+camel(bug.name)+"Basic", bug, bug.visibleOK)
		p2p = append(p2p, "Test"+camel(bug.name)+"Basic")
	}
	hiddenFile := visible + testFn("Test"+camel(bug.name), bug, bug.cases)
	f2p = []string{"Test" + camel(bug.name)}
	common := tasks.Tree{
		"README.md": {Data: []byte(fmt.Sprintf("# %s\n\nA small Go package. Run the tests with `go test ./...`.\n", mod)), Mode: tasks.ModeFile},
		"go.mod":    {Data: []byte(fmt.Sprintf("module example.com/%s\n\ngo 1.22\n", mod)), Mode: tasks.ModeFile},
		testFile:    {Data: []byte(visible), Mode: tasks.ModeFile},
	}
	base, fixed, hidden = trees(common, mod+".go", src(true), src(false), testFile, hiddenFile)
	statement = fillStatement(bug, camel(bug.name), fmt.Sprintf("%s(%s)", camel(bug.name), args(goLit, bug.cases[0].args)), goLit(bug.cases[0].want)) +
		"\n\n" + strings.ReplaceAll(where, "{file}", mod+".go")
	return
}

// locations are the ways a statement names the file ({file}). The name
// follows a space, not a backtick, as it does in the command that uses it
// (`cat NAME`): a byte-level BPE tokenizes " silver" and "silver"
// differently, and a small model copies tokens, not spellings.
var locations = []string{
	"The function is in {file}.",
	"It is defined in {file}.",
	"You will find it in {file}.",
}

// paraphrase rewrites a template's statement, "PURPOSE, but FAILURE.",
// in one of three wordings (the first is the statement itself).
func paraphrase(r *rand.Rand, statement string) string {
	purpose, _, ok := strings.Cut(statement, ", but ")
	switch k := r.IntN(3); {
	case !ok || k == 0:
		return statement
	case k == 1:
		return purpose + ". Right now `{call}` does not give {want}."
	default:
		return "Expected `{call}` to return {want}, but it does not. " + strings.ToUpper(purpose[:1]) + purpose[1:] + "."
	}
}

func fillStatement(bug fn, name, call, want string) string {
	return strings.NewReplacer("{f}", name, "{call}", call, "{want}", want).Replace(bug.statement)
}
