package monitor

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the dashboard screenshot of the browser test to docs/img/dashboard.png")

// chromiumPath finds Debian's chromium (make tools installs it), or the
// browser $LEGORL_CHROMIUM names. Without one the browser test skips, and
// fails when CI=true.
func chromiumPath(t *testing.T) string {
	names := []string{"chromium", "chromium-browser"}
	if p := os.Getenv("LEGORL_CHROMIUM"); p != "" {
		names = []string{p} // this one or none
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: make tools installs it (apt-get install chromium chromium-driver)")
	}
	t.Skip("chromium not found: make tools installs it; with CI=true this test fails instead")
	return ""
}

// artifactsDir is where the screenshots go: $LEGORL_TEST_ARTIFACTS/monitor,
// or a test temporary folder.
func artifactsDir(t *testing.T) string {
	if d := os.Getenv("LEGORL_TEST_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, "monitor")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// domCheck is a DOM element's expected text; want "" checks only that the
// element exists, and a want ending in "…" is a prefix.
type domCheck struct{ sel, want string }

// checkDOM reads every selector's text in one round trip.
func checkDOM(t *testing.T, ctx context.Context, what string, checks []domCheck) {
	t.Helper()
	sels := make([]string, len(checks))
	for i, c := range checks {
		sels[i] = c.sel
	}
	arg, _ := json.Marshal(sels)
	js := `(` + string(arg) + `).map(s => { const e = document.querySelector(s); return e ? e.textContent.trim().replace(/\s+/g, " ") : null; })`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]*string](js))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, c := range checks {
		switch {
		case got[i] == nil:
			t.Errorf("%s: no element %s", what, c.sel)
		case strings.HasSuffix(c.want, "…"):
			if !strings.HasPrefix(*got[i], strings.TrimSuffix(c.want, "…")) {
				t.Errorf("%s: %s is %q, want %q", what, c.sel, *got[i], c.want)
			}
		case c.want != "" && *got[i] != c.want:
			t.Errorf("%s: %s is %q, want %q", what, c.sel, *got[i], c.want)
		}
	}
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	return png
}

