package monitor

import (
	"context"
	"math"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/schemas"
)

func newTestMonitor(t testing.TB, opts Options) (*Monitor, string) {
	t.Helper()
	st, bad := newFixtureStore(t)
	m, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, bad
}

func panelData(t *testing.T, m *Monitor, run, id string, q url.Values) PanelResult {
	t.Helper()
	res, err := m.Panel(context.Background(), run, id, q)
	if err != nil {
		t.Fatalf("panel %s of %s: %v", id, run, err)
	}
	return res
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestPanels checks every panel's numbers against the fixture's rows,
// counted here the plain way.
func TestPanels(t *testing.T) {
	its := fixtureRun(runFixture)
	m, _ := newTestMonitor(t, Options{Recomputed: fakeRecomputed{its}})
	rs := allRollouts(its, 3)
	tests := []struct {
		run, panel string
		q          url.Values
		check      func(t *testing.T, res PanelResult)
	}{
		{runFixture, "overview", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(OverviewData)
			if len(d.Manifests) != 6 {
				t.Errorf("manifests: %d, want 6 (rollout and train stages of 3 iterations)", len(d.Manifests))
			}
			want := map[string]int64{"rollouts": 3 * 24, "segments": 3 * 25, "steps": 3 * 24 * 4, "train_steps": 3 * 2}
			for _, ts := range d.Tables {
				if ts.Status != "ok" || ts.Rows != want[ts.Table] || ts.Read != ts.Files {
					t.Errorf("table %s: %+v, want ok with %d rows", ts.Table, ts, want[ts.Table])
				}
			}
		}},
		{runFixture, "reward", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(RewardData)
			if !reflect.DeepEqual(d.Iterations, []int{0, 1, 2}) || len(d.Series) != 3 || d.Series[0].Harness != "all" {
				t.Fatalf("iterations %v, series %d", d.Iterations, len(d.Series))
			}
			for _, s := range d.Series {
				for _, p := range s.Points {
					var done, ok, masked int
					var sum float64
					for _, r := range rs {
						if int(r.Iteration) != p.Iteration || (s.Harness != "all" && r.Harness != s.Harness) {
							continue
						}
						if r.Termination.Status() == schemas.StatusMasked {
							masked++
							continue
						}
						done++
						sum += r.Reward
						if r.Reward == 1 {
							ok++
						}
					}
					if p.Completed != done || p.Solved != ok || p.Masked != masked || !near(float64(p.PassRate), float64(ok)/float64(done)) || !near(float64(p.MeanReward), sum/float64(done)) {
						t.Errorf("%s iteration %d: %+v, want %d/%d solved, %d masked", s.Harness, p.Iteration, p, ok, done, masked)
					}
				}
			}
		}},
		{runFixture, "outcomes", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(OutcomeData)
			for _, row := range d.Rows {
				var masked, solvedN, failed int
				groups := map[string]map[float64]int{}
				for _, r := range rs {
					if int(r.Iteration) != row.Iteration {
						continue
					}
					if r.Status == schemas.StatusMasked {
						masked++
						continue
					}
					if groups[r.GroupID] == nil {
						groups[r.GroupID] = map[float64]int{}
					}
					groups[r.GroupID][r.Reward]++
					if r.Reward == 1 {
						solvedN++
					} else {
						failed++
					}
				}
				noGrad, zv := 0, 0
				for _, g := range groups {
					if len(g) == 1 {
						zv++
						for _, n := range g {
							noGrad += n
						}
					}
				}
				sumFailed, sumMasked := 0, 0
				for _, n := range row.Failed {
					sumFailed += n
				}
				for _, n := range row.MaskedBy {
					sumMasked += n
				}
				if row.Rollouts != 24 || row.Masked != masked || sumMasked != masked || row.Solved != solvedN || sumFailed != failed ||
					row.NoGradient != noGrad || row.ZeroVarianceGroups != zv || row.Groups != len(groups) {
					t.Errorf("iteration %d: %+v; want masked %d, solved %d, failed %d, no gradient %d in %d/%d groups", row.Iteration, row, masked, solvedN, failed, noGrad, zv, len(groups))
				}
			}
		}},
		{runFixture, "turns", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(TurnsData)
			for _, row := range d.Rows {
				if row.P50 != 4 || row.Mean != 4 || row.Max != 4 {
					t.Errorf("iteration %d: %+v, want every episode at 4 turns", row.Iteration, row)
				}
			}
			if len(d.Histogram) != 1 || d.Histogram[0].Count != d.Rows[2].N || d.HistIteration != 2 {
				t.Errorf("histogram %+v of iteration %d", d.Histogram, d.HistIteration)
			}
		}},
		{runFixture, "response", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(ResponseData)
			for i, row := range d.PerCall {
				// 24 rollouts x 4 calls of 12 sampled tokens, plus the fork's call of 8.
				if row.N != 24*4+1 || row.Min != 8 || row.P50 != 12 || row.Max != 12 {
					t.Errorf("per call, iteration %d: %+v", row.Iteration, row)
				}
				ep := d.PerEpisode[i]
				if ep.N != 24 || ep.P50 != 48 || ep.Max != 56 || !near(float64(ep.Mean), (24*48+8)/24.0) {
					t.Errorf("per episode, iteration %d: %+v", ep.Iteration, ep)
				}
			}
		}},
		{runFixture, "tools", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(ToolsData)
			if d.Alarm != "" || d.Baseline != 0.75 || d.BaselineIteration != 0 {
				t.Errorf("alarm %q, baseline %v at %d", d.Alarm, d.Baseline, d.BaselineIteration)
			}
			for _, row := range d.Rows {
				fails := 0
				for _, r := range rs {
					if int(r.Iteration) == row.Iteration && r.Status == schemas.StatusCompleted {
						fails += int(r.ToolParseFailures)
					}
				}
				if row.CallsPerTurn != 0.75 || row.ParseFailures != fails || !near(float64(row.FailuresPerTurn), float64(fails)/float64(row.Turns)) || row.Collapsed {
					t.Errorf("iteration %d: %+v, want 0.75 calls per turn and %d parse failures", row.Iteration, row, fails)
				}
			}
		}},
		{runCollapse, "tools", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(ToolsData)
			if !d.Rows[2].Collapsed || d.Rows[1].Collapsed || d.Rows[2].CallsPerTurn != 0 {
				t.Errorf("rows %+v", d.Rows)
			}
			want := "tool use collapsed at iteration 2: 0.000 tool calls per turn, below 50% of iteration 0's 0.750"
			if d.Alarm != want {
				t.Errorf("alarm %q, want %q", d.Alarm, want)
			}
		}},
		{runFixture, "verify", nil, func(t *testing.T, res PanelResult) {
			for _, row := range res.Data.(VerifyData).Rows {
				// bash, str_replace, view, submit: an edit, then a view.
				if row.Rollouts != 24 || row.Editing != 24 || row.Verified != 24 || row.Rate != 1 || row.EditTurns != 24 {
					t.Errorf("iteration %d: %+v", row.Iteration, row)
				}
			}
		}},
		{runCollapse, "verify", nil, func(t *testing.T, res PanelResult) {
			rows := res.Data.(VerifyData).Rows
			if rows[1].Rate != 1 || rows[2].Rate != 0 || rows[2].Editing != 24 || rows[2].Verified != 0 {
				t.Errorf("rows %+v", rows)
			}
		}},
		{runFixture, "logprobs", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(LogprobData)
			if len(d.Steps) != 6 {
				t.Fatalf("%d steps, want 6", len(d.Steps))
			}
			for i, s := range d.Steps {
				want := its[i/2].TrainSteps[i%2]
				if float64(s.Pearson) != want.LogprobPearson || float64(s.ESS) != want.ESS || float64(s.ISRatioMax) != want.ISRatioMax {
					t.Errorf("step %d: %+v, want %+v", i, s, want)
				}
			}
			if len(d.Recomputed) != 3 {
				t.Fatalf("%d recomputed rows, want 3", len(d.Recomputed))
			}
			for _, a := range d.Recomputed[:2] {
				tokens, maxAbs := 0, 0.0
				var xs, ys []float64
				for _, s := range its[a.Iteration].Segments {
					for tk, mk := range s.LossMask {
						if mk == 1 {
							tokens++
							x, y := float64(s.Logprobs[tk]), float64(s.Logprobs[tk]+shift(tk))
							xs, ys = append(xs, x), append(ys, y)
							maxAbs = math.Max(maxAbs, math.Abs(x-y))
						}
					}
				}
				if a.Segments != 25 || a.Unmatched != 0 || a.Tokens != tokens || math.Abs(float64(a.Pearson)-pearson(xs, ys)) > 1e-9 ||
					math.Abs(float64(a.MaxAbs)-maxAbs) > 1e-6 || len(a.Points) == 0 || len(a.Points) > 600 {
					t.Errorf("iteration %d: %d segments, %d tokens (want %d), pearson %v (want %v), max %v (want %v), %d points",
						a.Iteration, a.Segments, a.Tokens, tokens, a.Pearson, pearson(xs, ys), a.MaxAbs, maxAbs, len(a.Points))
				}
			}
			if a := d.Recomputed[2]; a.Segments != 0 || !strings.Contains(a.Missing, "no recomputed logprobs") {
				t.Errorf("iteration 2: %+v", a)
			}
		}},
		{runFixture, "training", nil, func(t *testing.T, res PanelResult) {
			d := res.Data.(TrainData)
			for i, r := range d.Rows {
				want := its[i/2].TrainSteps[i%2]
				if r.Index != i || r.Iteration != int(want.Iteration) || r.Step != int(want.Step) || float64(r.Loss) != want.Loss ||
					float64(r.GradNorm) != want.GradNorm || float64(r.KL) != want.KL || float64(r.Entropy) != want.Entropy || float64(r.ClipFraction) != want.ClipFraction {
					t.Errorf("row %d: %+v, want %+v", i, r, want)
				}
			}
		}},
		{runFixture, "tasks", nil, func(t *testing.T, res PanelResult) {
			g := res.Data.(TaskGrid)
			if len(g.Tasks) != 6 {
				t.Fatalf("%d tasks", len(g.Tasks))
			}
			for _, row := range g.Tasks {
				for _, c := range row.Cells {
					done, ok := 0, 0
					for _, r := range rs {
						if r.TaskID == row.TaskID && int(r.Iteration) == c.Iteration && r.Status == schemas.StatusCompleted {
							done++
							if r.Reward == 1 {
								ok++
							}
						}
					}
					if c.Rollouts != 4 || c.Completed != done || c.Solved != ok {
						t.Errorf("%s iteration %d: %+v, want %d/%d", row.TaskID, c.Iteration, c, ok, done)
					}
				}
			}
		}},
		{runFixture, "rollouts", url.Values{"iter": {"1"}, "task": {"synth__task-002"}}, func(t *testing.T, res PanelResult) {
			l := res.Data.(RolloutList)
			if l.Iteration != 1 || l.Total != 4 || len(l.Rows) != 4 || l.Rows[0].RolloutID != "fixture-i1-t002-g0" {
				t.Errorf("%+v", l)
			}
		}},
		{runFixture, "rollouts", nil, func(t *testing.T, res PanelResult) {
			if l := res.Data.(RolloutList); l.Iteration != 2 || l.Total != 24 {
				t.Errorf("default: iteration %d, %d rollouts; want the newest, 2, with 24", l.Iteration, l.Total)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.run+"/"+tc.panel, func(t *testing.T) {
			res := panelData(t, m, tc.run, tc.panel, tc.q)
			if res.Status != "ok" {
				t.Fatalf("status %s: %v", res.Status, res.Problems)
			}
			tc.check(t, res)
		})
	}
}

