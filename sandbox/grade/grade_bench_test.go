package grade_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/tasks"
)

// BenchmarkGradeOverhead grades the gold patch of one task per iteration
// and, as the anchor in the same run, runs the same tests directly on the
// host (no sandbox, no pinned settings, no reports). It reports both in
// ms/op and the grader's overhead (grade - anchor) and ratio.
func BenchmarkGradeOverhead(b *testing.B) {
	for _, lang := range []string{"python", "go"} {
		b.Run(lang, func(b *testing.B) {
			in := pick(b, lang, "wrong_operator")
			g := grader(b)
			ctx := context.Background()
			// Warm the grader's caches (pristine tree, Go cache seed).
			if gr, err := g.Grade(ctx, "", in, in.Patch); err != nil || gr.Reward != 1 {
				b.Fatalf("warm-up grade %+v %v", gr, err)
			}
			dir := b.TempDir()
			if err := tasks.PrepareWorkspace(ctx, in.Snapshot, in.BaseCommit, dir); err != nil {
				b.Fatal(err)
			}
			for _, p := range []string{in.Patch, in.TestPatch} {
				if _, err := tasks.Git(ctx, dir, strings.NewReader(p), "apply", "-"); err != nil {
					b.Fatal(err)
				}
			}
			anchor := func() {
				var cmd *exec.Cmd
				if lang == "go" {
					cmd = exec.Command("go", "test", "-count=1", "-vet=off", "./...")
				} else {
					cmd = exec.Command("/usr/bin/python3", append([]string{"-m", "pytest", "-q", "-p", "no:cacheprovider"}, append(in.FailToPass, in.PassToPass...)...)...)
				}
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("anchor: %v: %s", err, out)
				}
			}
			var gradeT, anchorT time.Duration
			for b.Loop() {
				t0 := time.Now()
				anchor()
				t1 := time.Now()
				gr, err := g.Grade(ctx, "", in, in.Patch)
				if err != nil || gr.Reward != 1 {
					b.Fatalf("grade %+v %v", gr, err)
				}
				anchorT += t1.Sub(t0)
				gradeT += time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(gradeT.Milliseconds())/n, "grade-ms/op")
			b.ReportMetric(float64(anchorT.Milliseconds())/n, "anchor-ms/op")
			b.ReportMetric(float64((gradeT-anchorT).Milliseconds())/n, "overhead-ms/op")
			b.ReportMetric(float64(gradeT)/float64(anchorT), "grade/anchor")
		})
	}
}

// BenchmarkGradeFastRunner grades one Python task per iteration with the
// pytest-only grader and with the default one (fast runner first),
// alternating in the same run: the gold patch and the empty diff (a
// failing grade, what most rollouts of a weak policy are). It reports
// both in ms/op and their ratio.
func BenchmarkGradeFastRunner(b *testing.B) {
	in := pick(b, "python", "wrong_operator")
	fast, ref := grader(b), pytestGrader(b)
	ctx := context.Background()
	for _, diff := range []string{in.Patch, ""} {
		for _, g := range []*grade.Grader{fast, ref} {
			if _, err := g.Grade(ctx, "", in, diff); err != nil {
				b.Fatal(err)
			}
		}
	}
	var fastT, refT time.Duration
	for b.Loop() {
		for _, diff := range []string{in.Patch, ""} {
			t0 := time.Now()
			a, err := ref.Grade(ctx, "", in, diff)
			t1 := time.Now()
			c, err2 := fast.Grade(ctx, "", in, diff)
			fastT += time.Since(t1)
			refT += t1.Sub(t0)
			if err != nil || err2 != nil || a.Reward != c.Reward {
				b.Fatalf("pytest %+v %v, fast %+v %v", a, err, c, err2)
			}
		}
	}
	n := float64(2 * b.N)
	b.ReportMetric(float64(refT.Milliseconds())/n, "pytest-ms/grade")
	b.ReportMetric(float64(fastT.Milliseconds())/n, "fast-ms/grade")
	b.ReportMetric(float64(refT)/float64(fastT), "pytest/fast")
}