// TestBrowser loads the dashboard in headless Chromium over the fixture
// store, checks the numbers each panel shows, opens a trajectory, watches a
// new commit arrive live, and looks at bad input.
func TestBrowser(t *testing.T) {
	exe := chromiumPath(t)
	its := fixtureRun(runFixture)
	st, badKey := newFixtureStore(t)
	m, err := New(st, Options{Poll: 200 * time.Millisecond, Refresh: 300 * time.Millisecond, Recomputed: fakeRecomputed{its}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	dir := artifactsDir(t)
	t.Logf("screenshots in %s", dir)

	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		jsErrors []string
	)
	err = chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			jsErrors = append(jsErrors, e.ExceptionDetails.Text)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	nav := func(path string, ready string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path), chromedp.WaitVisible(chromedp.CSS(ready))); err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
	}

	// The runs overview.
	nav("/", "#runs")
	checkDOM(t, ctx, "runs", []domCheck{
		{`tr[data-run="fixture"] [data-k="iterations"]`, "3"},
		{`tr[data-run="fixture"] [data-k="rollouts"]`, "72"},
		{`tr[data-run="fixture"] [data-k="train_steps"]`, "6"},
		{`tr[data-run="broken"] [data-k="train_steps"]`, "0"},
		{`tr[data-run="collapse"] [data-k="rollouts"]`, "72"},
	})

	// The run's panels, against counts made here from the fixture's rows.
	nav("/runs/fixture", `section[data-panel="rollouts"]`)
	rs := allRollouts(its, 3)
	var checks []domCheck
	for _, id := range PanelIDs() {
		checks = append(checks, domCheck{fmt.Sprintf(`#panel-%s [data-k="status"]`, id), "ok"})
	}
	for _, h := range []string{"all", "bash", "tools"} {
		for it := 0; it < 3; it++ {
			done, ok := 0, 0
			for _, r := range rs {
				if int(r.Iteration) == it && (h == "all" || r.Harness == h) && r.Status == schemas.StatusCompleted {
					done++
					if r.Reward == 1 {
						ok++
					}
				}
			}
			checks = append(checks, domCheck{fmt.Sprintf(`#panel-reward tr[data-harness="%s"] td[data-iter="%d"]`, h, it),
				fmt.Sprintf("%.3f (%d/%d)", float64(ok)/float64(done), ok, done)})
		}
	}
	for it := 0; it < 3; it++ {
		solvedN, masked := 0, 0
		for _, r := range rs {
			if int(r.Iteration) == it {
				if r.Status == schemas.StatusMasked {
					masked++
				} else if r.Reward == 1 {
					solvedN++
				}
			}
		}
		row := func(panel, k string) string {
			return fmt.Sprintf(`#panel-%s tr[data-iter="%d"] [data-k="%s"]`, panel, it, k)
		}
		checks = append(checks,
			domCheck{row("outcomes", "rollouts"), "24"},
			domCheck{row("outcomes", "solved"), strconv.Itoa(solvedN)},
			domCheck{row("outcomes", "masked"), strconv.Itoa(masked) + "…"},
			domCheck{row("turns", "p50"), "4"},
			domCheck{row("tools", "calls_per_turn"), "0.750"},
			domCheck{row("tools", "collapsed"), ""},
			domCheck{row("verify", "rate"), "1.000"},
			domCheck{fmt.Sprintf(`#panel-response tr[data-iter="%d"][data-dist="call"] [data-k="p50"]`, it), "12"},
			domCheck{fmt.Sprintf(`#panel-response tr[data-iter="%d"][data-dist="episode"] [data-k="max"]`, it), "56"},
		)
		for step := 0; step < 2; step++ {
			ts := its[it].TrainSteps[step]
			sel := func(panel, k string) string {
				return fmt.Sprintf(`#panel-%s tr[data-iter="%d"][data-step="%d"] [data-k="%s"]`, panel, it, step, k)
			}
			checks = append(checks,
				domCheck{sel("logprobs", "pearson"), strconv.FormatFloat(ts.LogprobPearson, 'f', 4, 64)},
				domCheck{sel("training", "loss"), strconv.FormatFloat(ts.Loss, 'g', 4, 64)},
				domCheck{sel("training", "grad_norm"), strconv.FormatFloat(ts.GradNorm, 'g', 4, 64)},
				domCheck{sel("training", "kl"), strconv.FormatFloat(ts.KL, 'g', 4, 64)},
			)
		}
	}
	// The recomputed side of iteration 0, and the two without.
	tokens := 0
	for _, s := range its[0].Segments {
		for _, mk := range s.LossMask {
			tokens += int(mk)
		}
	}
	checks = append(checks,
		domCheck{`#panel-logprobs tr[data-recomputed][data-iter="0"] [data-k="tokens"]`, strconv.Itoa(tokens)},
		domCheck{`#panel-logprobs tr[data-recomputed][data-iter="0"] [data-k="max_abs_diff"]`, "0.01"},
		domCheck{`#panel-logprobs tr[data-recomputed][data-iter="2"] [data-k="missing"]`, "monitor: no recomputed logprobs…"},
		domCheck{`#panel-logprobs .scatter svg`, ""},
		domCheck{`#panel-tools [data-alarm="none"]`, "no alarm…"},
		domCheck{`#panel-overview tr[data-table="rollouts"] [data-k="rows"]`, "72"},
		domCheck{`#panel-overview tr[data-table="segments"] [data-k="files"]`, "6/6"},
		domCheck{`#panel-rollouts [data-k="total"]`, "24"},
	)
	for _, task := range []string{"synth__task-000", "synth__task-005"} {
		for it := 0; it < 3; it++ {
			done, ok := 0, 0
			for _, r := range rs {
				if r.TaskID == task && int(r.Iteration) == it && r.Status == schemas.StatusCompleted {
					done++
					if r.Reward == 1 {
						ok++
					}
				}
			}
			want := "–"
			if done > 0 {
				want = strconv.FormatFloat(float64(ok)/float64(done), 'f', 2, 64)
			}
			checks = append(checks, domCheck{fmt.Sprintf(`#panel-tasks tr[data-task="%s"] td[data-iter="%d"]`, task, it), want})
		}
	}
	checkDOM(t, ctx, "run fixture", checks)
	png := screenshot(t, ctx, dir, "dashboard.png")
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "dashboard.png"), png, 0o644); err != nil {
			t.Error(err)
		}
	}

	// Into a trajectory: the grid cell of task 0 in iteration 1, then its
	// first rollout.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#panel-tasks tr[data-task="synth__task-000"] td[data-iter="1"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel-rollouts tr[data-rollout="fixture-i1-t000-g0"]`)),
		chromedp.Click(chromedp.CSS(`#panel-rollouts tr[data-rollout="fixture-i1-t000-g0"] a.traj`)),
		chromedp.WaitVisible(chromedp.CSS(`#segments`)),
	)
	if err != nil {
		t.Fatalf("click into a trajectory: %v", err)
	}
	r := its[1].Rollouts[0]
	checkDOM(t, ctx, "trajectory", []domCheck{
		{`[data-k="rollout_id"]`, r.RolloutID},
		{`dd[data-k="reward"]`, strconv.FormatFloat(r.Reward, 'g', 4, 64)},
		{`dd[data-k="termination"]`, string(r.Termination)},
		{`dd[data-k="p2p_passed"]`, "tests/test_ok.py::test_base"},
		{`dd[data-k="segments"]`, "2"},
		{`dd[data-k="forks"]`, "1"},
		{`dd[data-k="sampled"]`, "56"},
		{`tr[data-segment="0"] [data-k="completion_tokens"]`, "66"},
		{`tr[data-segment="0"] [data-k="observation"]`, "18"},
		{`tr[data-segment="1"] [data-k="fork"]`, "fork after 10 shared tokens"},
		{`tr[data-turn="1"] [data-k="tool_name"]`, "str_replace"},
		{`tr[data-turn="1"] [data-k="kind"]`, "edit"},
		{`tr[data-turn="2"] [data-k="observation_bytes"]`, strconv.FormatInt(its[1].Steps[2].ObservationBytes, 10)},
	})
	screenshot(t, ctx, dir, "trajectory.png")

	// Live: a commit while the page is open shows up without a reload.
	nav("/runs/fixture", `section[data-panel="rollouts"]`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__same = 1`)); err != nil {
		t.Fatal(err)
	}
	writeIteration(t, st, runFixture, 3, its[3])
	// The rollout stage commits first, then the train stage: wait for both.
	err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#panel-reward tr[data-harness="all"] td[data-iter="3"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel-training tr[data-iter="3"][data-step="1"]`)))
	if err != nil {
		t.Fatalf("iteration 3 never showed: %v", err)
	}
	if same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__same === 1`)); err != nil || !same {
		t.Errorf("the page reloaded instead of redrawing its panels (%v)", err)
	}
	checkDOM(t, ctx, "after the commit", []domCheck{
		{`#panel-overview tr[data-table="rollouts"] [data-k="rows"]`, "96"},
		{`#panel-training tr[data-iter="3"][data-step="1"] [data-k="loss"]`, strconv.FormatFloat(its[3].TrainSteps[1].Loss, 'g', 4, 64)},
	})

	// Bad input: each panel says what is missing and why.
	nav("/runs/broken", `section[data-panel="rollouts"]`)
	checkDOM(t, ctx, "run broken", []domCheck{
		{`#panel-reward [data-k="status"]`, "ok"},
		{`#panel-training [data-k="status"]`, "missing"},
		{`#panel-training [data-k="problem"]`, "train_steps: run broken has no committed train_steps files"},
		{`#panel-training [data-k="missing"]`, "Nothing to show…"},
		{`#panel-response [data-k="status"]`, "partial"},
		{`#panel-response [data-k="problem"]`, "segments: " + badKey + ": storage: checksum mismatch…"},
		{`#panel-overview [data-k="problem"]`, "runs/broken/manifests/extra/iter-000001/v000001.json: manifest unreadable…"},
		{`#panel-overview tr[data-table="segments"] [data-k="files"]`, "3/4"},
	})
	screenshot(t, ctx, dir, "broken.png")

	nav("/runs/collapse", `section[data-panel="rollouts"]`)
	checkDOM(t, ctx, "run collapse", []domCheck{
		{`#panel-tools [data-alarm="tool-collapse"]`, "tool use collapsed at iteration 2: 0.000 tool calls per turn, below 50% of iteration 0's 0.750"},
		{`#panel-tools tr[data-iter="2"] [data-k="collapsed"]`, "collapsed"},
		{`#panel-verify tr[data-iter="2"] [data-k="rate"]`, "0.000"},
	})

	// A run with no data yet, then its first commit.
	nav("/runs/later", `section[data-panel="reward"]`)
	checkDOM(t, ctx, "run later, empty", []domCheck{
		{`p.error`, "run later has no committed manifest yet…"},
		{`#panel-reward [data-k="status"]`, "missing"},
		{`#panel-reward [data-k="problem"]`, "rollouts: run later has no committed manifest yet: no data"},
	})
	writeIteration(t, st, "later", 0, synth.Run(fixtureConfig("later", 1))[0])
	err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#panel-reward tr[data-harness="all"] td[data-iter="0"]`)))
	if err != nil {
		t.Fatalf("the first commit of run later never showed: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(jsErrors) > 0 {
		t.Errorf("script errors: %v", jsErrors)
	}
}
