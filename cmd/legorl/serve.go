package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/proxy/listen"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/storage"
)

// runServe runs the engine and the proxy standalone: for developing harness
// adapters, and for users who point their own agents at the policy. Agents
// use the base URL http://ADDR/v1 (OpenAI Chat Completions and Responses,
// Anthropic Messages). With --record, what the policy generated is written
// as segments Parquet under stage "serve" of the run: every --flush and on
// shutdown. Prometheus metrics of the proxy and the engine are served at
// http://ADDR/metrics (docs/METRICS.md).
func runServe(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	policyDir := fs.String("policy", "", "policy checkpoint folder: config.json, model.safetensors, tokenizer.json (required; with --remote, only its tokenizer.json is used)")
	addr := fs.String("addr", "127.0.0.1:8000", "address to listen on; beyond loopback only with --expose")
	expose := fs.Bool("expose", false, "allow an --addr other than loopback (other machines can reach it)")
	tokenFile := fs.String("token-file", "", "file with a bearer token that every request must carry; empty: none")
	templateName := fs.String("template", "qwen3", "chat template: "+templateNames)
	modelName := fs.String("model-name", "legorl", "model name in replies and /v1/models (requests may name any model)")
	record := fs.String("record", "", "store URI to record segments to (file:// or s3://); empty: record nothing")
	run := fs.String("run", "serve", "run id of the recorded segments")
	flush := fs.Duration("flush", time.Minute, "how often recorded segments are written (and on shutdown)")
	temperature := fs.Float64("temperature", 1, "sampling temperature (requests cannot change it)")
	topP := fs.Float64("top-p", 1, "nucleus sampling cut, in (0, 1]")
	topK := fs.Int("top-k", 0, "keep the K most likely tokens; 0: no cut")
	seed := fs.Uint64("seed", 0, "sampling seed; each call's seed derives from it and the call index")
	maxTokens := fs.Int("max-tokens", 0, "completion limit when a request sets none; 0: up to the context")
	remote := addRemoteFlags(fs)
	compute := addComputeFlags(fs)
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *policyDir == "" {
		return errors.New("--policy is required")
	}
	if *flush <= 0 {
		return fmt.Errorf("--flush %v must be positive", *flush)
	}
	if err := storage.CheckName("run id", *run); err != nil {
		return err
	}
	if err := checkTemplate(*templateName); err != nil {
		return err
	}
	la, err := listen.Parse(*addr, *expose, "--addr", "--expose")
	if err != nil {
		return err
	}
	guard, err := proxy.TokenGuard(*tokenFile)
	if err != nil {
		return err
	}
	rem, err := remote.value()
	if err != nil {
		return err
	}
	var st storage.Store
	if *record != "" {
		sf := storeFlags{uri: *record, endpoint: env.S3Endpoint}
		if st, err = sf.open(ctx, env, true); err != nil {
			return err
		}
	}
	reg := newRegistry()
	rem.Stream = true
	rt, err := rollout.New(ctx, rollout.Options{Policy: *policyDir, Version: -1, Remote: rem,
		Compute: *compute.name, Precision: *compute.precision, Template: *templateName, ModelName: *modelName,
		Sampling:  infer.Sampling{Temperature: *temperature, TopP: *topP, TopK: *topK},
		MaxTokens: *maxTokens, Sandbox: rollout.SandboxNone,
		Metrics: rollout.Metrics{Engine: engine.NewMetrics(reg), Proxy: proxy.NewServerMetrics(reg)},
		Logger:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer rt.Close()
	warn(rt, "serve", stderr)
	p := rt.Proxy
	// Reopen the default rollout with the run id and seed of the flags.
	if _, err := p.Finish(proxy.DefaultRollout); err != nil {
		return err
	}
	if err := p.Open(proxy.DefaultRollout, proxy.RolloutOptions{RunID: *run, Seed: *seed}); err != nil {
		return err
	}

	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(reg))
	mux.Handle("/", p)
	srv := &http.Server{Handler: guard(mux), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	fmt.Fprintf(stdout, "legorl serve: policy %s (version %d) at http://%s/v1\n", *policyDir, rt.Version, l.Addr())
	fmt.Fprint(stderr, la.Exposure("the OpenAI and Anthropic APIs and /metrics", l.Addr().String(), proxy.Access(*tokenFile)))

	rec := &rollout.Recorder{Store: st, RunID: *run, CodeVersion: version}
	tick := time.NewTicker(*flush)
	defer tick.Stop()
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-tick.C:
			if err := rec.Flush(ctx, p, proxy.DefaultRollout); err != nil {
				fmt.Fprintf(stderr, "legorl serve: record: %s\n", oneLine(err.Error()))
			}
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := srv.Shutdown(shut)
			cancel()
			if ferr := rec.Flush(context.Background(), p, proxy.DefaultRollout); ferr != nil {
				return fmt.Errorf("record on shutdown: %w", ferr)
			}
			if err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			fmt.Fprintf(stdout, "legorl serve: stopped; %d segments recorded in %d files\n", rec.Segments(), rec.Files())
			return nil
		}
	}
}
