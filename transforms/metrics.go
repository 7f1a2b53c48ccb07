package transforms

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/schemas"
)

// Metrics are the rollout pipeline's Prometheus metrics: the rollouts and
// groups the DoFns of this process ran. Build them with NewMetrics and
// attach them with SetRuntimeMetrics; a nil *Metrics records nothing. The
// names and their meaning are listed in docs/METRICS.md.
type Metrics struct {
	launched prometheus.Counter
	ended    *prometheus.CounterVec // status, termination
	reward   prometheus.Counter
	passed   prometheus.Counter
	duration prometheus.Histogram
	claimed  prometheus.Counter
	adopted  prometheus.Counter
}

// NewMetrics makes the pipeline's metrics and registers them with reg
// (nil: registered nowhere). It panics if reg already holds metrics of
// these names, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		launched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_pipeline_rollouts_launched_total",
			Help: "Rollouts started by the rollout DoFns of this process.",
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "legorl_pipeline_rollouts_ended_total",
			Help: "Rollouts ended, by status (completed, masked) and termination (agent_completed, max_turns, or why a rollout was masked).",
		}, []string{"status", "termination"}),
		reward: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_pipeline_reward_total",
			Help: "Sum of the rewards of completed rollouts (divide by the completed count for the mean reward).",
		}),
		passed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_pipeline_rollouts_passed_total",
			Help: "Completed rollouts with reward 1.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "legorl_pipeline_rollout_duration_seconds",
			Help:    "Wall-clock time of one rollout: setup, agent and grading.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14), // 0.5 s .. 68 min
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_pipeline_groups_claimed_total",
			Help: "Groups run and claimed by this process (their claim was put first).",
		}),
		adopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_pipeline_groups_adopted_total",
			Help: "Groups whose claim an earlier attempt had put: found before running, or after running when the claim's put lost.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.launched, m.ended, m.reward, m.passed, m.duration, m.claimed, m.adopted)
	}
	return m
}

func (m *Metrics) rolloutLaunched() {
	if m == nil {
		return
	}
	m.launched.Inc()
}

// rolloutEnded records the final row of a rollout that took d.
func (m *Metrics) rolloutEnded(row schemas.Rollout, d time.Duration) {
	if m == nil {
		return
	}
	m.ended.WithLabelValues(string(row.Status), string(row.Termination)).Inc()
	if row.Status == schemas.StatusCompleted {
		m.reward.Add(max(row.Reward, 0)) // a counter never goes down
		if row.Reward == 1 {
			m.passed.Inc()
		}
	}
	m.duration.Observe(d.Seconds())
}

// group records a claimed group: claimed by this attempt, or adopted.
func (m *Metrics) group(adopted bool) {
	if m == nil {
		return
	}
	if adopted {
		m.adopted.Inc()
	} else {
		m.claimed.Inc()
	}
}

// RuntimeMetrics are the metrics the rollout DoFns of this process report
// to: the pipeline's own, and those of the engine, proxy and sandbox
// backend each worker process builds (its runtime). Nil fields record
// nothing.
type RuntimeMetrics struct {
	Pipeline *Metrics
	Engine   *engine.Metrics
	Proxy    *proxy.ServerMetrics
	Sandbox  *sandbox.Metrics
}

// runtimeMetrics are this process's metrics (SetRuntimeMetrics).
var runtimeMetrics struct {
	mu sync.Mutex
	m  RuntimeMetrics
}

// SetRuntimeMetrics attaches metrics to the rollout DoFns of this process,
// as SetStoreOptions attaches credentials: DoFns travel inside the
// pipeline (serialized), so what they report to can only come from the
// process they run in. A runtime (engine, proxy, backend) takes the
// metrics set when it is built, so set them before the pipeline runs; the
// zero RuntimeMetrics detaches them. Only DoFns that run in this process
// report here: a launcher whose workers are other processes (PROCESS or
// EXTERNAL environments, `legorl beam worker-pool`) sees none of their
// rollouts.
func SetRuntimeMetrics(m RuntimeMetrics) {
	runtimeMetrics.mu.Lock()
	runtimeMetrics.m = m
	runtimeMetrics.mu.Unlock()
}

func currentRuntimeMetrics() RuntimeMetrics {
	runtimeMetrics.mu.Lock()
	defer runtimeMetrics.mu.Unlock()
	return runtimeMetrics.m
}
