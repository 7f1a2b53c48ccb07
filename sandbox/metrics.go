package sandbox

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sandbox backends' Prometheus metrics, labelled by
// backend name, so that both backends of a process can share them. Build
// them with NewMetrics and pass them in a backend's Options (local.Options,
// docker.Options); a nil *Metrics records nothing. The names and their
// meaning are listed in docs/METRICS.md.
type Metrics struct {
	created  *prometheus.CounterVec   // backend
	failed   *prometheus.CounterVec   // backend
	live     *prometheus.GaugeVec     // backend
	execTime *prometheus.HistogramVec // backend
	execs    *prometheus.CounterVec   // backend, outcome
}

// OutcomeError is the outcome label of an Exec that returned an error
// without a Result outcome (the sandbox was closed, the command was empty).
const OutcomeError = "error"

// NewMetrics makes the sandbox metrics and registers them with reg (nil:
// registered nowhere). It panics if reg already holds metrics of these
// names, as prometheus.MustRegister does: one Metrics per registry, shared
// by every backend that reports there.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		created: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legorl_sandbox_created_total",
			Help: "Sandboxes created, by backend.",
		}, []string{"backend"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legorl_sandbox_create_failures_total",
			Help: "Sandbox creations that failed (setup errors, a canceled context, a closed backend), by backend.",
		}, []string{"backend"}),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "legorl_sandbox_live",
			Help: "Sandboxes created and not yet closed, by backend.",
		}, []string{"backend"}),
		execTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "legorl_sandbox_exec_duration_seconds",
			Help:    "Wall-clock time of one Exec, by backend.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 14), // 1 ms .. 27 min
		}, []string{"backend"}),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legorl_sandbox_execs_total",
			Help: "Commands run by Exec, by backend and outcome (completed, timeout, resource_limit, sandbox_crash, or error).",
		}, []string{"backend", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.created, m.failed, m.live, m.execTime, m.execs)
	}
	return m
}

// Created records a Create of backend that returned err; a sandbox it
// made counts as live until Closed.
func (m *Metrics) Created(backend string, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.failed.WithLabelValues(backend).Inc()
		return
	}
	m.created.WithLabelValues(backend).Inc()
	m.live.WithLabelValues(backend).Inc()
}

// Closed records the first Close of a sandbox that Created counted.
func (m *Metrics) Closed(backend string) {
	if m == nil {
		return
	}
	m.live.WithLabelValues(backend).Dec()
}

// Exec records one Exec of backend that took d and returned res (with an
// empty Outcome when it returned only an error).
func (m *Metrics) Exec(backend string, res Result, d time.Duration) {
	if m == nil {
		return
	}
	outcome := string(res.Outcome)
	if outcome == "" {
		outcome = OutcomeError
	}
	m.execs.WithLabelValues(backend, outcome).Inc()
	m.execTime.WithLabelValues(backend).Observe(d.Seconds())
}
