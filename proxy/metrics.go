package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ServerMetrics are the proxy's Prometheus metrics: every call of every
// rollout the proxy serves, together. (Metrics, in a Record, counts one
// rollout.) Build them with NewServerMetrics and pass them in
// Options.ServerMetrics; a nil *ServerMetrics records nothing. The names
// and their meaning are listed in docs/METRICS.md.
type ServerMetrics struct {
	requests         *prometheus.CounterVec   // api, outcome
	duration         *prometheus.HistogramVec // api
	overhead         *prometheus.HistogramVec // api
	promptTokens     prometheus.Counter
	completionTokens prometheus.Counter
	forks            *prometheus.CounterVec // reason
}

// apis maps each wire format's path to its api label.
var apis = map[string]string{"chat/completions": "chat", "responses": "responses", "messages": "messages"}

// OutcomeOK is the outcome label of a call answered without an error; a
// failed call's outcome is its error kind (KindInvalidRequest, ...).
const OutcomeOK = "ok"

// NewServerMetrics makes the proxy's metrics and registers them with reg
// (nil: registered nowhere). It panics if reg already holds metrics of
// these names, as prometheus.MustRegister does: one ServerMetrics per
// registry, shared by every proxy that reports there.
func NewServerMetrics(reg prometheus.Registerer) *ServerMetrics {
	m := &ServerMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legorl_proxy_requests_total",
			Help: "Model calls (chat completions, responses, messages) by wire API and outcome: ok, or the error kind the caller got.",
		}, []string{"api", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "legorl_proxy_request_duration_seconds",
			Help:    "Wall-clock time of a model call, from the request to the last byte of the reply, by wire API.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500},
		}, []string{"api"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "legorl_proxy_overhead_seconds",
			Help:    "Time of a model call not spent in the generator (decoding, rendering, tokenizing, recording, waiting for the rollout's previous call, writing the reply), by wire API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12), // 0.1 ms .. 18 s
		}, []string{"api"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_proxy_prompt_tokens_total",
			Help: "Prompt tokens of successful model calls (the usage the callers were told).",
		}),
		completionTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_proxy_completion_tokens_total",
			Help: "Completion tokens of successful model calls (the usage the callers were told).",
		}),
		forks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legorl_proxy_segment_forks_total",
			Help: "Main-thread calls that started a new segment, by reason (reasoning_dropped, tools_changed, system_changed, completion_rerendered, rewrite).",
		}, []string{"reason"}),
	}
	for _, api := range apis { // the series exist before the first call
		m.requests.WithLabelValues(api, OutcomeOK)
		m.duration.WithLabelValues(api)
		m.overhead.WithLabelValues(api)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.overhead, m.promptTokens, m.completionTokens, m.forks)
	}
	return m
}

// callStats is what one model call reports to the metrics.
type callStats struct {
	fail       *apiError     // nil when the call succeeded
	generating time.Duration // inside Generator.Generate
	usage      Usage         // of a successful call
	fork       string        // the fork reason of a call that began a segment; "" otherwise
}

// observe records one model call of api that took d.
func (m *ServerMetrics) observe(api string, d time.Duration, c *callStats) {
	if m == nil {
		return
	}
	outcome := OutcomeOK
	if c.fail != nil {
		outcome = c.fail.Kind
	}
	m.requests.WithLabelValues(api, outcome).Inc()
	m.duration.WithLabelValues(api).Observe(d.Seconds())
	m.overhead.WithLabelValues(api).Observe(max(d-c.generating, 0).Seconds())
	if c.fail == nil {
		m.promptTokens.Add(float64(c.usage.PromptTokens))
		m.completionTokens.Add(float64(c.usage.CompletionTokens))
	}
	if c.fork != "" {
		m.forks.WithLabelValues(c.fork).Inc()
	}
}
