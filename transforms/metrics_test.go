package transforms

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/tasks/builtin"
)

// TestRuntimeMetrics runs a real group (two rollouts of a built-in task:
// local sandboxes, the proxy over the engine and a random-weight policy,
// the bash agent, grading) on a runtime built with metrics attached, then
// the same group again through the DoFn, which adopts its claim. The
// pipeline's counters match the group's outcomes, and the engine, proxy
// and sandbox metrics the runtime was given moved.
func TestRuntimeMetrics(t *testing.T) {
	const tokPath = "../policy/tokenizer/testdata/small/tokenizer.json"
	ctx := context.Background()
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	ins, err := builtin.Generate(ctx, suite, builtin.Options{N: 1, Seed: 5, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := model.ParseConfig([]byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": %d, "hidden_size": 32,
		"intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
		"max_position_embeddings": 4096, "tie_word_embeddings": true}`, tok.VocabSize())))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(mc, 7)
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy")
	if err := m.Save(policy, model.SaveOptions{TokenizerFiles: []string{tokPath}}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	met := RuntimeMetrics{Pipeline: NewMetrics(reg), Engine: engine.NewMetrics(reg),
		Proxy: proxy.NewServerMetrics(reg), Sandbox: sandbox.NewMetrics(reg)}
	SetRuntimeMetrics(met)
	t.Cleanup(func() { SetRuntimeMetrics(RuntimeMetrics{}) })

	cfg := Config{Store: "file://" + filepath.Join(dir, "store"), RunID: "met", Iteration: 1, Group: 2,
		Harness: "bash", MaxTurns: 2, MaxTokens: 16, AgentBinary: self, Policy: policy, PolicyVersion: 3,
		SetupTimeout: time.Minute, AgentTimeout: 2 * time.Minute, GradeTimeout: 2 * time.Minute}.WithDefaults()
	rt, err := newRuntime(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGroup(cfg.RunID, cfg.Stage, cfg.Iteration, cfg.Group, cfg.SeedBase, Task{SuiteDir: suite, Instance: ins[0]})
	res, err := runGroup(ctx, rt, st, cfg, g)
	if err != nil {
		t.Fatal(err)
	}

	p := met.Pipeline
	val := testutil.ToFloat64
	if v := val(p.launched); v != 2 {
		t.Errorf("launched %v, want 2", v)
	}
	ended := map[[2]string]float64{}
	reward, passed := 0.0, 0.0
	for _, o := range res.Rollouts {
		t.Logf("rollout %s: %s/%s reward %v", o.RolloutID, o.Status, o.Termination, o.Reward)
		ended[[2]string{o.Status, o.Termination}]++
		if o.Status == string(schemas.StatusCompleted) {
			reward += o.Reward
			if o.Reward == 1 {
				passed++
			}
		}
	}
	for k, want := range ended {
		if v := val(p.ended.WithLabelValues(k[0], k[1])); v != want {
			t.Errorf("ended{status=%s, termination=%s} = %v, want %v", k[0], k[1], v, want)
		}
	}
	if n := testutil.CollectAndCount(p.ended); n != len(ended) {
		t.Errorf("%d ended series, want %d", n, len(ended))
	}
	if v := val(p.reward); v != reward {
		t.Errorf("reward sum %v, want %v", v, reward)
	}
	if v := val(p.passed); v != passed {
		t.Errorf("passed %v, want %v", v, passed)
	}
	if h := histogramOf(t, p.duration); h.GetSampleCount() != 2 || !(h.GetSampleSum() > 0) {
		t.Errorf("rollout durations: %d observed, sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	if v := val(p.claimed); v != 1 {
		t.Errorf("groups claimed %v, want 1", v)
	}

	// The runtime's engine, proxy and sandboxes reported to the metrics
	// they were given: every rollout called the model at least once, and
	// ran in a sandbox that is closed now (grading makes more).
	if v := total(t, reg, "legorl_engine_generated_tokens_total"); v <= 0 {
		t.Errorf("engine: %v generated tokens", v)
	}
	if v := total(t, reg, "legorl_proxy_requests_total"); v < 2 {
		t.Errorf("proxy: %v requests, want at least one per rollout", v)
	}
	if v := total(t, reg, "legorl_proxy_completion_tokens_total"); v != total(t, reg, "legorl_engine_generated_tokens_total") {
		t.Errorf("proxy: %v completion tokens, the engine generated %v", v, total(t, reg, "legorl_engine_generated_tokens_total"))
	}
	if v := total(t, reg, "legorl_sandbox_created_total"); v < 2 {
		t.Errorf("sandbox: %v created, want at least one per rollout", v)
	}
	if v := total(t, reg, "legorl_sandbox_live"); v != 0 {
		t.Errorf("sandbox: %v live after the group, want 0", v)
	}
	if v := total(t, reg, "legorl_sandbox_execs_total"); v < 2 {
		t.Errorf("sandbox: %v execs", v)
	}

	// Run again, the group is found claimed and adopted, not run.
	f := &rolloutFn{Cfg: cfg, rt: rt, st: st}
	var got []GroupResult
	if err := f.ProcessElement(ctx, g, func(r GroupResult) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Reused {
		t.Fatalf("second run: %+v, want the claim adopted", got)
	}
	if v, w := val(p.adopted), val(p.claimed); v != 1 || w != 1 {
		t.Errorf("groups adopted %v claimed %v, want 1 and 1", v, w)
	}
	if v := val(p.launched); v != 2 {
		t.Errorf("launched %v after the adopted group, want still 2", v)
	}
}

// total sums the values of every counter or gauge series of name.
func total(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// histogramOf returns the histogram of a collector of one histogram.
func histogramOf(t *testing.T, c prometheus.Collector) *dto.Histogram {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}
