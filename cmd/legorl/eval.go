package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/pipelines/eval"
	"github.com/legorl/legorl/transforms"
)

// runEval is `legorl eval`: pass@1 (and pass@G when --group > 1) of a
// policy per harness on the held-out tasks of a suite, as a Beam pipeline
// (pipelines/eval), at temperature 1 or, with --top-k 1, greedily. The
// table goes to stdout and into the store; rerunning the same run and
// iteration resumes it.
func runEval(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval", stderr)
	var sf storeFlags
	sf.register(fs, env)
	suitePath := fs.String("tasks", "", "suite: a .jsonl or .parquet file, or a folder with tasks.jsonl (required)")
	harnesses := fs.String("harness", "", "harnesses, comma-separated: "+strings.Join(harness.Names(), ", ")+" (required)")
	policyDir := fs.String("policy", "", "policy checkpoint folder (required)")
	run := fs.String("run", "", "run id of the eval (required; best one of its own, e.g. RUN-eval)")
	iteration := fs.Int("iteration", 0, "iteration of the eval run (e.g. the policy version)")
	splits := fs.String("split", "heldout,heldout_family", "task splits to evaluate, comma-separated (tasks without a split always are)")
	seed := fs.Uint64("seed", 0, "mixed into every rollout's sampling seed")
	maxTurns := fs.Int("max-turns", 30, "agent turns at most")
	maxTokens := fs.Int("max-tokens", 1024, "tokens of one completion at most, when the harness asks for no limit")
	templateName := fs.String("template", "qwen3", "chat template: qwen3 or qwen3-coder")
	agentPath := fs.String("agent", "", "the legorl-agent program (built-in harnesses); defaults to legorl-agent beside legorl")
	backendName := fs.String("backend", "local", "sandbox backend: "+strings.Join(backendNames(), ", "))
	agentTimeout := fs.Duration("agent-timeout", 30*time.Minute, "deadline of the agent")
	gradeTimeout := fs.Duration("grade-timeout", 10*time.Minute, "deadline of grading")
	topK := fs.Int("top-k", 0, "sample among the K most likely tokens only; 1 is greedy decoding, the eval.greedy of legorl run (0: every token, temperature 1)")
	pf := addPipelineFlags(fs)
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *suitePath == "" || *harnesses == "" || *policyDir == "" || *run == "" {
		return errors.New("--tasks, --harness, --policy and --run are required (see legorl eval -h)")
	}
	if *topK < 0 {
		return fmt.Errorf("--top-k %d: want 0 (no cut) or more (1: greedy)", *topK)
	}
	var hs []string
	for _, h := range strings.Split(*harnesses, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, h)
		}
	}
	a := rolloutArgs{suite: *suitePath, harness: hs[0], policy: *policyDir, run: *run, template: *templateName, agent: *agentPath,
		backend: *backendName, iteration: *iteration, maxTurns: *maxTurns, maxTokens: *maxTokens, seed: *seed,
		agentTimeout: *agentTimeout, gradeTimeout: *gradeTimeout}
	cfg, _, _, err := pipelineConfig(ctx, env, &sf, a, pf)
	if err != nil {
		return err
	}
	cfg.TopK = *topK
	abs, err := filepath.Abs(*suitePath)
	if err != nil {
		return err
	}
	stopMetrics, err := pf.startMetrics(ctx, "eval", stderr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	start := time.Now()
	t, err := eval.Run(ctx, eval.Options{Tasks: abs, Harnesses: hs, Splits: strings.Split(*splits, ","), Config: cfg},
		pf.runnerOptions("legorl-eval-"+*run))
	if err != nil {
		return err
	}
	writeEvalTable(stdout, t)
	fmt.Fprintf(stderr, "legorl eval: run %s iteration %d in %s; table stored at %s\n", t.RunID, t.Iteration,
		time.Since(start).Round(time.Second), transforms.EvalReportKey(cfg.RunID, cfg.Iteration, cfg.JobID))
	return nil
}

func writeEvalTable(w io.Writer, t transforms.EvalTable) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	k := ""
	if t.K > 1 {
		k = fmt.Sprintf("\tpass@%d\ttasks(%d)", t.K, t.K)
	}
	fmt.Fprintf(tw, "harness\ttasks\trollouts\tmasked\tpass@1%s\n", k)
	for _, r := range t.Rows {
		k = ""
		if t.K > 1 {
			k = fmt.Sprintf("\t%.3f\t%d", r.PassK, r.TasksK)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.3f%s\n", r.Harness, r.Tasks, r.Rollouts, r.Masked, r.Pass1, k)
	}
	tw.Flush()
}
