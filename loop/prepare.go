package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/pipelines/eval"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/starter"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
	"github.com/legorl/legorl/trainer"
	"github.com/legorl/legorl/transforms"
)

// prepare opens the store and makes the suite and the starting policy,
// reusing what an earlier run of the same config left in WorkDir. Every
// file or folder is written beside its final name and renamed, so a crash
// leaves either nothing or the whole thing.
func (l *looper) prepare(ctx context.Context) error {
	cfg := l.cfg
	var err error
	if cfg.WorkDir, err = filepath.Abs(cfg.WorkDir); err != nil {
		return err
	}
	l.cfg.WorkDir = cfg.WorkDir
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "checkpoints"), 0o755); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	so := l.o.StoreOptions
	if cfg.S3Endpoint != "" {
		so.S3Endpoint = cfg.S3Endpoint
	}
	so.CreateBucket = true
	if l.st, err = storage.Open(ctx, cfg.Store, so); err != nil {
		return err
	}
	if err := l.hold(ctx); err != nil {
		return err
	}
	transforms.SetStoreOptions(l.o.StoreOptions)

	if l.suite, err = l.prepareSuite(ctx); err != nil {
		return err
	}
	if err := l.checkGrading(ctx); err != nil {
		return err
	}
	if name, ok := strings.CutPrefix(cfg.Policy, starter.Prefix); ok {
		if l.start, err = starter.Install(name, filepath.Join(cfg.WorkDir, "checkpoints", "starter-"+name)); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
	} else if cfg.Policy != "" {
		if l.start, err = filepath.Abs(cfg.Policy); err != nil {
			return err
		}
		if _, err := model.LoadConfig(filepath.Join(l.start, "config.json")); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
	} else if l.start, err = l.prepareInit(ctx); err != nil {
		return err
	}
	if cfg.SFT != nil {
		if l.start, err = l.prepareSFT(ctx, l.start); err != nil {
			return err
		}
	}
	if o := cfg.Upcycle; o != nil {
		dir := filepath.Join(cfg.WorkDir, "checkpoints", "upcycled")
		if !exists(dir) {
			if _, err := trainer.Upcycle(l.start, dir, *o, l.o.CodeVersion); err != nil {
				return fmt.Errorf("upcycle: %w", err)
			}
			l.logf("upcycled %s into a mixture of %d experts (top-%d, noise %g) in %s", l.start, o.Experts, o.TopK, o.Noise, dir)
			l.did("upcycle")
		}
		l.start = dir
	}
	return nil
}

// checkGrading grades a gold patch per test runner of the suite before
// anything else runs, on every start (a resumed run may be on another
// machine): where the tests cannot run, every rollout would be masked and
// the run would learn from nothing for hours (rollout.CheckGrading).
func (l *looper) checkGrading(ctx context.Context) error {
	s, err := tasks.Load(l.suite)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := rollout.CheckGrading(ctx, l.cfg.Rollout.Backend, s.Dir, s.Instances); err != nil {
		return err
	}
	l.logf("grading checked: the suite's gold patches pass here (%s)", time.Since(start).Round(10*time.Millisecond))
	return nil
}

func (l *looper) prepareSuite(ctx context.Context) (string, error) {
	if l.cfg.Tasks != "" {
		p, err := filepath.Abs(l.cfg.Tasks)
		if err != nil {
			return "", err
		}
		if _, err := tasks.Load(p); err != nil {
			return "", err
		}
		return p, nil
	}
	dir := filepath.Join(l.cfg.WorkDir, "suite")
	if exists(filepath.Join(dir, "tasks.jsonl")) {
		return dir, nil
	}
	b := l.cfg.Builtin
	l.logf("generating the built-in suite (%d instances, seed %d) in %s", b.N, b.Seed, dir)
	l.did("generate the built-in suite")
	return dir, atomicDir(dir, func(tmp string) error {
		_, err := builtin.Generate(ctx, tmp, builtin.Options{N: b.N, Seed: b.Seed, Languages: b.Languages})
		return err
	})
}

