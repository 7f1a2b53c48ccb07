package trainer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the trainer's Prometheus metrics: counters over every
// optimizer step, and gauges holding the last step's figures (the same
// figures as the train_steps row of that step). Build them with
// NewMetrics and pass them in Options.Metrics; a nil *Metrics records
// nothing. The names and their meaning are listed in docs/METRICS.md.
type Metrics struct {
	steps        prometheus.Counter
	tokens       prometheus.Counter
	loss         prometheus.Gauge
	gradNorm     prometheus.Gauge
	entropy      prometheus.Gauge
	kl           prometheus.Gauge
	clipFraction prometheus.Gauge
	tokensPerSec prometheus.Gauge
	pearson      prometheus.Gauge
}

// NewMetrics makes the trainer's metrics and registers them with reg (nil:
// registered nowhere). It panics if reg already holds metrics of these
// names, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &Metrics{
		steps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_trainer_steps_total",
			Help: "Optimizer steps taken (a step whose samples carried no loss is skipped and not counted).",
		}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "legorl_trainer_tokens_total",
			Help: "Tokens run forward and backward by optimizer steps, prompts included (train_steps.tokens).",
		}),
		loss:         gauge("legorl_trainer_loss", "Loss of the last optimizer step."),
		gradNorm:     gauge("legorl_trainer_grad_norm", "Global gradient norm of the last optimizer step, before clipping."),
		entropy:      gauge("legorl_trainer_entropy", "Entropy estimate of the last optimizer step: the mean -logprob of its sampled tokens, in nats."),
		kl:           gauge("legorl_trainer_kl", "Mean k3 estimate of KL(pi_rollout || pi_current) over the last optimizer step's sampled tokens."),
		clipFraction: gauge("legorl_trainer_clip_fraction", "Fraction of the last optimizer step's sampled tokens whose objective was clipped."),
		tokensPerSec: gauge("legorl_trainer_tokens_per_second", "Training throughput of the last optimizer step: its tokens over its wall-clock time."),
		pearson:      gauge("legorl_trainer_gate_pearson", "Pearson correlation of rollout and recomputed logprobs in the last iteration's train-inference gate."),
	}
	if reg != nil {
		reg.MustRegister(m.steps, m.tokens, m.loss, m.gradNorm, m.entropy, m.kl, m.clipFraction, m.tokensPerSec, m.pearson)
	}
	return m
}

// step records one optimizer step.
func (m *Metrics) step(s StepResult) {
	if m == nil || s.Skipped {
		return
	}
	m.steps.Inc()
	m.tokens.Add(float64(s.Tokens))
	m.loss.Set(s.Stats.Loss)
	m.gradNorm.Set(s.GradNorm)
	m.entropy.Set(s.Stats.Entropy())
	m.kl.Set(s.Stats.KL())
	m.clipFraction.Set(s.Stats.ClipFraction())
	if s.Seconds > 0 {
		m.tokensPerSec.Set(float64(s.Tokens) / s.Seconds)
	}
}

// gate records an iteration's train-inference check.
func (m *Metrics) gate(g *GateReport) {
	if m == nil || g == nil {
		return
	}
	m.pearson.Set(g.Overall.Pearson)
}
