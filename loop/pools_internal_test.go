package loop

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// pool makes n tasks of each family, interleaved: a-0, b-0, a-1, b-1, ...;
// a task's template is its family's /even or /odd by its number.
func pool(n int, families ...string) []tasks.Instance {
	var out []tasks.Instance
	for i := range n {
		for _, f := range families {
			out = append(out, tasks.Instance{InstanceID: fmt.Sprintf("%s-%d", f, i), Family: f,
				Template: f + []string{"/even", "/odd"}[i%2]})
		}
	}
	return out
}

func TestDrawByVariance(t *testing.T) {
	p := pool(100, "never", "half", "always")
	outcomes := map[string][2]int{}
	for i := range 10 { // 10 tasks of each family seen, G = 8
		outcomes[fmt.Sprintf("never-%d", i)] = [2]int{8, 0}
		outcomes[fmt.Sprintf("half-%d", i)] = [2]int{8, 4}
		outcomes[fmt.Sprintf("always-%d", i)] = [2]int{8, 8}
	}
	used := map[string]bool{"half-0": true, "half-1": true}
	draw := func(seed uint64, k int) []tasks.Instance {
		out, _ := drawByVariance(rand.New(rand.NewPCG(seed, 1)), p, used, outcomes, k, false)
		return out
	}
	got := draw(1, 60)
	byFamily := map[string]int{}
	seen := map[string]bool{}
	for _, in := range got {
		byFamily[in.Family]++
		if seen[in.InstanceID] || used[in.InstanceID] {
			t.Errorf("%s drawn twice or already used", in.InstanceID)
		}
		seen[in.InstanceID] = true
	}
	// Weights: p = 1/82 and 81/82 give 0.012 each, p = 41/82 gives 0.25:
	// about 91% of the draws go to "half".
	if len(got) != 60 || byFamily["half"] < 45 || byFamily["never"] > 9 || byFamily["always"] > 9 {
		t.Errorf("draws by family %v (of %d), want most of 60 from half", byFamily, len(got))
	}
	// The family's tasks come in pool order, skipping the used ones.
	for _, in := range got {
		if in.Family == "half" {
			if in.InstanceID != "half-2" {
				t.Errorf("first half task %s, want half-2", in.InstanceID)
			}
			break
		}
	}
	if fmt.Sprint(draw(1, 60)) != fmt.Sprint(got) || fmt.Sprint(draw(2, 60)) == fmt.Sprint(got) {
		t.Error("the draw is not a function of its seed")
	}
	if len(used) != 2 {
		t.Error("drawByVariance changed the caller's used set")
	}
	// Without outcomes every family weighs the same.
	_, desc := drawByVariance(rand.New(rand.NewPCG(1, 1)), p, nil, nil, 3, false)
	if desc != "always 0.33 (0/0), half 0.33 (0/0), never 0.33 (0/0)" {
		t.Errorf("weights %q", desc)
	}
	// A family used up starts again.
	small := pool(2, "x")
	out, _ := drawByVariance(rand.New(rand.NewPCG(1, 1)), small, nil, nil, 5, false)
	if fmt.Sprint(ids(out)) != "[x-0 x-1 x-0 x-1 x-0]" {
		t.Errorf("used-up family: %v", ids(out))
	}
}

