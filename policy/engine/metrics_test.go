package engine

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestMetrics runs real generations and a hot swap on an engine with
// metrics, and checks that every counter moved by what the generations
// report: tokens sampled, prompt tokens prefilled (less the cached
// prefix), one step per token fed, the swap and the version.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	e := New(tinyModel(t, "tiny.json", 4, 0), 3, Options{Metrics: met})
	defer e.Close()
	val := func(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
	if v := val(met.version); v != 3 {
		t.Errorf("policy version %v, want 3", v)
	}
	// eventually waits for the loop to update the gauges, which it does
	// after the step that ended a request.
	eventually := func(what string, c prometheus.Collector, want float64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); val(c) != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v, want %v", what, val(c), want)
			}
		}
	}

	prompt := randPrompt(1, 20)
	sawRunning := false
	g, err := e.Generate(context.Background(), Request{Session: "s", Prompt: prompt, MaxTokens: 40, Sampling: DefaultSampling(1)},
		func(tk Token) {
			if !sawRunning { // the gauge counts this request until its last step
				for deadline := time.Now().Add(2 * time.Second); !sawRunning && time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
					sawRunning = val(met.running) == 1
				}
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if !sawRunning {
		t.Error("running sequences never 1 during a generation")
	}
	n := len(g.Tokens)
	if n != 40 {
		t.Fatalf("%d tokens, want 40 (no stop token)", n)
	}
	if v := val(met.generated); v != float64(n) {
		t.Errorf("generated tokens %v, want %d", v, n)
	}
	if v := val(met.prefill); v != float64(len(prompt)) {
		t.Errorf("prefill tokens %v, want the prompt's %d", v, len(prompt))
	}
	// One step for the prompt (it samples the first token), one to feed
	// each sampled token back (the last one too).
	if v := val(met.steps); v != float64(1+n) {
		t.Errorf("steps %v, want %d", v, 1+n)
	}
	if c := histogramOf(t, reg, "legorl_engine_step_duration_seconds"); c.GetSampleCount() != uint64(1+n) || !(c.GetSampleSum() > 0) {
		t.Errorf("step durations: %d observed, sum %v", c.GetSampleCount(), c.GetSampleSum())
	}
	if c := histogramOf(t, reg, "legorl_engine_queue_wait_seconds"); c.GetSampleCount() != 1 {
		t.Errorf("queue waits: %d observed, want 1", c.GetSampleCount())
	}
	eventually("running sequences", met.running, 0)
	eventually("sessions", met.sessions, 1)

	// The session's cache holds prompt and completion: a follow-up
	// prefills only its new tokens.
	follow := append(append(append([]int32{}, prompt...), g.Tokens...), 7, 8, 9)
	g2 := generate(t, e, Request{Session: "s", Prompt: follow, MaxTokens: 2, Sampling: DefaultSampling(2)})
	if g2.CachedTokens != len(prompt)+n {
		t.Fatalf("follow-up: %d cached tokens, want %d", g2.CachedTokens, len(prompt)+n)
	}
	if v := val(met.prefill); v != float64(len(prompt)+3) {
		t.Errorf("prefill tokens %v after the follow-up, want %d", v, len(prompt)+3)
	}
	if v := val(met.generated); v != float64(n+len(g2.Tokens)) {
		t.Errorf("generated tokens %v, want %d", v, n+len(g2.Tokens))
	}
	generate(t, e, Request{Session: "other", Prompt: prompt[:5], MaxTokens: 1, Sampling: DefaultSampling(3)})
	eventually("sessions", met.sessions, 2)
	// Prompt tokens and the prefix cache's hits: the follow-up reused its
	// session's cache; "other" shares only 4 tokens with "s", too few to
	// copy.
	if p, c, sh := val(met.prompts), val(met.cached), val(met.shared); p != float64(len(prompt)+len(follow)+5) || c != float64(len(prompt)+n) || sh != 0 {
		t.Errorf("prompt tokens %v, cached %v, shared %v; want %d, %d, 0", p, c, sh, len(prompt)+len(follow)+5, len(prompt)+n)
	}

	if err := e.Swap(tinyModel(t, "tiny.json", 5, 0), 9); err != nil {
		t.Fatal(err)
	}
	eventually("swaps", met.swaps, 1)
	eventually("policy version", met.version, 9)
	e.Close()
	if v := val(met.sessions); v != 0 {
		t.Errorf("sessions %v after Close, want 0", v)
	}
	if n := testutil.CollectAndCount(reg); n != 12 {
		t.Errorf("%d series registered, want 12", n)
	}
}

// TestMetricsNil: an engine without metrics runs, and nil metrics accept
// every call.
func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.sync(&gauges{}, 1, 1)
	m.step(time.Second, 1, 1)
	m.admitted(time.Second)
	m.installed(1, true)
	m.prompt(3, 2, 1)
	e := New(tinyModel(t, "tiny.json", 4, 0), 1, Options{})
	defer e.Close()
	generate(t, e, Request{Prompt: randPrompt(1, 4), MaxTokens: 2, Sampling: DefaultSampling(1)})
}

// histogramOf returns the one histogram of the metric family name.
func histogramOf(t *testing.T, g prometheus.Gatherer, name string) *dto.Histogram {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("no histogram %s", name)
	return nil
}
