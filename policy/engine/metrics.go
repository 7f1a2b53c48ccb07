package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus metrics. Build them with NewMetrics
// and pass them in Options.Metrics; a nil *Metrics records nothing.
// Engines that share one Metrics add up in its gauges (sessions, running
// sequences), except the policy version, which is the last one set. The
// names and their meaning are listed in docs/METRICS.md.
type Metrics struct {
	sessions  prometheus.Gauge
	running   prometheus.Gauge
	generated prometheus.Counter
	prefill   prometheus.Counter
	steps     prometheus.Counter
	stepTime  prometheus.Histogram
	queueWait prometheus.Histogram
	swaps     prometheus.Counter
	version   prometheus.Gauge
	prompts   prometheus.Counter
	cached    prometheus.Counter
	shared    prometheus.Counter
}

// NewMetrics makes the engine's metrics and registers them with reg (nil:
// registered nowhere). It panics if reg already holds metrics of these
// names, as prometheus.MustRegister does: one Metrics per registry,
// shared by every engine that reports there.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "legorl_engine_sessions",
			Help: "Sessions whose KV cache the engine keeps (idle and busy).",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "legorl_engine_running_sequences",
			Help: "Requests in the batch: prefilling or decoding.",
		}),
		generated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_engine_generated_tokens_total",
			Help: "Completion tokens sampled.",
		}),
		prefill: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_engine_prefill_tokens_total",
			Help: "Tokens run through the model in prefill chunks: prompt tokens not reused from a session's cache, and the recomputation after a hot swap.",
		}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_engine_steps_total",
			Help: "Scheduler steps: batched model steps over the running sequences.",
		}),
		stepTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "legorl_engine_step_duration_seconds",
			Help:    "Wall-clock time of one scheduler step: the model step, sampling and emitting.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms .. 16 s
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "legorl_engine_queue_wait_seconds",
			Help:    "Time from a Generate call to its admission into the batch.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12), // 0.1 ms .. 18 s
		}),
		swaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_engine_swaps_total",
			Help: "Hot swaps of the weights applied.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "legorl_engine_policy_version",
			Help: "Policy version of the weights the engine samples with.",
		}),
		prompts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_engine_prompt_tokens_total",
			Help: "Prompt tokens of the requests admitted.",
		}),
		cached: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_engine_prompt_cached_tokens_total",
			Help: "Prompt tokens reused from a KV cache instead of prefilled (the prefix cache's hits: divide by legorl_engine_prompt_tokens_total for the hit rate).",
		}),
		shared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_engine_prompt_shared_tokens_total",
			Help: "Of the cached prompt tokens, those copied from another session's cache (prefix caching across sessions).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.sessions, m.running, m.generated, m.prefill, m.steps, m.stepTime, m.queueWait, m.swaps, m.version,
			m.prompts, m.cached, m.shared)
	}
	return m
}

// gauges holds the values an engine last added to the shared gauges, so
// that it adds only its change (several engines may share one Metrics).
type gauges struct {
	sessions, running int
}

// sync moves the shared gauges by the change of this engine's sessions and
// running sequences since the last call.
func (m *Metrics) sync(g *gauges, sessions, running int) {
	if m == nil {
		return
	}
	if d := sessions - g.sessions; d != 0 {
		m.sessions.Add(float64(d))
	}
	if d := running - g.running; d != 0 {
		m.running.Add(float64(d))
	}
	g.sessions, g.running = sessions, running
}

// step records one scheduler step.
func (m *Metrics) step(d time.Duration, prefill, generated int) {
	if m == nil {
		return
	}
	m.steps.Inc()
	m.stepTime.Observe(d.Seconds())
	m.prefill.Add(float64(prefill))
	m.generated.Add(float64(generated))
}

// prompt records an admitted prompt of n tokens, cached of them reused
// from a cache, shared of those from another session's.
func (m *Metrics) prompt(n, cached, shared int) {
	if m == nil {
		return
	}
	m.prompts.Add(float64(n))
	m.cached.Add(float64(cached))
	m.shared.Add(float64(shared))
}

func (m *Metrics) admitted(wait time.Duration) {
	if m == nil {
		return
	}
	m.queueWait.Observe(wait.Seconds())
}

func (m *Metrics) installed(version int64, swap bool) {
	if m == nil {
		return
	}
	m.version.Set(float64(version))
	if swap {
		m.swaps.Inc()
	}
}