// TestDrawByTemplateVariance: a family whose templates are solved always
// and never looks like one near 0.5; by template its arms weigh little.
func TestDrawByTemplateVariance(t *testing.T) {
	p := pool(100, "split", "half") // split/even always passes, split/odd never; half's both half the time
	outcomes := map[string][2]int{}
	for i := range 20 {
		outcomes[fmt.Sprintf("split-%d", i)] = [2]int{8, 8 * (1 - i%2)}
		outcomes[fmt.Sprintf("half-%d", i)] = [2]int{8, 4}
	}
	for _, tc := range []struct {
		byTemplate bool
		minHalf    int
		maxHalf    int
		desc       string
	}{
		{false, 25, 55, "half 0.50 (80/160), split 0.50 (80/160)"},
		{true, 70, 80, "half/even 0.48 (40/80), half/odd 0.48 (40/80), split/even 0.02 (80/80), split/odd 0.02 (0/80)"},
	} {
		got, desc := drawByVariance(rand.New(rand.NewPCG(3, 1)), p, nil, outcomes, 80, tc.byTemplate)
		half := 0
		for _, in := range got {
			if in.Family == "half" {
				half++
			}
		}
		if half < tc.minHalf || half > tc.maxHalf || desc != tc.desc {
			t.Errorf("byTemplate %v: %d of 80 draws from half, want %d-%d; weights %q, want %q", tc.byTemplate, half, tc.minHalf, tc.maxHalf, desc, tc.desc)
		}
	}
}

func ids(ins []tasks.Instance) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.InstanceID)
	}
	return out
}

// TestKeeper: rl.probe keeps the earliest best probe, and patience counts
// the probes since it.
func TestKeeper(t *testing.T) {
	for _, tc := range []struct {
		name     string
		patience int
		probes   []float64 // after 0, 10, 20, ... iterations
		at       int
		best     float64
		stopAt   int // index of the probe after which stop() is first true; -1: never
	}{
		{"rises", 2, []float64{0.1, 0.2, 0.3}, 20, 0.3, -1},
		{"peaks then decays", 2, []float64{0.1, 0.3, 0.2, 0.25, 0.4}, 10, 0.3, 3},
		{"tie keeps the earliest", 0, []float64{0.2, 0.2, 0.1}, 0, 0.2, -1},
		{"never better than the start", 1, []float64{0.2, 0.1, 0.15}, 0, 0.2, 1},
		{"all zero", 0, []float64{0, 0, 0}, 0, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := keeper{patience: tc.patience}
			stopAt := -1
			for i, p := range tc.probes {
				if stopAt >= 0 {
					break // the loop stops here
				}
				k.add(i*10, p)
				if k.stop() {
					stopAt = i
				}
			}
			if k.at != tc.at || k.best != tc.best || stopAt != tc.stopAt {
				t.Errorf("kept %d (%.2f), stop after probe %d; want %d (%.2f), %d", k.at, k.best, stopAt, tc.at, tc.best, tc.stopAt)
			}
		})
	}
}

// TestIterationTasksCountsRepeats: once the RL pool is used up, an
// iteration's tasks repeat earlier ones; iterationTasks counts them, says
// so in the log, and repeatedTasks (what a resumed run reads back from the
// task files) counts the same.
func TestIterationTasksCountsRepeats(t *testing.T) {
	dir := t.TempDir()
	ins, err := builtin.Generate(context.Background(), filepath.Join(dir, "suite"), builtin.Options{N: 40, Seed: 1, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	l := &looper{cfg: Config{Run: "r", WorkDir: dir, Builtin: Builtin{Seed: 1}, RL: RL{TasksPerIteration: 4}},
		o: Options{Log: &log}, instances: ins}
	pool, err := l.iterationPool()
	if err != nil || len(pool) < 5 {
		t.Fatalf("pool of %d tasks: %v", len(pool), err)
	}
	for i := range 2*len(pool)/4 + 1 {
		log.Reset()
		_, got, err := l.iterationTasks(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		want := min(4, max(0, (i+1)*4-len(pool))) // order: walks the pool, then starts again
		if got != want {
			t.Errorf("iteration %d: %d repeated tasks, want %d", i, got, want)
		}
		if again, err := l.repeatedTasks(i); err != nil || again != got {
			t.Errorf("iteration %d: repeatedTasks %d, %v; iterationTasks said %d", i, again, err, got)
		}
		if said := strings.Contains(log.String(), "were rolled out by earlier iterations"); said != (want > 0) {
			t.Errorf("iteration %d (%d repeated): log %q", i, want, log.String())
		}
	}
}
