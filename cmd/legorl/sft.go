package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/trainer"
)

// runSFT is `legorl sft`: supervised fine-tuning on demonstrations, or
// `legorl sft demos`: write the scripted solver's demonstrations.
func runSFT(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "demos" {
		return runSFTDemos(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("sft", stderr)
	demos := fs.String("demos", "", "demonstrations file, JSON lines (legorl sft demos writes one) (required)")
	policy := fs.String("policy", "", "checkpoint to start from (required)")
	out := fs.String("out", "", "new checkpoint folder; must not exist (required)")
	epochs := fs.Int("epochs", 0, "epochs over the demonstrations (default 3)")
	lr := fs.Float64("lr", 0, "AdamW learning rate (default 1e-4)")
	batch := fs.Int("batch", 0, "conversations per optimizer step (default 8)")
	seed := fs.Uint64("seed", 0, "seed of the per-epoch shuffle (default 0)")
	maxTokens := fs.Int("max-tokens", 0, "drop assistant turns whose prompt and completion exceed this many tokens (default 4096)")
	shared := fs.Bool("shared-prefix", false, "run the tokens every conversation of a step starts with (system prompt, tool schemas) once per step: faster, equal to float32 rounding but not byte-identical to the default")
	compute := addComputeFlags(fs)
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *demos == "" || *policy == "" || *out == "" {
		return fmt.Errorf("--demos, --policy and --out are required (see legorl sft -h)")
	}
	cfg := trainer.SFTConfig{Epochs: *epochs, LR: *lr, BatchSize: *batch, Seed: *seed, MaxTokens: *maxTokens, SharedPrefix: *shared}
	if err := cfg.Validate(); err != nil {
		return err
	}
	be, err := compute.open()
	if err != nil {
		return err
	}
	defer be.Close()
	res, err := trainer.SFT(ctx, trainer.SFTOptions{Demos: *demos, PolicyDir: *policy, OutDir: *out, Config: cfg, CodeVersion: version, Backend: be,
		Progress: func(s trainer.SFTStep) {
			fmt.Fprintf(stderr, "sft: step %d/%d (epoch %d): loss %.4f, grad norm %.3g, %d tokens, %.1fs\n",
				s.Step+1, s.Steps, s.Epoch+1, s.Loss, s.GradNorm, s.Tokens, s.Seconds)
		}})
	if err != nil {
		return err
	}
	l := res.Lineage
	first := 0.0
	if len(l.Steps) > 0 {
		first = l.Steps[0].Loss
	}
	fmt.Fprintf(stdout, "sft: %s: version %d from %d conversations (%d turns, %d dropped, %d tokens/epoch), %d steps, loss %.4f -> %.4f\n",
		res.Dir, l.Version, l.Demos.Conversations, l.Demos.Turns, l.Demos.DroppedTurns, l.Demos.Tokens, len(l.Steps), first, l.FinalLoss)
	return nil
}

// runSFTDemos is `legorl sft demos`: one demonstration per training
// instance of the suite, in the named agent's format (bash, tools, or
// pi's, Codex's or OpenCode's, which run the installed program:
// --harness-cache). Held-out
// instances and held-out families are skipped (counted); the file is
// written atomically.
func runSFTDemos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sft demos", stderr)
	suite := fs.String("tasks", "", "suite file or folder (legorl tasks generate writes one) (required)")
	harness := fs.String("harness", "", "agent format: "+strings.Join(scripted.Formats(), ", ")+" (required)")
	out := fs.String("out", "", "demonstrations file to write (required)")
	limit := fs.Int("n", 0, "at most this many demonstrations (0: every training instance)")
	cache := fs.String("harness-cache", "", "where npm harnesses (pi, codex, opencode) are installed, or are installed with npm: tools/harnesses after make test-harnesses (default $TMPDIR/legorl-harness, where rollouts install them)")
	inserts := fs.Bool("sed-inserts", false, "bash: write a multi-line insert after one matched line as sed with \\n in its replacement (GNU sed), not git apply")
	parallel := fs.Int("parallel", 4, "demonstrations made at once (each runs git and the agent's tools; the gain follows the cores)")
	verify := fs.String("grade", "", "grade every demonstration's diff in this sandbox backend ("+strings.Join(backendNames(), ", ")+") and fail unless it passes the hidden tests (empty: no grading)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *suite == "" || *harness == "" || *out == "" {
		return fmt.Errorf("--tasks, --harness and --out are required (see legorl sft demos -h)")
	}
	if !slices.Contains(scripted.Formats(), *harness) {
		return fmt.Errorf("--harness %q: want %s", *harness, strings.Join(scripted.Formats(), ", "))
	}
	if *parallel < 1 {
		return fmt.Errorf("--parallel %d: want at least 1", *parallel)
	}
	s, err := tasks.Load(*suite)
	if err != nil {
		return err
	}
	var g *grade.Grader
	if *verify != "" {
		b, err := openBackend(ctx, *verify)
		if err != nil {
			return fmt.Errorf("--grade: %w", err)
		}
		g = grade.New(b, grade.Options{})
	}
	var picks []*tasks.Instance
	skipped := 0
	for i := range s.Instances {
		in := &s.Instances[i]
		if *limit > 0 && len(picks) >= *limit {
			break
		}
		if scripted.CheckTrain(in) != nil {
			skipped++
			continue
		}
		picks = append(picks, in)
	}
	start, last := time.Now(), time.Now()
	demos, err := scripted.SolveAll(ctx, s.Dir, picks, *harness, scripted.Options{HarnessCache: *cache, SedInserts: *inserts}, *parallel,
		func(done int) {
			if time.Since(last) >= 10*time.Second {
				fmt.Fprintf(stderr, "sft demos: %d/%d solved, %s\n", done, len(picks), time.Since(start).Round(time.Second))
				last = time.Now()
			}
		})
	if err != nil {
		return err
	}
	for i, d := range demos {
		in, note := picks[i], ""
		if g != nil {
			gr, err := g.Grade(ctx, s.Dir, in, d.Diff)
			if err != nil {
				return err
			}
			if gr.Reward != 1 {
				return fmt.Errorf("%s: the %s demonstration's diff fails the hidden tests (%s, failed %v)", in.InstanceID, *harness, gr.Outcome, append(gr.F2PFailed, gr.P2PFailed...))
			}
			note = ", graded reward 1"
		}
		fmt.Fprintf(stderr, "sft demos: %d: %s (%s%s)\n", i+1, in.InstanceID, in.Family, note)
	}
	if len(demos) == 0 {
		return fmt.Errorf("%s: no training instance (%d held out)", *suite, skipped)
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".legorl-demos-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := scripted.WriteJSONL(tmp, demos); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sft demos: %s: %d %s demonstrations (%d held-out instances skipped)\n", *out, len(demos), *harness, skipped)
	return nil
}
