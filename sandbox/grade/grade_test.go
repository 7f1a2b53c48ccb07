package grade_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// suites are generated once per test binary.
var (
	suiteOnce sync.Once
	suiteDir  string
	suiteIns  []tasks.Instance
	suiteErr  error
	graderMu  sync.Mutex
	theGrader *grade.Grader
)

func TestMain(m *testing.M) {
	local.Init()
	code := m.Run()
	if suiteDir != "" {
		os.RemoveAll(suiteDir)
	}
	os.Exit(code)
}

func backend() sandbox.Backend { return local.New(local.Options{}) }

// suite returns the shared generated suite: every template once, Python
// and Go.
func suite(t testing.TB) (string, []tasks.Instance) {
	t.Helper()
	suiteOnce.Do(func() {
		suiteDir, suiteErr = os.MkdirTemp("", "legorl-grade-suite-")
		if suiteErr != nil {
			return
		}
		py, err := builtin.Generate(context.Background(), filepath.Join(suiteDir, "py"), builtin.Options{N: 13, Seed: 3, Languages: []string{"python"}})
		if err != nil {
			suiteErr = err
			return
		}
		gl, err := builtin.Generate(context.Background(), filepath.Join(suiteDir, "go"), builtin.Options{N: 2, Seed: 4, Languages: []string{"go"}})
		if err != nil {
			suiteErr = err
			return
		}
		for i := range py {
			py[i].Snapshot = filepath.Join(suiteDir, "py", py[i].Snapshot)
		}
		for i := range gl {
			gl[i].Snapshot = filepath.Join(suiteDir, "go", gl[i].Snapshot)
		}
		suiteIns = append(py, gl...)
	})
	if suiteErr != nil {
		t.Fatal(suiteErr)
	}
	return suiteDir, suiteIns
}

// pick returns the first instance of a language (and family, if given).
func pick(t testing.TB, lang, family string) *tasks.Instance {
	t.Helper()
	_, ins := suite(t)
	for i := range ins {
		if ins[i].Language == lang && (family == "" || ins[i].Family == family) {
			in := ins[i]
			return &in
		}
	}
	t.Fatalf("no %s instance of family %q", lang, family)
	return nil
}

func grader(t testing.TB) *grade.Grader {
	graderMu.Lock()
	defer graderMu.Unlock()
	if theGrader == nil {
		theGrader = grade.New(backend(), grade.Options{})
	}
	return theGrader
}

func mustGrade(t *testing.T, in *tasks.Instance, diff string) grade.Grade {
	t.Helper()
	g, err := grader(t).Grade(context.Background(), "", in, diff)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: reward %v outcome %s flags %v (%.2fs setup, %.2fs tests) %s", in.InstanceID, g.Reward, g.Outcome, g.Flags, g.SetupSeconds, g.TestSeconds, g.Detail)
	return g
}

func TestGradeGoldAndBase(t *testing.T) {
	for _, lang := range []string{"python", "go"} {
		t.Run(lang, func(t *testing.T) {
			in := pick(t, lang, "")
			gold := mustGrade(t, in, in.Patch)
			if gold.Reward != 1 || gold.Outcome != sandbox.OutcomeCompleted || len(gold.F2PPassed) != len(in.FailToPass) || len(gold.P2PPassed) != len(in.PassToPass) {
				t.Fatalf("gold patch: %+v", gold)
			}
			base := mustGrade(t, in, "")
			if base.Reward != 0 || base.Outcome != sandbox.OutcomeCompleted || len(base.F2PFailed) != len(in.FailToPass) || len(base.P2PPassed) != len(in.PassToPass) {
				t.Fatalf("base: %+v", base)
			}
		})
	}
}
