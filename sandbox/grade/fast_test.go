package grade_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/tasks"
)

var (
	pytestOnlyOnce sync.Once
	pytestOnly     *grade.Grader
)

// pytestGrader is a Grader over the shared local backend that never uses
// the fast runner: the reference.
func pytestGrader(t testing.TB) *grade.Grader {
	b := backendFor(t, "local")
	pytestOnlyOnce.Do(func() { pytestOnly = grade.New(b, grade.Options{PytestOnly: true}) })
	return pytestOnly
}

// TestFastRunnerSameGrades grades the same diffs with the default grader
// (fast runner first) and with pytest only, and requires the same reward,
// outcome, per-test lists, flags and exit status: the gold patch and the
// empty diff of every Python instance, and on a few instances wrong
// patches of every kind the fast runner answers (wrong values, built-in
// exceptions, recursion, a helper module, output and stdin) or declines
// (values of the task's own classes, a module that does not import, exits
// at import, a module shadowing an installed one).
func TestFastRunnerSameGrades(t *testing.T) {
	_, ins := suite(t)
	fast, ref := grader(t), pytestGrader(t)
	ctx := context.Background()
	runs0, decl0 := fast.FastCounts()
	same := func(t *testing.T, in *tasks.Instance, name, diff string) {
		t.Helper()
		r0, d0 := fast.FastCounts()
		a, err := fast.Grade(ctx, "", in, diff)
		r1, d1 := fast.FastCounts()
		t.Logf("%s %s: fast runner %d runs, %d declined", in.InstanceID, name, r1-r0, d1-d0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ref.Grade(ctx, "", in, diff)
		if err != nil {
			t.Fatal(err)
		}
		key := func(g grade.Grade) []any {
			return []any{g.Reward, g.Outcome, g.F2PPassed, g.F2PFailed, g.P2PPassed, g.P2PFailed, g.Flags, g.ExitCode, g.Infra}
		}
		if !reflect.DeepEqual(key(a), key(b)) {
			t.Errorf("%s %s: fast %v, pytest %v (%s | %s)", in.InstanceID, name, key(a), key(b), a.Detail, b.Detail)
		}
	}
	n := 0
	for i := range ins {
		in := &ins[i]
		if in.Language != "python" {
			continue
		}
		n++
		same(t, in, "gold", in.Patch)
		same(t, in, "empty", "")
		if n > 3 {
			continue
		}
		base, err := tasks.ReadTree(ctx, in.Snapshot, in.BaseCommit)
		if err != nil {
			t.Fatal(err)
		}
		files, err := tasks.ParsePatch(in.Patch, tasks.DefaultPatchLimits)
		if err != nil {
			t.Fatal(err)
		}
		mod := files[0].Path()
		fixed := applyTree(t, base, in.Patch)
		fn := strings.TrimPrefix(strings.Split(in.FailToPass[0], "::")[1], "test_")
		edit := func(start tasks.Tree, edits map[string]string) string {
			tr := tasks.Tree{}
			for p, f := range base {
				tr[p] = f
			}
			tr[mod] = start[mod]
			for p, v := range edits {
				tr[p] = tasks.File{Data: []byte(v), Mode: tasks.ModeFile}
			}
			d, err := tasks.Diff(base, tr)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		buggy, good := string(base[mod].Data), string(fixed[mod].Data)
		override := func(src, body string) map[string]string {
			return map[string]string{mod: src + "\n\ndef " + fn + "(*args):\n" + body}
		}
		cases := map[string]string{
			"returns 0":          edit(base, override(buggy, "    return 0\n")),
			"returns None":       edit(base, override(buggy, "    pass\n")),
			"returns a list":     edit(base, override(buggy, "    return [1, 'x', None]\n")),
			"raises ValueError":  edit(base, override(buggy, "    raise ValueError('no', 3)\n")),
			"raises KeyError":    edit(base, override(buggy, "    return {}['k']\n")),
			"recursion":          edit(base, override(buggy, "    return "+fn+"(*args)\n")),
			"reads stdin":        edit(base, override(buggy, "    try:\n        input()\n    except OSError:\n        return 'captured'\n    return 'eof'\n")),
			"prints":             edit(fixed, map[string]string{mod: good + "\nprint('at import ' * 1000)\nimport sys\nsys.stderr.write('err\\n')\n"}),
			"fix plus a helper":  edit(fixed, map[string]string{"helper_mod.py": "X = 1\n"}),
			"own class, unequal": edit(base, override(buggy, "    class W:\n        def __eq__(self, o):\n            return False\n    return W()\n")),
			"own class, equal":   edit(base, override(buggy, "    class W:\n        def __eq__(self, o):\n            return True\n    return W()\n")),
			"own exception":      edit(base, override(buggy, "    class E(Exception):\n        pass\n    raise E('x')\n")),
			"chained exception":  edit(base, override(buggy, "    try:\n        [][1]\n    except IndexError:\n        raise ValueError('y')\n")),
			"SystemExit in test": edit(base, override(buggy, "    raise SystemExit(0)\n")),
			"syntax error":       edit(base, map[string]string{mod: buggy + "\ndef broken(:\n"}),
			"error at import":    edit(fixed, map[string]string{mod: good + "\nraise RuntimeError('import')\n"}),
			"sys.exit at import": edit(fixed, map[string]string{mod: "import sys\nsys.exit(0)\n" + good}),
			"os._exit at import": edit(fixed, map[string]string{mod: "import os\nos._exit(0)\n" + good}),
			"shadows json":       edit(fixed, map[string]string{"json.py": "X = 1\n"}),
			"fix in tests/":      edit(base, map[string]string{strings.TrimSuffix(strings.Split(in.FailToPass[0], "::")[0], "test_"+strings.TrimSuffix(mod, ".py")+".py") + mod: good}),
		}
		if n == 1 {
			// Recursion reaches the limit at the same depth as under pytest,
			// at import and in a test: the fix counts only at some depths.
			probe := "\n\ndef _probe():\n    def f(n):\n        try:\n            return f(n + 1)\n        except RecursionError:\n            return n\n    return f(0)\n\n\n" +
				"_AT_IMPORT = _probe()\n_gold = " + fn + "\n"
			for _, m := range []string{"2", "3", "5", "7"} {
				cases["depth in a test % "+m] = edit(fixed, override(good+probe, "    return _gold(*args) if _probe() % "+m+" == 0 else None\n"))
				cases["depth at import % "+m] = edit(fixed, override(good+probe, "    return _gold(*args) if _AT_IMPORT % "+m+" == 0 else None\n"))
			}
		}
		for name, d := range cases {
			same(t, in, name, d)
		}
	}
	runs, decl := fast.FastCounts()
	runs, decl = runs-runs0, decl-decl0
	t.Logf("fast runner: %d runs, %d declined", runs, decl)
	if runs == 0 || decl == 0 || decl*3 > runs {
		t.Fatalf("fast runner: %d runs, %d declined: want most answered and some declined", runs, decl)
	}
}
