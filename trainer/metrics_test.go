package trainer_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/legorl/legorl/trainer"
)

// TestMetrics runs a real update (Train over a stored iteration, two
// optimizer steps) with metrics, and checks the counters against the
// steps it returns and the gauges against its last step and its gate.
func TestMetrics(t *testing.T) {
	e := newE2E(t, nil)
	reg := prometheus.NewRegistry()
	opts := e.options(filepath.Join(e.work, "v1"))
	opts.Metrics = trainer.NewMetrics(reg)
	res, err := trainer.Train(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	steps := res.Update.Steps
	taken, tokens := 0, 0
	for _, s := range steps {
		if !s.Skipped {
			taken++
			tokens += s.Tokens
		}
	}
	last := steps[len(steps)-1]
	if taken != 2 || last.Skipped || tokens == 0 || last.GradNorm == 0 {
		t.Fatalf("fixture: %d steps taken of %d, %d tokens, last grad norm %v", taken, len(steps), tokens, last.GradNorm)
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"legorl_trainer_steps_total", float64(taken)},
		{"legorl_trainer_tokens_total", float64(tokens)},
		{"legorl_trainer_loss", last.Stats.Loss},
		{"legorl_trainer_grad_norm", last.GradNorm},
		{"legorl_trainer_entropy", last.Stats.Entropy()},
		{"legorl_trainer_kl", last.Stats.KL()},
		{"legorl_trainer_clip_fraction", last.Stats.ClipFraction()},
		{"legorl_trainer_tokens_per_second", float64(last.Tokens) / last.Seconds},
		{"legorl_trainer_gate_pearson", res.Update.Gate.Overall.Pearson},
	} {
		if got := gaugeOrCounter(t, reg, c.name); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if p := res.Update.Gate.Overall.Pearson; !(p > 0.9) {
		t.Errorf("fixture: gate pearson %v", p)
	}
	if n := testutil.CollectAndCount(reg); n != 9 {
		t.Errorf("%d series, want 9", n)
	}
}

// gaugeOrCounter returns the value of the one series of name.
func gaugeOrCounter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
