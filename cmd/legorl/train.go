package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
)

// runTrain is `legorl train`: one update from an iteration's stored
// rollouts, published as the next checkpoint.
func runTrain(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("train", stderr)
	var sf storeFlags
	sf.register(fs, env)
	run := fs.String("run", "", "run id (required)")
	iter := fs.Int("iteration", -1, "iteration whose rollouts to train on (required)")
	policy := fs.String("policy", "", "parent checkpoint folder: the weights that sampled the iteration (required)")
	out := fs.String("out", "", "new checkpoint folder; must not exist (required)")
	cfgFile := fs.String("config", "", "JSON file of trainer settings (see trainer.Config); the flags below override it")
	parentVersion := fs.Int64("policy-version", -1, "policy version of --policy; -1 reads its lineage.json (0 without one)")
	stage := fs.String("stage", schemas.StageRollout, "manifest stage holding the rollouts and segments")
	// Overrides of the config's most used fields; their defaults are the
	// config's, so only flags given on the command line apply.
	loss := fs.String("loss", "", "objective: ppo or gspo (default ppo)")
	lr := fs.Float64("lr", 0, "peak learning rate (default 1e-6)")
	steps := fs.Int("steps", 0, "optimizer steps per iteration (default 1)")
	warmup := fs.Int("warmup-steps", 0, "linear warm-up steps over the run (default 0)")
	seed := fs.Uint64("seed", 0, "seed of the mini-batch shuffle (default 0)")
	mbTokens := fs.Int("micro-batch-tokens", 0, "token budget of a micro-batch (default 16384)")
	tisCap := fs.Float64("tis-cap", 0, "cap C of the truncated importance weights (default 2)")
	scaleByStd := fs.Bool("scale-by-std", false, "divide advantages by the group's reward std (GRPO)")
	minPearson := fs.Float64("min-pearson", 0, "train-inference logprob Pearson threshold (default 0.99)")
	gate := fs.String("gate", "", "what a failed check does: abort or mask (default abort)")
	noReplay := fs.Bool("no-replay", false, "recompute MoE logprobs with the trainer's routing instead of the recorded routes")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics (loss, grad norm, ...; docs/METRICS.md) at http://ADDR/metrics while training, e.g. 127.0.0.1:9090; empty: off")
	compute := addComputeFlags(fs)
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *run == "" || *iter < 0 || *policy == "" || *out == "" {
		return fmt.Errorf("--run, --iteration, --policy and --out are required (see legorl train -h)")
	}
	if err := storage.CheckName("run id", *run); err != nil {
		return err
	}
	var cfg trainer.Config
	if *cfgFile != "" {
		b, err := os.ReadFile(*cfgFile)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return fmt.Errorf("--config %s: %w", *cfgFile, err)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "loss":
			cfg.Loss = trainer.LossKind(*loss)
		case "lr":
			cfg.LR = *lr
		case "steps":
			cfg.Steps = *steps
		case "warmup-steps":
			cfg.WarmupSteps = *warmup
		case "seed":
			cfg.Seed = *seed
		case "micro-batch-tokens":
			cfg.MicroBatchTokens = *mbTokens
		case "tis-cap":
			cfg.TISCap = *tisCap
		case "scale-by-std":
			cfg.ScaleByStd = *scaleByStd
		case "min-pearson":
			cfg.MinPearson = *minPearson
		case "gate":
			cfg.GateMode = trainer.GateMode(*gate)
		case "no-replay":
			cfg.NoReplay = *noReplay
		}
	})
	if err := cfg.WithDefaults().Validate(); err != nil {
		return err
	}
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	be, err := compute.open()
	if err != nil {
		return err
	}
	defer be.Close()
	opts := trainer.Options{Store: st, RunID: *run, Iteration: *iter, PolicyDir: *policy, OutDir: *out, Backend: be,
		Config: cfg, Stage: *stage, CodeVersion: version, Progress: trainProgress(stderr, *run, *iter, st.URI())}
	if *metricsAddr != "" {
		reg := newRegistry()
		opts.Metrics = trainer.NewMetrics(reg)
		stop, err := startMetrics(ctx, "train", *metricsAddr, reg, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *parentVersion >= 0 {
		opts.ParentVersion = parentVersion
	}
	res, err := trainer.Train(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, trainSummary(res))
	return nil
}

// trainProgress prints a line per phase, and per tenth of a long phase.
func trainProgress(w io.Writer, run string, iter int, uri string) func(trainer.Progress) {
	last := ""
	return func(p trainer.Progress) {
		var line string
		switch p.Phase {
		case "load":
			line = fmt.Sprintf("loaded the parent; reading run %s iteration %d from %s", run, iter, uri)
		case "recompute":
			line = fmt.Sprintf("recompute logprobs: %d%% (%d/%d segments)", 10*(10*p.Done/max(p.Total, 1)), p.Done, p.Total)
		case "step":
			line = fmt.Sprintf("step %d/%d: %d%% (%d/%d micro-batches)", p.Step, p.Steps, 10*(10*p.Done/max(p.Total, 1)), p.Done, p.Total)
		case "publish":
			line = "publishing the checkpoint and train_steps"
		default:
			return
		}
		// One line per tenth: the percentage is the part that repeats.
		key, _, _ := strings.Cut(line, " (")
		if key == last {
			return
		}
		last = key
		fmt.Fprintf(w, "legorl train: %s\n", line)
	}
}

// trainSummary is the one-line result of an update.
func trainSummary(r *trainer.Result) string {
	l, u := r.Lineage, r.Update
	var b strings.Builder
	fmt.Fprintf(&b, "legorl train: run %s iteration %d: policy v%d -> v%d in %s: %d segments of %d completed rollouts",
		l.RunID, l.Iteration, l.Parent.Version, l.Version, r.Dir, l.Data.Segments, l.Data.Rollouts)
	if len(l.Data.Masked) > 0 {
		reasons := make([]string, 0, len(l.Data.Masked))
		n := 0
		for k, v := range l.Data.Masked {
			reasons = append(reasons, fmt.Sprintf("%s %d", k, v))
			n += v
		}
		sort.Strings(reasons)
		fmt.Fprintf(&b, " (%d masked: %s)", n, strings.Join(reasons, ", "))
	}
	fmt.Fprintf(&b, ", %d of %d groups zero-variance; trained %d segments in %d steps", l.Data.Groups.ZeroVariance, l.Data.Groups.Groups, u.Trained, len(u.Steps))
	g := u.Gate.Overall
	fmt.Fprintf(&b, "; logprob pearson %.4f, KL %.3g", g.Pearson, g.KL)
	if n := len(u.Gate.Masked); n > 0 {
		fmt.Fprintf(&b, " (%d segments masked)", n)
	}
	var loss, tok, sec float64
	var st trainer.LossStats
	for _, s := range u.Steps {
		loss += s.Stats.Loss
		st.Add(s.Stats)
		tok += float64(s.Tokens)
		sec += s.Seconds
	}
	last := u.Steps[len(u.Steps)-1]
	fmt.Fprintf(&b, "; loss %.4g, grad norm %.3g, clip %.3f, entropy %.3f", loss/float64(len(u.Steps)), last.GradNorm, st.ClipFraction(), st.Entropy())
	if sec > 0 {
		fmt.Fprintf(&b, ", %.0f train tokens/s", tok/sec)
	}
	if u.RecomputeSeconds > 0 {
		fmt.Fprintf(&b, ", %.0f recompute tokens/s", float64(u.RecomputeTokens)/u.RecomputeSeconds)
	}
	return b.String()
}
