package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
)

// TestServerMetrics drives the proxy, backed by the engine over a
// random-weight model, with one call per wire API, a call that forks its
// rollout's segment, and two failing calls, then reads the registry: the
// counters moved by exactly what the callers were told.
func TestServerMetrics(t *testing.T) {
	m, err := model.New(tinyConfig(t, false), 7)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(m, 1, engine.Options{})
	t.Cleanup(e.Close)
	reg := prometheus.NewRegistry()
	sm := NewServerMetrics(reg)
	p, srv := testProxy(t, e, func(o *Options) { o.ServerMetrics = sm })
	for _, id := range []string{"r2", "r3"} {
		if err := p.Open(id, RolloutOptions{Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}

	// post makes one call and returns the status and the reply's prompt
	// and completion tokens.
	post := func(path, body string) (status, prompt, completion int) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`     // chat
				CompletionTokens int `json:"completion_tokens"` // chat
				InputTokens      int `json:"input_tokens"`      // responses, messages
				OutputTokens     int `json:"output_tokens"`     // responses, messages
				CacheRead        int `json:"cache_read_input_tokens"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		u := out.Usage
		return resp.StatusCode, u.PromptTokens + u.InputTokens + u.CacheRead, u.CompletionTokens + u.OutputTokens
	}
	var prompt, completion int
	ok := func(path, body string) {
		t.Helper()
		status, p, c := post(path, body)
		if status != 200 || p == 0 {
			t.Fatalf("%s: status %d, %d prompt tokens", path, status, p)
		}
		prompt += p
		completion += c
	}
	ok("/rollout/r1/v1/chat/completions", `{"model": "tiny", "max_tokens": 6, "messages": [
		{"role": "system", "content": "You are A."}, {"role": "user", "content": "hi"}]}`)
	// Another system prompt with a longer history forks the main thread.
	ok("/rollout/r1/v1/chat/completions", `{"model": "tiny", "max_tokens": 6, "messages": [
		{"role": "system", "content": "You are B."}, {"role": "user", "content": "hi"},
		{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]}`)
	ok("/rollout/r2/v1/responses", `{"model": "tiny", "max_output_tokens": 6, "input": "hello"}`)
	ok("/rollout/r3/v1/messages", `{"model": "tiny", "max_tokens": 6, "messages": [{"role": "user", "content": "hey"}]}`)
	if status, _, _ := post("/rollout/r1/v1/chat/completions", `{"model": "tiny", "messages": 5}`); status != 400 {
		t.Errorf("bad messages: status %d", status)
	}
	if status, _, _ := post("/rollout/nope/v1/chat/completions", `{"model": "tiny", "messages": [{"role": "user", "content": "x"}]}`); status != 404 {
		t.Errorf("unknown rollout: status %d", status)
	}
	// Neither counted: not model calls.
	if resp, err := http.Get(srv.URL + "/v1/models"); err == nil {
		resp.Body.Close()
	}

	if n := testutil.CollectAndCount(reg, "legorl_proxy_requests_total"); n != 5 {
		t.Errorf("%d requests series, want 5 (3 ok, 2 errors)", n)
	}
	requests := func(api, outcome string) float64 {
		return testutil.ToFloat64(sm.requests.WithLabelValues(api, outcome))
	}
	for _, c := range []struct {
		api, outcome string
		want         float64
	}{
		{"chat", OutcomeOK, 2}, {"responses", OutcomeOK, 1}, {"messages", OutcomeOK, 1},
		{"chat", KindInvalidRequest, 1}, {"chat", KindNotFound, 1}, {"messages", KindInvalidRequest, 0},
	} {
		if got := requests(c.api, c.outcome); got != c.want {
			t.Errorf("requests{api=%s, outcome=%s} = %v, want %v", c.api, c.outcome, got, c.want)
		}
	}
	if got := testutil.ToFloat64(sm.promptTokens); got != float64(prompt) {
		t.Errorf("prompt tokens %v, the callers were told %d", got, prompt)
	}
	if got := testutil.ToFloat64(sm.completionTokens); got != float64(completion) || completion == 0 {
		t.Errorf("completion tokens %v, the callers were told %d", got, completion)
	}
	if got := testutil.ToFloat64(sm.forks.WithLabelValues(ReasonSystemChanged)); got != 1 {
		t.Errorf("forks{reason=system_changed} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(reg, "legorl_proxy_segment_forks_total"); n != 1 {
		t.Errorf("%d fork series, want 1", n)
	}
	dur := histogram(t, reg, "legorl_proxy_request_duration_seconds", "api", "chat")
	over := histogram(t, reg, "legorl_proxy_overhead_seconds", "api", "chat")
	if dur.GetSampleCount() != 4 || over.GetSampleCount() != 4 {
		t.Errorf("chat: %d durations, %d overheads observed, want 4", dur.GetSampleCount(), over.GetSampleCount())
	}
	if !(over.GetSampleSum() < dur.GetSampleSum()) || !(dur.GetSampleSum() > 0) {
		t.Errorf("chat: overhead %vs of %vs", over.GetSampleSum(), dur.GetSampleSum())
	}
}

// TestServerMetricsNil: a proxy without metrics, and nil metrics, record
// nothing and do not fail.
func TestServerMetricsNil(t *testing.T) {
	var m *ServerMetrics
	m.observe("chat", 1, &callStats{fork: ReasonRewrite})
	if m := NewServerMetrics(nil); m == nil {
		t.Fatal("NewServerMetrics(nil) = nil")
	}
}

// histogram returns the histogram of the metric family name whose label
// key has value value.
func histogram(t *testing.T, g prometheus.Gatherer, name, key, value string) *dto.Histogram {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == key && l.GetValue() == value {
					return m.GetHistogram()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, key, value)
	return nil
}