func pearson(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// TestBadInput: a run with no data yet, a missing table, an altered file
// and a manifest that is not JSON each show up in the panels that need
// them, with the reason; nothing fails as a whole.
func TestBadInput(t *testing.T) {
	m, badKey := newTestMonitor(t, Options{})
	ctx := context.Background()
	t.Run("broken", func(t *testing.T) {
		tests := []struct {
			panel, status string
			want          []string // fragments of the problems
		}{
			{"overview", "partial", []string{"runs/broken/manifests/extra/iter-000001/v000001.json", "manifest unreadable"}},
			{"reward", "ok", nil},
			{"response", "partial", []string{badKey, "checksum mismatch"}},
			{"verify", "ok", nil},
			{"training", "missing", []string{"run broken has no committed train_steps files"}},
			{"logprobs", "missing", []string{"train_steps"}},
		}
		for _, tc := range tests {
			res := panelData(t, m, runBroken, tc.panel, nil)
			var text []string
			for _, p := range res.Problems {
				text = append(text, p.Table+" "+p.Key+" "+p.Reason)
			}
			all := strings.Join(text, "\n")
			if res.Status != tc.status {
				t.Errorf("%s: status %s, want %s (%s)", tc.panel, res.Status, tc.status, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("%s: problems %q lack %q", tc.panel, all, w)
				}
			}
		}
		// The altered shard's rows are left out; the rest are shown.
		d := panelData(t, m, runBroken, "response", nil).Data.(ResponseData)
		if d.PerEpisode[0].N != 24 || d.PerEpisode[1].N != 12 {
			t.Errorf("episodes per iteration: %d, %d; want 24 and the 12 of the readable shard", d.PerEpisode[0].N, d.PerEpisode[1].N)
		}
		if _, err := m.Trajectory(ctx, runBroken, "broken-i1-t005-g3"); err != nil {
			t.Errorf("trajectory of a rollout whose segments are unreadable: %v", err)
		}
	})
	t.Run("no data yet", func(t *testing.T) {
		for _, id := range PanelIDs() {
			res := panelData(t, m, "later", id, nil)
			if id == "overview" {
				continue
			}
			if res.Status != "missing" || len(res.Problems) == 0 || !strings.Contains(res.Problems[0].Reason, "no committed manifest yet") {
				t.Errorf("%s: %s %v", id, res.Status, res.Problems)
			}
		}
	})
	t.Run("unknown", func(t *testing.T) {
		if _, err := m.Panel(ctx, runFixture, "nope", nil); err == nil {
			t.Error("unknown panel: no error")
		}
		if _, err := m.Panel(ctx, "../x", "reward", nil); err == nil {
			t.Error("bad run id: no error")
		}
		if _, err := m.Trajectory(ctx, runFixture, "nope"); err == nil {
			t.Error("unknown rollout: no error")
		}
	})
}

// TestLiveRefresh: a manifest committed after the first look shows up once
// the poll interval has passed, with a new version.
func TestLiveRefresh(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st, _ := newFixtureStore(t)
	m, err := New(st, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s1, err := m.Status(ctx, runFixture)
	if err != nil {
		t.Fatal(err)
	}
	writeIteration(t, st, runFixture, 3, fixtureRun(runFixture)[3])
	if s, _ := m.Status(ctx, runFixture); s.Version != s1.Version {
		t.Errorf("version changed within the poll interval: %d -> %d", s1.Version, s.Version)
	}
	now = now.Add(3 * time.Second)
	s2, _ := m.Status(ctx, runFixture)
	if s2.Version != s1.Version+1 || len(s2.Manifests) != 8 {
		t.Errorf("after the commit: version %d (was %d), %d manifests", s2.Version, s1.Version, len(s2.Manifests))
	}
	d := panelData(t, m, runFixture, "reward", nil).Data.(RewardData)
	if !reflect.DeepEqual(d.Iterations, []int{0, 1, 2, 3}) {
		t.Errorf("iterations %v after the commit", d.Iterations)
	}
	// Files are read once: the new commit read one rollouts file more.
	before := m.reads.Load()
	panelData(t, m, runFixture, "reward", nil)
	now = now.Add(3 * time.Second)
	writeIteration(t, st, "fixture", 4, fixtureRun(runCollapse)[0]) // rows of another run: skipped, and said so
	res := panelData(t, m, runFixture, "reward", nil)
	if got := m.reads.Load() - before; got != 1 {
		t.Errorf("%d files read after one more commit, want 1", got)
	}
	if res.Status != "partial" || !strings.Contains(res.Problems[0].Reason, "skipped rows of run collapse") {
		t.Errorf("rows of another run: %s %v", res.Status, res.Problems)
	}
}

func TestTrajectory(t *testing.T) {
	its := fixtureRun(runFixture)
	m, _ := newTestMonitor(t, Options{})
	tr, err := m.Trajectory(context.Background(), runFixture, "fixture-i1-t000-g0")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Problems) > 0 {
		t.Fatalf("problems: %v", tr.Problems)
	}
	r := its[1].Rollouts[0]
	if tr.Rollout.RolloutID != r.RolloutID || tr.Rollout.Reward != r.Reward || len(tr.Steps) != 4 || len(tr.Segments) != 2 || tr.Forks != 1 {
		t.Fatalf("rollout %s reward %v, %d steps, %d segments, %d forks", tr.Rollout.RolloutID, tr.Rollout.Reward, len(tr.Steps), len(tr.Segments), tr.Forks)
	}
	s0, s1 := tr.Segments[0], tr.Segments[1]
	if s0.PromptTokens != 24 || s0.CompletionTokens != 4*12+3*6 || s0.Sampled != 48 || s0.Observation != 18 || len(s0.Runs) != 7 || s0.Fork {
		t.Errorf("segment 0: %+v", s0)
	}
	if s1.PromptTokens != 15 || s1.Sampled != 8 || !s1.Fork || s1.SharedPrefix != 10 || s1.RoutingLayers != 2 {
		t.Errorf("segment 1: %+v", s1)
	}
	if tr.Tokens != 24+66+15+8 || tr.Sampled != 56 {
		t.Errorf("tokens %d, sampled %d", tr.Tokens, tr.Sampled)
	}
}

func TestToolKind(t *testing.T) {
	tests := []struct{ name, args, want string }{
		{"str_replace", "", KindEdit},
		{"Edit", "", KindEdit},
		{"apply_patch", "", KindEdit},
		{"view", "", KindVerify},
		{"Bash", "", KindVerify},
		{"Read", "", KindVerify},
		{"str_replace_editor", `{"command":"view","path":"a.py"}`, KindVerify},
		{"str_replace_editor", `{"command":"create","path":"a.py"}`, KindEdit},
		{"str_replace_editor", `not json`, KindEdit},
		{"submit", "", KindOther},
		{"", "", KindOther},
	}
	for _, tc := range tests {
		if got := ToolKind(tc.name, tc.args); got != tc.want {
			t.Errorf("ToolKind(%q, %q) = %s, want %s", tc.name, tc.args, got, tc.want)
		}
	}
}

func TestDist(t *testing.T) {
	tests := []struct {
		v                 []float64
		p10, p50, p90, mn Num
	}{
		{[]float64{1, 2, 3, 4}, 1, 2, 4, 2.5},
		{[]float64{5}, 5, 5, 5, 5},
		{[]float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, 1, 5, 9, 5.5},
	}
	for _, tc := range tests {
		d := dist(0, tc.v)
		if d.P10 != tc.p10 || d.P50 != tc.p50 || d.P90 != tc.p90 || d.Mean != tc.mn || d.N != len(tc.v) {
			t.Errorf("dist(%v) = %+v", tc.v, d)
		}
	}
	if d := dist(0, nil); d.N != 0 || d.P50.ok() {
		t.Errorf("empty: %+v", d)
	}
	h := histogram([]float64{1, 1, 2, 5}, 20)
	if len(h) != 5 || h[0].Count != 2 || h[1].Count != 1 || h[4].Count != 1 {
		t.Errorf("histogram %+v", h)
	}
}

func TestNumJSON(t *testing.T) {
	for _, tc := range []struct {
		n    Num
		want string
	}{{0.5, "0.5"}, {none(), "null"}, {Num(math.Inf(1)), "null"}} {
		b, err := tc.n.MarshalJSON()
		if err != nil || string(b) != tc.want {
			t.Errorf("%v: %s %v", tc.n, b, err)
		}
	}
}
