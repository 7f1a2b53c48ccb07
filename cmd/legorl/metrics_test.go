package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/legorl/legorl/tasks/builtin"
)

// scrape GETs url and returns every sample of the text exposition, keyed
// by its series (name{labels}); ok is false when the GET failed.
func scrape(url string) (samples map[string]float64, ok bool) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, false
	}
	samples = map[string]float64{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		samples[line[:i]] = v
	}
	return samples, lines.Err() == nil
}

// total sums the samples of metric name (every label set); found is false
// when there is none.
func total(samples map[string]float64, name string) (sum float64, found bool) {
	for k, v := range samples {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
			found = true
		}
	}
	return sum, found
}

// TestServeMetrics runs `legorl serve`, makes a chat call, and scrapes
// /metrics on the same address over HTTP: the proxy counted the call and
// its tokens, the engine the tokens it prefilled and generated.
func TestServeMetrics(t *testing.T) {
	policy := testPolicy(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, stderr, done := startServe(t, ctx, "--policy", policy, "--addr", "127.0.0.1:0", "--max-tokens", "12")
	metricsURL := strings.TrimSuffix(url, "/v1") + "/metrics"

	before, ok := scrape(metricsURL)
	if !ok {
		t.Fatal("GET /metrics failed")
	}
	if v, found := total(before, "legorl_proxy_requests_total"); !found || v != 0 {
		t.Errorf("before any call: legorl_proxy_requests_total %v (found %v), want 0 series present", v, found)
	}
	resp, err := http.Post(url+"/chat/completions", "application/json",
		strings.NewReader(`{"model": "any", "messages": [{"role": "user", "content": "hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: status %d: %s", resp.StatusCode, body)
	}
	// The engine's gauges are updated by its loop after the step that ended
	// the call; the counters are final by the time the call returns.
	after, ok := scrape(metricsURL)
	if !ok {
		t.Fatal("GET /metrics failed")
	}
	if v := after[`legorl_proxy_requests_total{api="chat",outcome="ok"}`]; v != 1 {
		t.Errorf(`legorl_proxy_requests_total{api="chat",outcome="ok"} = %v, want 1`, v)
	}
	generated, _ := total(after, "legorl_engine_generated_tokens_total")
	completion, _ := total(after, "legorl_proxy_completion_tokens_total")
	prefill, _ := total(after, "legorl_engine_prefill_tokens_total")
	prompt, _ := total(after, "legorl_proxy_prompt_tokens_total")
	if generated <= 0 || generated > 12 || generated != completion {
		t.Errorf("engine generated %v tokens, proxy counted %v completion tokens; want the same, 1 to 12", generated, completion)
	}
	if prefill <= 0 || prefill != prompt {
		t.Errorf("engine prefilled %v tokens, proxy counted %v prompt tokens; want the same, > 0", prefill, prompt)
	}
	for _, name := range []string{"legorl_engine_steps_total", "legorl_proxy_request_duration_seconds_count", "go_goroutines"} {
		if v, _ := total(after, name); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	// The proxy still answers its own routes.
	if resp, err := http.Get(url + "/models"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/v1/models: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestServeMetricsHelper: serveMetrics serves a registry until stopped,
// and a bad address is a one-line error; newMetrics registers every
// package's metrics on one registry without a clash.
func TestServeMetricsHelper(t *testing.T) {
	reg := newRegistry()
	set := newMetrics(reg)
	if set.Pipeline == nil || set.Engine == nil || set.Proxy == nil || set.Sandbox == nil || set.Trainer == nil {
		t.Fatalf("newMetrics left a package out: %+v", set)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "legorl_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	url, stop, err := serveMetrics(context.Background(), "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := scrape(url)
	if !ok || got["legorl_test_total"] != 3 {
		t.Fatalf("scrape of %s: %v, legorl_test_total %v", url, ok, got["legorl_test_total"])
	}
	for _, name := range []string{"legorl_engine_generated_tokens_total", "legorl_trainer_steps_total", "legorl_pipeline_rollouts_launched_total"} {
		if _, found := total(got, name); !found {
			t.Errorf("%s not served", name)
		}
	}
	stop()
	stop()
	if _, ok := scrape(url); ok {
		t.Error("still serving after stop")
	}

	// The context ends serving too.
	ctx, cancel := context.WithCancel(context.Background())
	url, stop, err = serveMetrics(ctx, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	stop()
	if _, ok := scrape(url); ok {
		t.Error("still serving after the context ended")
	}

	for _, addr := range []string{"256.0.0.1:1", "nonsense", "127.0.0.1:99999"} {
		_, _, err := serveMetrics(context.Background(), addr, reg)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "metrics: ") {
			t.Errorf("address %q: %v, want a one-line error", addr, err)
		}
	}
}

// TestMetricsAddrFlag: `legorl train` serves its metrics at --metrics-addr
// and says where; a bad address fails train and rollout with one line
// naming the flag.
func TestMetricsAddrFlag(t *testing.T) {
	dir := t.TempDir()
	store, policy := writeTrainRun(t, dir, 0)
	code, _, stderr := runCLI(t, testEnv(nil), "train", "--store", store, "--run", "cli", "--iteration", "0",
		"--policy", policy, "--out", filepath.Join(dir, "v1"), "--metrics-addr", "127.0.0.1:0")
	if code != 0 || !strings.Contains(stderr, "legorl train: metrics at http://127.0.0.1:") {
		t.Errorf("train with metrics: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, testEnv(nil), "train", "--store", store, "--run", "cli", "--iteration", "0",
		"--policy", policy, "--out", filepath.Join(dir, "v2"), "--metrics-addr", "256.0.0.1:1")
	if code != 2 || !strings.HasSuffix(stderr, "\n") || !strings.Contains(stderr, "legorl train: --metrics-addr 256.0.0.1:1: metrics: listen tcp") {
		t.Errorf("train with a bad address: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "v2")); err == nil {
		t.Error("train trained with a bad --metrics-addr")
	}

	tasksDir := t.TempDir()
	os.WriteFile(filepath.Join(tasksDir, "tasks.jsonl"), nil, 0o644)
	self, _ := os.Executable()
	code, _, stderr = runCLI(t, testEnv(nil), "rollout", "--tasks", tasksDir, "--harness", "bash", "--policy", testPolicy(t),
		"--run", "r", "--store", "file://"+filepath.Join(dir, "store2"), "--agent", self, "--metrics-addr", "256.0.0.1:1")
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "legorl rollout: --metrics-addr 256.0.0.1:1: metrics: listen tcp") {
		t.Errorf("rollout with a bad address: exit %d, stderr %q", code, stderr)
	}
}

// lineWatcher is a writer that hands the text after prefix on the first
// line holding it to a channel.
type lineWatcher struct {
	syncBuffer
	prefix string
	once   sync.Once
	found  chan string
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	for _, line := range strings.Split(w.String(), "\n") {
		if _, rest, ok := strings.Cut(line, w.prefix); ok && strings.HasSuffix(rest, "/metrics") {
			w.once.Do(func() { w.found <- rest })
		}
	}
	return n, err
}

// TestRolloutPipelineMetrics runs `legorl rollout` in pipeline form with
// --metrics-addr (Prism in process: the DoFns report to this process's
// metrics) and scrapes /metrics while it runs: the pipeline, the engine,
// the proxy and the sandbox backend all count the rollout.
func TestRolloutPipelineMetrics(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 1, Seed: 4, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"rollout", "--tasks", suite, "--harness", "bash", "--policy", testPolicy(t), "--group", "1",
		"--store", "file://" + filepath.Join(dir, "store"), "--split", "sft,train,heldout,heldout_family", "--run", "met",
		"--max-turns", "2", "--max-tokens", "16", "--agent", self, "--metrics-addr", "127.0.0.1:0"}
	stderr := &lineWatcher{prefix: "legorl rollout: metrics at ", found: make(chan string, 1)}
	var stdout syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), testEnv(nil), args, &stdout, stderr) }()
	var url string
	select {
	case url = <-stderr.found:
	case code := <-done:
		t.Fatalf("exit %d before serving metrics: %s", code, stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("no metrics address within a minute: %s", stderr.String())
	}
	// Scrape until the command ends; the last good scrape is the state
	// just before the server stopped, after the group was claimed.
	var last map[string]float64
	scrapes := 0
	code := -1
	for code < 0 {
		if s, ok := scrape(url); ok {
			last = s
			scrapes++
		}
		select {
		case code = <-done:
		case <-time.After(20 * time.Millisecond):
		}
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("%d scrapes; %s", scrapes, strings.TrimSpace(stdout.String()))
	if _, ok := scrape(url); ok {
		t.Error("metrics still served after the command ended")
	}
	want := map[string]func(float64) bool{
		"legorl_pipeline_rollouts_launched_total": func(v float64) bool { return v == 1 },
		"legorl_pipeline_rollouts_ended_total":    func(v float64) bool { return v == 1 },
		"legorl_pipeline_groups_claimed_total":    func(v float64) bool { return v == 1 },
		"legorl_engine_generated_tokens_total":    func(v float64) bool { return v > 0 },
		"legorl_proxy_requests_total":             func(v float64) bool { return v >= 1 },
		"legorl_sandbox_created_total":            func(v float64) bool { return v >= 1 },
		"legorl_sandbox_execs_total":              func(v float64) bool { return v >= 1 },
	}
	for name, ok := range want {
		if v, _ := total(last, name); !ok(v) {
			t.Errorf("%s = %v in the last scrape", name, v)
		}
	}
	if t.Failed() {
		keys := make([]string, 0, len(last))
		for k, v := range last {
			if strings.HasPrefix(k, "legorl_") {
				keys = append(keys, fmt.Sprintf("%s %v", k, v))
			}
		}
		t.Logf("last scrape:\n%s", strings.Join(keys, "\n"))
	}
}
