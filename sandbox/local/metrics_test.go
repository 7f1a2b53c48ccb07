//go:build linux

package local_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/sandboxtest"
)

// TestMetrics creates real sandboxes on a backend with metrics, runs
// commands that complete, fail and time out, closes them, and reads the
// registry: sandboxes created and live, a failed create, one Exec counted
// per command under its outcome, one duration observed per Exec.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	met := sandbox.NewMetrics(reg)
	b := backend(t, local.Options{Metrics: met})
	ctx := context.Background()
	ws := sandboxtest.Workspace(t)
	value := func(name string, labels ...string) float64 {
		t.Helper()
		return gathered(t, reg, name, labels...)
	}

	a, err := b.Create(ctx, sandbox.Spec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := b.Create(ctx, sandbox.Spec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, sandbox.Spec{Workspace: filepath.Join(ws, "missing")}); err == nil {
		t.Fatal("a sandbox of a missing workspace")
	}
	if v := value("legorl_sandbox_created_total", "backend", "local"); v != 2 {
		t.Errorf("created %v, want 2", v)
	}
	if v := value("legorl_sandbox_create_failures_total", "backend", "local"); v != 1 {
		t.Errorf("create failures %v, want 1", v)
	}
	if v := value("legorl_sandbox_live", "backend", "local"); v != 2 {
		t.Errorf("live %v, want 2", v)
	}

	exec := func(sb sandbox.Sandbox, script string, timeout time.Duration, want sandbox.Outcome) {
		t.Helper()
		res, _ := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", script}, Timeout: timeout})
		if res.Outcome != want {
			t.Fatalf("%q: outcome %s, want %s (%s)", script, res.Outcome, want, res.Detail)
		}
	}
	exec(a, "true", time.Minute, sandbox.OutcomeCompleted)
	exec(a, "exit 3", time.Minute, sandbox.OutcomeCompleted)
	exec(c, "echo hi", time.Minute, sandbox.OutcomeCompleted)
	exec(c, "sleep 30", 300*time.Millisecond, sandbox.OutcomeTimeout)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close() // a second Close counts nothing
	if _, err := c.Exec(ctx, sandbox.Cmd{Args: []string{"true"}}); err == nil {
		t.Fatal("Exec after Close succeeded")
	}

	for _, w := range []struct {
		outcome string
		want    float64
	}{{"completed", 3}, {"timeout", 1}, {sandbox.OutcomeError, 1}, {"resource_limit", 0}} {
		if v := value("legorl_sandbox_execs_total", "backend", "local", "outcome", w.outcome); v != w.want {
			t.Errorf("execs{outcome=%s} = %v, want %v", w.outcome, v, w.want)
		}
	}
	if v := value("legorl_sandbox_live", "backend", "local"); v != 1 {
		t.Errorf("live %v after one Close, want 1", v)
	}
	count, sum := histogram(t, reg, "legorl_sandbox_exec_duration_seconds")
	if count != 5 || sum < 0.3 {
		t.Errorf("exec durations: %d observed summing to %vs, want 5 and at least the 0.3s timeout", count, sum)
	}
	a.Close()
	if v := value("legorl_sandbox_live", "backend", "local"); v != 0 {
		t.Errorf("live %v after closing both, want 0", v)
	}
	if n := testutil.CollectAndCount(reg, "legorl_sandbox_execs_total"); n != 3 {
		t.Errorf("%d exec outcome series, want 3", n)
	}
}

// gathered returns the value of the counter or gauge name whose labels
// include the given name/value pairs; 0 when there is none.
func gathered(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// histogram returns the sample count and sum of the one histogram name.
func histogram(t *testing.T, g prometheus.Gatherer, name string) (uint64, float64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("no histogram %s", name)
	return 0, 0
}
