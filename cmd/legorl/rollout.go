package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
)

// agentProgram is the built-in agents' program, looked for beside legorl.
const agentProgram = "legorl-agent"

// runRollout is `legorl rollout`: with --task, one rollout of one task
// with one harness against a local policy checkpoint, its rows written to
// the store and its rollouts row printed as one JSON object; without it,
// the rollout pipeline over the whole suite (rollout_pipeline.go).
func runRollout(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rollout", stderr)
	var sf storeFlags
	sf.register(fs, env)
	suitePath := fs.String("tasks", "", "suite: a .jsonl or .parquet file, or a folder with tasks.jsonl (required)")
	id := fs.String("task", "", "instance_id of the task: one rollout (without it: the pipeline over the suite)")
	harnessName := fs.String("harness", "", "harness: "+strings.Join(harness.Names(), ", ")+" (required)")
	policyDir := fs.String("policy", "", "policy checkpoint folder: config.json, model.safetensors, tokenizer.json (required)")
	run := fs.String("run", "", "run id (required)")
	iteration := fs.Int("iteration", 0, "iteration of the run")
	index := fs.Int("index", 0, "index of the rollout within the task's group (the rollout id derives from run, iteration, task and index)")
	seed := fs.Uint64("seed", 0, "sampling seed of the rollout (pipeline: mixed into every rollout's seed)")
	maxTurns := fs.Int("max-turns", 30, "agent turns at most")
	maxTokens := fs.Int("max-tokens", 1024, "tokens of one completion at most, when the harness asks for no limit")
	templateName := fs.String("template", "qwen3", "chat template: "+templateNames)
	agentPath := fs.String("agent", "", "the legorl-agent program (built-in harnesses); defaults to legorl-agent beside legorl")
	backendName := fs.String("backend", "local", "sandbox backend: "+strings.Join(backendNames(), ", "))
	agentTimeout := fs.Duration("agent-timeout", 30*time.Minute, "deadline of the agent")
	gradeTimeout := fs.Duration("grade-timeout", 10*time.Minute, "deadline of grading")
	pf := addPipelineFlags(fs)
	pf.splits = fs.String("split", tasks.SplitTrain, "pipeline: task splits rolled out, comma-separated (tasks without a split always are; held-out splits belong to legorl eval)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *id == "" {
		return runRolloutPipeline(ctx, env, &sf, rolloutArgs{suite: *suitePath, harness: *harnessName, policy: *policyDir, run: *run,
			template: *templateName, agent: *agentPath, backend: *backendName, iteration: *iteration, maxTurns: *maxTurns,
			maxTokens: *maxTokens, seed: *seed, agentTimeout: *agentTimeout, gradeTimeout: *gradeTimeout}, pf, stdout, stderr)
	}
	if *suitePath == "" || *id == "" || *harnessName == "" || *policyDir == "" || *run == "" {
		return errors.New("--tasks, --task, --harness, --policy and --run are required (see legorl rollout -h)")
	}
	if err := storage.CheckName("run id", *run); err != nil {
		return err
	}
	if *iteration < 0 || *iteration > 999999 || *index < 0 {
		return fmt.Errorf("--iteration %d / --index %d out of range", *iteration, *index)
	}
	h, err := harness.Lookup(*harnessName)
	if err != nil {
		return err
	}
	if err := checkTemplate(*templateName); err != nil {
		return err
	}
	rem, err := pf.remote.value()
	if err != nil {
		return err
	}
	suite, err := tasks.Load(*suitePath)
	if err != nil {
		return err
	}
	inst, ok := suite.Find(*id)
	if !ok {
		return fmt.Errorf("task %q is not in %s", *id, *suitePath)
	}
	if *agentPath == "" {
		*agentPath, err = findAgent()
		if err != nil {
			return err
		}
	}
	if _, ok := sandboxBackends()[*backendName]; !ok {
		return fmt.Errorf("unknown backend %q: want one of %s", *backendName, strings.Join(backendNames(), ", "))
	}

	// The runtime: checkpoint, tokenizer, engine (or remote), proxy,
	// sandbox backend, grader.
	rt, err := rollout.New(ctx, rollout.Options{Policy: *policyDir, Version: -1, Remote: rem,
		Compute: *pf.compute.name, Precision: *pf.compute.precision, Template: *templateName, MaxTokens: *maxTokens,
		Sandbox: *backendName, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer rt.Close()
	warn(rt, "rollout", stderr)
	st, err := sf.open(ctx, env, true)
	if err != nil {
		return err
	}

	it := int32(*iteration)
	row, segs, steps, runErr := rollout.Run(ctx, rollout.Config{
		Backend: rt.Backend, Grader: rt.Grader, Proxy: rt.Proxy, VocabSize: rt.Tokenizer.VocabSize(), PolicyVersion: rt.Version,
		Harness: h, AgentBinary: *agentPath, MaxTurns: *maxTurns,
		SuiteDir: suite.Dir, Instance: inst,
		RunID: *run, Iteration: it, RolloutID: rollout.ID(*run, it, inst.InstanceID, *index), Seed: *seed,
		SetupTimeout: *pf.setupTimeout, AgentTimeout: *agentTimeout, GradeTimeout: *gradeTimeout,
	})
	if runErr != nil && row.RolloutID == "" {
		return runErr
	}
	var storeErr error
	if runErr == nil {
		storeErr = rollout.WriteRows(ctx, st, row, segs, steps, version)
	}
	out, err := rowJSON(row)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", out)
	if runErr != nil {
		return runErr
	}
	if storeErr != nil {
		return fmt.Errorf("store: %w", storeErr)
	}
	return nil
}

// findAgent returns legorl-agent beside the running legorl.
func findAgent() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(exe), agentProgram)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found beside %s: build it with CGO_ENABLED=0 go build -o %s ./cmd/legorl-agent, or pass --agent",
			agentProgram, exe, p)
	}
	return p, nil
}

// rowJSON encodes a row as one JSON object keyed by its column names, in
// column order.
func rowJSON(row any) ([]byte, error) {
	v := reflect.ValueOf(row)
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("parquet"), ",")
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		val, err := json.Marshal(v.Field(i).Interface())
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