// demos writes (once) the scripted solver's demonstrations of every
// training instance in the agent's format and returns the file.
func (l *looper) demos(ctx context.Context, agent string) (string, error) {
	path := filepath.Join(l.cfg.WorkDir, "demos-"+agent+".jsonl")
	if exists(path) {
		return path, nil
	}
	s, err := tasks.Load(l.suite)
	if err != nil {
		return "", err
	}
	var picked []*tasks.Instance
	split := l.demoSplit()
	for i := range s.Instances {
		in := &s.Instances[i]
		if scripted.CheckTrain(in) != nil || in.Check() != nil || (in.Split != "" && in.Split != split) {
			continue // held out, in the RL pool, or invalid: never a demonstration
		}
		picked = append(picked, in)
	}
	if len(picked) == 0 {
		return "", fmt.Errorf("%s: no training instance to demonstrate", l.suite)
	}
	// Rollout.Parallel demonstrations at once, as rollouts; a line every
	// 10 seconds at most says how far it is.
	start, last := time.Now(), time.Now()
	demos, err := scripted.SolveAll(ctx, s.Dir, picked, agent, scripted.Options{SedInserts: l.cfg.SFT != nil && l.cfg.SFT.SedInserts},
		l.cfg.Rollout.Parallel, func(done int) {
			if time.Since(last) >= 10*time.Second {
				l.logf("%s demonstrations: %d/%d, %s", agent, done, len(picked), time.Since(start).Round(time.Second))
				last = time.Now()
			}
		})
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := scripted.WriteJSONL(&buf, demos); err != nil {
		return "", err
	}
	l.logf("%d %s demonstrations of the %s split in %s -> %s", len(demos), agent, split, time.Since(start).Round(time.Second), path)
	l.did("%s demonstrations", agent)
	return path, atomicFile(path, buf.Bytes())
}

// prepareInit trains a tokenizer on the demonstrations and initialises
// the model of Init with its vocabulary.
func (l *looper) prepareInit(ctx context.Context) (string, error) {
	dir := filepath.Join(l.cfg.WorkDir, "checkpoints", "init")
	if exists(dir) {
		return dir, nil
	}
	agent := l.cfg.Harness
	if l.cfg.SFT != nil {
		agent = l.cfg.SFT.Harness
	}
	if !slices.Contains(scripted.Formats(), agent) {
		agent = "bash" // the corpus only: the demonstrations' text is the suite's language
	}
	demos, err := l.demos(ctx, agent)
	if err != nil {
		return "", err
	}
	corpus, err := os.ReadFile(demos)
	if err != nil {
		return "", err
	}
	tr := tokenizer.NewTrainer(nil)
	tr.Add(string(corpus))
	tokJSON, err := tr.Train(tokenizer.TrainOptions{VocabSize: l.cfg.Init.Vocab, MinFrequency: 2})
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	tok, err := tokenizer.Parse(tokJSON)
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	tokPath := filepath.Join(l.cfg.WorkDir, "tokenizer.json")
	if err := atomicFile(tokPath, tokJSON); err != nil {
		return "", err
	}
	var mc map[string]any
	if err := json.Unmarshal(l.cfg.Init.Model, &mc); err != nil {
		return "", fmt.Errorf("%w: init.model: %v", ErrConfig, err)
	}
	mc["vocab_size"] = tok.VocabSize()
	mcJSON, _ := json.Marshal(mc)
	mcPath := filepath.Join(l.cfg.WorkDir, "model-config.json")
	if err := atomicFile(mcPath, mcJSON); err != nil {
		return "", err
	}
	mconf, err := model.LoadConfig(mcPath)
	if err != nil {
		return "", fmt.Errorf("%w: init.model: %v", ErrConfig, err)
	}
	m, err := model.New(mconf, l.cfg.Init.Seed)
	if err != nil {
		return "", fmt.Errorf("%w: init.model: %v", ErrConfig, err)
	}
	l.logf("initialised a %d-parameter model (vocabulary %d, seed %d) -> %s", m.NumParams(), tok.VocabSize(), l.cfg.Init.Seed, dir)
	l.did("tokenizer and initial policy")
	return dir, atomicDir(dir, func(tmp string) error {
		return m.Save(tmp, model.SaveOptions{TokenizerFiles: []string{tokPath}})
	})
}

