package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/legorl/legorl/loop"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
	"github.com/legorl/legorl/transforms"
)

// runLoop is `legorl run`: the RL loop of a config file (or the embedded
// demo config): prepare, eval, then per iteration rollouts -> update ->
// publish, periodic evals, and the before/after table. Running it again
// with the same config resumes it.
func runLoop(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	cfgPath := fs.String("config", "", "loop config file, JSON (default: the embedded demo config; legorl run --print-config shows it)")
	printCfg := fs.Bool("print-config", false, "print the config with its defaults applied, and exit")
	store := fs.String("store", "", "store URI, overriding the config's (env LEGORL_STORE)")
	endpoint := fs.String("s3-endpoint", env.S3Endpoint, "S3 endpoint for s3:// stores (env LEGORL_S3_ENDPOINT)")
	work := fs.String("work", "", "work folder (suite, demonstrations, checkpoints), overriding the config's")
	runID := fs.String("run", "", "run id, overriding the config's")
	iterations := fs.Int("iterations", 0, "iterations, overriding the config's")
	agent := fs.String("agent", "", "the legorl-agent program; defaults to legorl-agent beside legorl")
	runnerName := fs.String("runner", runner.Prism, "Beam runner: prism (in process) or universal")
	jobServer := fs.String("endpoint", "", "job server HOST:PORT (--runner universal)")
	prepareOnly := fs.Bool("prepare-only", false, "stop once the starting checkpoint is ready (suite, demonstrations, initialisation, SFT) and print its folder; no eval, no iteration")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics (rollouts, engine, proxy, sandbox, trainer; docs/METRICS.md) at http://ADDR/metrics while the loop runs; empty: off")
	replicates := fs.String("replicates", "", "after the table, print the spread of the run summaries matching this glob (the config's committed replicates, e.g. docs/results/demo-rep-*.summary.json) beside this run's result")
	compute := addComputeFlags(fs)
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	cfg := loop.DefaultConfig()
	if *cfgPath != "" {
		var err error
		if cfg, err = loop.ReadConfig(*cfgPath); err != nil {
			return err
		}
	}
	switch {
	case *store != "":
		cfg.Store = *store
	case cfg.Store == "" && env.Store != defaultStore:
		cfg.Store = env.Store
	}
	if *endpoint != "" {
		cfg.S3Endpoint = *endpoint
	}
	if *work != "" {
		cfg.WorkDir = *work
	}
	if *runID != "" {
		cfg.Run = *runID
	}
	if *iterations != 0 {
		cfg.Iterations = *iterations
	}
	cfg = cfg.WithDefaults()
	cfg.Store = absStoreURI(cfg.Store)
	if err := cfg.Validate(); err != nil {
		return err
	}
	if *printCfg {
		b, _ := json.MarshalIndent(cfg, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	be, err := compute.open()
	if err != nil {
		return err
	}
	defer be.Close()
	if *agent == "" {
		if *agent, err = findAgent(); err != nil {
			return err
		}
	}
	so := storage.Options{S3Endpoint: cfg.S3Endpoint, AccessKey: env.AccessKey, SecretKey: env.SecretKey, SessionToken: env.Session, Region: env.Region, CreateBucket: true}
	st, err := storage.Open(ctx, cfg.Store, so)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	var ms *metricSet
	if *metricsAddr != "" {
		reg := newRegistry()
		ms = newMetrics(reg)
		stop, err := startMetrics(ctx, "run", *metricsAddr, reg, stderr)
		if err != nil {
			return err
		}
		defer stop()
		transforms.SetRuntimeMetrics(ms.RuntimeMetrics)
		defer transforms.SetRuntimeMetrics(transforms.RuntimeMetrics{})
	} else {
		ms = &metricSet{}
	}
	trainLine := trainProgress(stderr, cfg.Run, 0, cfg.Store)
	res, err := loop.Run(ctx, cfg, loop.Options{
		AgentBinary: *agent, CodeVersion: version, StoreOptions: so, Log: stderr, TrainMetrics: ms.Trainer, Backend: be,
		Runner: runner.Options{Runner: *runnerName, Endpoint: *jobServer}, PrepareOnly: *prepareOnly,
		OnPipeline: func(c transforms.Config, n int) func() {
			return progress(ctx, st, c, n, stderr)
		},
		OnTrain: func(p trainer.Progress) {
			if p.Phase != "load" { // the loop said which iteration it trains
				trainLine(p)
			}
		},
		OnSFT: func(s trainer.SFTStep) { // a line per tenth of the steps
			if (s.Step+1)%max(s.Steps/10, 1) == 0 || s.Step+1 == s.Steps {
				fmt.Fprintf(stderr, "legorl run: %s\n", s)
			}
		},
	})
	report, rerr := loop.Report(res, *replicates)
	fmt.Fprint(stdout, report)
	if err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	if *prepareOnly {
		fmt.Fprintln(stdout, res.Start)
		return nil
	}
	fmt.Fprintf(stdout, "wall time %.0f s over %d processes; summary: %s/summary.json\n", res.WallSeconds, len(res.Processes), cfg.WorkDir)
	fmt.Fprintf(stdout, "data: %s (run %s; evals under %s-eval-*); checkpoints: %s/checkpoints\n", cfg.Store, cfg.Run, cfg.Run, cfg.WorkDir)
	fmt.Fprintf(stdout, "dashboard: bin/legorl monitor --store %s --run %s --checkpoints %s/checkpoints\n", cfg.Store, cfg.Run, cfg.WorkDir)
	return nil
}

// absStoreURI makes a relative file:// store absolute, so pipeline
// workers in other folders or processes find the same store.
func absStoreURI(uri string) string {
	rest, ok := strings.CutPrefix(uri, "file://")
	if !ok || filepath.IsAbs(rest) {
		return uri
	}
	abs, err := filepath.Abs(rest)
	if err != nil {
		return uri
	}
	return "file://" + abs
}
