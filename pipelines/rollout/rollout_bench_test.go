package rollout

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
)

// The benchmarks run the two-task suite with G=2 (4 rollouts, bash agent,
// tiny random-weight model, 2 turns of 16 tokens), 4 at a time, through
// the pipeline on Prism and through rollout.Run directly with the same
// engine, proxy, backend and parallelism. The difference per rollout is the
// pipeline's overhead (Beam, the claim, the shards, the commit).

const benchRollouts = 4

func BenchmarkPipeline(b *testing.B) {
	setup(b)
	for i := 0; i < b.N; i++ {
		cfg := config(b, fmt.Sprintf("bench-%d", i))
		cfg.Parallel = benchRollouts
		start := time.Now()
		rep, err := Run(context.Background(), Options{Tasks: fx.suite, Splits: allSplits, Config: cfg}, runner.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Ran != benchRollouts {
			b.Fatalf("report %+v", rep)
		}
		report(b, time.Since(start))
	}
}

func BenchmarkDirect(b *testing.B) {
	setup(b)
	tok, err := tokenizer.Load(filepath.Join(fx.policy, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.Load(fx.policy)
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(m, 3, engine.Options{})
	defer eng.Close()
	p, err := proxy.New(proxy.Options{Generator: eng, Tokenizer: tok, Template: chat.Qwen3{}, MaxTokens: 16,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	backend := local.New(local.Options{InitPath: localtest.Init(b)})
	defer backend.Close()
	grader := grade.New(backend, grade.Options{})
	h, _ := harness.Lookup("bash")
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, benchRollouts)
		for t := range fx.ins {
			for j := range benchRollouts / len(fx.ins) {
				in := fx.ins[t]
				run := fmt.Sprintf("direct-%d", i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, _, err := rollout.Run(context.Background(), rollout.Config{Backend: backend, Grader: grader, Proxy: p,
						VocabSize: tok.VocabSize(), PolicyVersion: 3, Harness: h, AgentBinary: fx.self, MaxTurns: 2,
						SuiteDir: fx.suite, Instance: &in, RunID: run, RolloutID: rollout.ID(run, 1, in.InstanceID, j),
						Seed: rollout.Seed(0, run, 1, in.InstanceID, j)})
					if err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		report(b, time.Since(start))
	}
}

func report(b *testing.B, d time.Duration) {
	b.ReportMetric(float64(benchRollouts)/d.Minutes(), "rollouts/min")
	b.ReportMetric(d.Seconds()/benchRollouts, "s/rollout")
}