// prepareSFT fine-tunes the starting policy on the demonstrations.
func (l *looper) prepareSFT(ctx context.Context, from string) (string, error) {
	dir := filepath.Join(l.cfg.WorkDir, "checkpoints", "sft")
	if exists(dir) {
		return dir, l.readSFT(dir)
	}
	demos, err := l.demos(ctx, l.cfg.SFT.Harness)
	if err != nil {
		return "", err
	}
	l.logf("SFT warm start on %s", demos)
	start := time.Now()
	var probe *trainer.SFTProbe
	if p := l.cfg.SFT.Probe; p != nil {
		tasks, err := l.probeTasks(p.Tasks)
		if err != nil {
			return "", err
		}
		probe = &trainer.SFTProbe{Every: p.Every, Band: p.Band, Dir: filepath.Join(l.cfg.WorkDir, "checkpoints", "sft-probes"),
			Measure: func(ctx context.Context, ckpt string, epoch int) (float64, int, error) {
				return l.measureProbe(ctx, ckpt, epoch, tasks)
			}}
	}
	res, err := trainer.SFT(ctx, trainer.SFTOptions{Demos: demos, PolicyDir: from, OutDir: dir, Config: l.cfg.SFT.SFTConfig, Backend: l.o.Backend,
		CodeVersion: l.o.CodeVersion, Progress: l.o.OnSFT, Probe: probe})
	if err != nil {
		return "", fmt.Errorf("sft: %w", err)
	}
	first := 0.0
	if len(res.Lineage.Steps) > 0 {
		first = res.Lineage.Steps[0].Loss
	}
	l.logf("SFT: %d steps, loss %.4f -> %.4f in %s -> %s", len(res.Lineage.Steps), first, res.Lineage.FinalLoss, time.Since(start).Round(time.Second), dir)
	l.did("SFT")
	return dir, l.readSFT(dir)
}

// measureProbe is pass@1 (temperature 1, one rollout per task) of an SFT
// probe checkpoint on the probe tasks: an eval run of its own
// (RUN-sft-probe, iteration = the epoch).
func (l *looper) measureProbe(ctx context.Context, ckpt string, epoch int, taskFile string) (float64, int, error) {
	r, err := l.probe(ctx, ckpt, epoch, taskFile, "sft-probe", l.cfg.SFT.Probe.Tasks)
	if err != nil {
		return 0, 0, err
	}
	l.logf("SFT probe after epoch %d: pass@1 %.3f over %d tasks of the RL pool (%d masked)", epoch+1, r.Pass1, r.Tasks, r.Masked)
	return r.Pass1, r.Tasks, nil
}

// probe is pass@1 (temperature 1, one rollout per task) of a checkpoint on
// a probe's n tasks of the train split: an eval run of its own, RUN-NAME
// at iteration at, so a resumed run reads the committed rollouts back.
func (l *looper) probe(ctx context.Context, ckpt string, at int, taskFile, name string, n int) (transforms.EvalRow, error) {
	version, err := policyVersion(ckpt)
	if err != nil {
		return transforms.EvalRow{}, err
	}
	rc := l.rolloutConfig(at, ckpt, version, l.cfg.Harness, "", 1, l.cfg.Run+"-"+name)
	rc.Harness, rc.Stage = l.cfg.Harness, eval.Stage(l.cfg.Harness)
	done := l.onPipeline(rc, n)
	t, err := eval.Run(ctx, eval.Options{Tasks: taskFile, Harnesses: []string{l.cfg.Harness}, Splits: trainSplit, Config: rc},
		l.runnerOptions(name, at))
	done()
	if err != nil {
		return transforms.EvalRow{}, err
	}
	if len(t.Rows) == 0 {
		return transforms.EvalRow{}, fmt.Errorf("%s: no rollout completed", strings.ReplaceAll(name, "-", " "))
	}
	return t.Rows[0], nil
}

// readSFT records the SFT checkpoint's lineage in the run's summary.
func (l *looper) readSFT(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "lineage.json"))
	if err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	var lin trainer.SFTLineage
	if err := json.Unmarshal(b, &lin); err != nil {
		return fmt.Errorf("sft: %s: %w", dir, err)
	}
	l.sft = &SFTSummary{Demos: lin.Demos.Conversations, Steps: len(lin.Steps), FinalLoss: lin.FinalLoss, Probes: lin.Probes, Kept: lin.Kept}
	for _, st := range lin.Steps {
		l.sft.TrainSeconds += st.Seconds
	}
	for _, p := range lin.Probes {
		l.sft.ProbeSeconds += p.Seconds
	}
	return nil
}

// atomicDir fills a temporary folder beside dir and renames it to dir.
func atomicDir(dir string, fill func(tmp string) error) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".legorl-tmp-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// atomicFile writes data beside path and renames it.
func atomicFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".legorl-tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
