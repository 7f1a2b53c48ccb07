package grade

import (
	"strconv"
	"testing"
)

func TestGoSetupFailure(t *testing.T) {
	ev := func(action, output string) string {
		return `{"ImportPath":"example.com/m","Action":"` + action + `","Output":` + strconv.Quote(output) + "}\n"
	}
	cases := []struct {
		name    string
		out     string
		exit    int
		kind    string // "" for none
		trusted bool
	}{
		{"tests ran and failed", `{"Action":"run","Test":"TestA"}` + "\n" + `{"Action":"fail","Test":"TestA"}` + "\n", 1, "", false},
		{"tests passed", `{"Action":"pass","Test":"TestA"}` + "\n", 0, "", false},
		{"read-only cache", ev("build-output", "# example.com/m\n") + ev("build-output", "open "+GoCacheDir+"/e1/e104c5-d: read-only file system\n") + ev("build-fail", "") +
			`{"Action":"output","Package":"example.com/m","Output":"FAIL\texample.com/m [setup failed]\n"}` + "\n", 1, "go_toolchain", true},
		{"full cache", ev("build-output", "write "+GoCacheDir+"/ab/abc-d: no space left on device\n"), 1, "go_toolchain", true},
		{"no GOROOT", ev("build-output", "go: cannot find GOROOT directory: /nonexistent\n"), 1, "go_toolchain", true},
		{"compile error", ev("build-output", "./m.go:3:1: syntax error: unexpected }\n") + ev("build-fail", ""), 1, "go_build", false},
		{"compile error quoting a cache error", ev("build-output", "./m.go:5:13: cannot use \"open "+GoCacheDir+"/e0/x-d: read-only file system\" (untyped string constant) as int value\n") + ev("build-fail", ""), 1, "go_build", false},
		{"cache error outside the cache", ev("build-output", "open /tmp/go-build1/b001/x: no space left on device\n") + ev("build-fail", ""), 1, "go_build", false},
		{"setup failed line only", `{"Action":"output","Package":"example.com/m","Output":"FAIL\texample.com/m [setup failed]\n"}` + "\n", 1, "go_build", false},
		{"nothing ran", "", 2, "go_no_tests", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := goSetupFailure([]byte(c.out), c.exit)
			switch {
			case c.kind == "" && f != nil:
				t.Fatalf("got %+v, want none", f)
			case c.kind != "" && (f == nil || f.kind != c.kind || f.trusted != c.trusted):
				t.Fatalf("got %+v, want kind %s trusted %v", f, c.kind, c.trusted)
			}
		})
	}
}

func TestPytestSetupFailure(t *testing.T) {
	cases := []struct {
		exit  int
		notes []string
		kind  string
	}{
		{0, nil, ""},
		{1, nil, ""},
		{1, []string{"report_mismatch:t"}, ""},
		{2, nil, "pytest_exit_2"},
		{3, nil, "pytest_exit_3"},
		{4, nil, "pytest_exit_4"},
		{5, nil, "pytest_exit_5"},
		{1, []string{"report_missing:plugin.json"}, "report_missing"},
		{127, nil, "runner_exit_127"},
	}
	for _, c := range cases {
		f := pytestSetupFailure(c.exit, c.notes)
		if (f == nil) != (c.kind == "") || (f != nil && f.kind != c.kind) {
			t.Errorf("exit %d notes %v: got %+v, want %q", c.exit, c.notes, f, c.kind)
		}
		if f != nil && f.trusted {
			t.Errorf("exit %d: pytest's own report is never trusted", c.exit)
		}
	}
}
