package loop

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/starter"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/trainer"
)

// ErrConfig: a loop config that cannot run.
var ErrConfig = errors.New("loop: bad config")

// Config is the loop's configuration file (JSON). Zero fields take the
// defaults in their comments; DefaultConfig is the embedded demo config.
type Config struct {
	// Run is the run id; the loop is resumable per run id.
	Run string `json:"run"`
	// Store is the store URI. Defaults to file://./legorl-data.
	Store string `json:"store,omitempty"`
	// S3Endpoint is the S3 endpoint of an s3:// store.
	S3Endpoint string `json:"s3_endpoint,omitempty"`
	// WorkDir holds the loop's local files: the generated suite, the
	// demonstrations, the tokenizer and the checkpoints. Defaults to
	// ./legorl-work/RUN.
	WorkDir string `json:"work_dir,omitempty"`

	// Tasks is a suite (a .jsonl or .parquet file, or a folder with
	// tasks.jsonl). Empty: the built-in suite Builtin describes, generated
	// in WorkDir/suite.
	Tasks   string  `json:"tasks,omitempty"`
	Builtin Builtin `json:"builtin"`

	// Policy is the starting checkpoint: a folder, or "starter:NAME" for a
	// starter committed with the code (policy/starter; installed under
	// WorkDir/checkpoints after its sha256 check). Empty: one is
	// initialised (Init) with a tokenizer trained on the demonstrations.
	Policy string `json:"policy,omitempty"`
	Init   Init   `json:"init"`
	// SFT, when set, warm-starts the policy on the scripted solver's
	// demonstrations of the training split before the first iteration.
	SFT *SFT `json:"sft,omitempty"`
	// Upcycle, when set, turns the dense starting policy (after SFT, if
	// any) into a Qwen3-MoE of Experts copies of each MLP with a fresh
	// router (model.Upcycle), written once to WorkDir/checkpoints/upcycled:
	// RL on a MoE that starts as competent as the dense policy.
	Upcycle *model.UpcycleOptions `json:"upcycle,omitempty"`

	// Harness is the agent trained. Required.
	Harness string `json:"harness"`
	// Iterations is the number of updates. Defaults to 1.
	Iterations int `json:"iterations"`
	// Group is G, rollouts per training task per iteration. Defaults to 4.
	Group int `json:"group"`
	// Rollout configures every rollout, training and eval alike.
	Rollout Rollout `json:"rollout"`
	// RL chooses each iteration's training tasks.
	RL RL `json:"rl"`
	// Train is the trainer's config.
	Train trainer.Config `json:"train"`
	// TrainFrom switches the trainer's config during the run: from
	// iteration TrainFrom[j].Iteration on (0-based, strictly increasing,
	// within the run), the updates use TrainFrom[j].Train, a whole trainer
	// config, instead of Train. The optimizer's state carries over as
	// between any two iterations (its moments, and the step count the
	// learning rate's schedule follows), so a phase changes the objective
	// and its settings, not the optimizer's history: e.g. rejection-
	// sampling fine-tuning (baseline none) to sharpen the policy toward its
	// greedy answers, then GRPO (baseline group) to push failures down and
	// find new solutions. A resumed iteration must have been trained with
	// its phase's config. Defaults to none: Train for every iteration.
	TrainFrom []TrainPhase `json:"train_from,omitempty"`
	// Eval configures the held-out evals.
	Eval Eval `json:"eval"`
}

// TrainPhase is one entry of Config.TrainFrom.
type TrainPhase struct {
	// Iteration is the first iteration trained with Train.
	Iteration int            `json:"iteration"`
	Train     trainer.Config `json:"train"`
}

// trainConfig is the trainer's config for iteration i, and the index of
// its TrainFrom phase (-1: Config.Train).
func (c Config) trainConfig(i int) (trainer.Config, int) {
	cfg, phase := c.Train, -1
	for j, p := range c.TrainFrom {
		if i >= p.Iteration {
			cfg, phase = p.Train, j
		}
	}
	return cfg, phase
}

// Builtin is the built-in suite's generator settings.
type Builtin struct {
	// N instances, Seed; Languages defaults to python and go.
	N         int      `json:"n"`
	Seed      uint64   `json:"seed"`
	Languages []string `json:"languages,omitempty"`
}

// Init initialises the starting policy when Config.Policy is empty.
type Init struct {
	// Model is a Hugging Face config.json (Qwen3 or Qwen3-MoE); its
	// vocab_size is set to the trained tokenizer's.
	Model json.RawMessage `json:"model"`
	// Vocab is the tokenizer's vocabulary size. Defaults to 1024.
	Vocab int `json:"vocab"`
	// Seed of the initial weights.
	Seed uint64 `json:"seed"`
}

// RL chooses the tasks of the RL iterations.
type RL struct {
	// TasksPerIteration is K: each iteration rolls out K tasks of the
	// train split it has not rolled out before (a seeded order of the
	// pool, walked in turn; past its end the order starts again). Once
	// tasks repeat, the loop says so and the summary counts them per
	// iteration (repeated_tasks): a policy can learn repeated tasks rather
	// than the skill, and under rl.select the arms drawn most run out
	// first, so size builtin.n for K x iterations in those arms. SFT never
	// sees them: its demonstrations come from the sft split. Defaults to
	// 0: every train task, every iteration.
	TasksPerIteration int `json:"tasks_per_iteration,omitempty"`
	// Select is how an iteration's K tasks are chosen: "order" (the
	// default) walks the pool's seeded order; "variance" draws each task's
	// family with weight p(1-p), p the family's pass rate over the earlier
	// iterations' rollouts (a Beta(1,1) prior), then takes the family's next
	// unused task (a family used up starts again: its tasks repeat).
	// Groups whose rewards are all equal give no gradient; a family near
	// 0.5 gives the most (variance-based task selection, arXiv 2504.03380). "template_variance" is the same with each task's
	// template (Instance.Template) in place of its family, where tasks
	// have one: a family whose templates the policy either always or never
	// solves looks like one near 0.5, and only the finer arm sees that its
	// rollouts teach nothing. Both need tasks_per_iteration.
	Select string `json:"select,omitempty"`
	// Probe, when set, keeps the run's best policy by a validation probe:
	// Probe.Tasks tasks at the end of the train split's seeded order are
	// held out of the iterations, and pass@1 on them (temperature 1, one
	// rollout each) is measured for the starting policy and every
	// Probe.Every iterations. The final eval measures the checkpoint with
	// the best probe pass@1 (the earliest on a tie), so a run that drifts
	// past its best keeps its best; the held-out splits never choose.
	// Needs tasks_per_iteration.
	Probe *RLProbe `json:"probe,omitempty"`
}

// RLProbe configures RL's validation probe.
type RLProbe struct {
	// Tasks is the number of train-split tasks held out for the probe.
	// Defaults to 128.
	Tasks int `json:"tasks,omitempty"`
	// Every is the period in iterations; the last iteration is always
	// probed. Defaults to 10.
	Every int `json:"every,omitempty"`
	// Patience, when above 0, stops the run early after that many probes
	// in a row without a new best. Defaults to 0: run every iteration.
	Patience int `json:"patience,omitempty"`
}

// The values of RL.Select.
const (
	SelectOrder            = "order"
	SelectVariance         = "variance"
	SelectTemplateVariance = "template_variance"
)

// SFT is the warm start.
type SFT struct {
	trainer.SFTConfig
	// Harness is the demonstrations' format (scripted.Formats: bash,
	// tools, pi, codex, opencode). Defaults to Config.Harness.
	Harness string `json:"harness,omitempty"`
	// Probe, when set, measures pass@1 on tasks of the RL pool during SFT
	// and stops it in a band (trainer.SFTProbe).
	Probe *Probe `json:"probe,omitempty"`
	// SedInserts writes the bash demonstrations of multi-line inserts as
	// sed (scripted.Options.SedInserts) instead of git apply.
	SedInserts bool `json:"sed_inserts,omitempty"`
}

// Probe configures SFT's probe.
type Probe struct {
	// Tasks is the number of train-split tasks probed (one rollout each,
	// temperature 1). Defaults to 32.
	Tasks int `json:"tasks,omitempty"`
	// Every is the period in epochs. Defaults to 1.
	Every int `json:"every,omitempty"`
	// Band is the pass@1 interval SFT stops in. Defaults to [0.2, 0.5].
	Band [2]float64 `json:"band,omitempty"`
}

// Rollout configures the rollouts.
type Rollout struct {
	// MaxTurns bounds an episode. Defaults to 8.
	MaxTurns int `json:"max_turns"`
	// MaxTokens bounds a completion. Defaults to 256.
	MaxTokens int `json:"max_tokens"`
	// Parallel rollouts at once. Defaults to 4.
	Parallel int `json:"parallel"`
	// Template is the chat template. Defaults to qwen3.
	Template string `json:"template,omitempty"`
	// Backend is the sandbox backend. Defaults to local.
	Backend string `json:"backend,omitempty"`
	// AgentTimeout and GradeTimeout are the phases' deadlines ("5m").
	// Default to 5 and 5 minutes.
	// Precision is the rollout engines' matrix-product precision, "fp32"
	// or "bf16" (inputs rounded to bfloat16, as a GPU serving engine
	// computes; backend.CPUBF16 on the CPU). Defaults to the training
	// backend's: set it to sample in reduced precision beside an fp32
	// trainer, the mismatch routing replay exists for.
	Precision    string   `json:"precision,omitempty"`
	AgentTimeout Duration `json:"agent_timeout,omitempty"`
	GradeTimeout Duration `json:"grade_timeout,omitempty"`
}

// Eval configures the held-out evals: before the first update, every
// Every iterations, and after the last.
type Eval struct {
	// Every is the period in iterations. Defaults to 0: before and after
	// only.
	Every int `json:"every"`
	// Harnesses evaluated. Defaults to Config.Harness.
	Harnesses []string `json:"harnesses,omitempty"`
	// Group is rollouts per held-out task (pass@1 is their mean; pass@k
	// with k = Group). Defaults to 1.
	Group int `json:"group"`
	// MaxTasks bounds the tasks evaluated per split (the first of the
	// suite's order). Defaults to 0: every task of the split.
	MaxTasks int `json:"max_tasks,omitempty"`
	// Greedy also evaluates every policy with greedy decoding (top-k 1),
	// beside temperature 1: RL that only sharpens the distribution moves
	// the temperature-1 figure and not the greedy one. Defaults to true;
	// false evaluates at temperature 1 only.
	Greedy *bool `json:"greedy,omitempty"`
	// Splits are the held-out splits evaluated, each its own row: heldout
	// (unseen instances of the trained families) and heldout_family
	// (unseen families). Defaults to both.
	Splits []string `json:"splits,omitempty"`
	// MaxMasked is the share of an eval's rollouts that may be masked
	// (environment failures: a sandbox or grader that could not run) before
	// the eval is run again under a new run name (RUN-eval-SPLIT-retryN),
	// at most evalRetries times; the last attempt counts either way, and
	// the table warns about what it masked. Defaults to 0.05; 1 never runs
	// an eval again.
	MaxMasked float64 `json:"max_masked,omitempty"`
}

// greedy says whether the evals decode greedily too (Greedy: nil is
// true).
func (e Eval) greedy() bool { return e.Greedy == nil || *e.Greedy }

// evalRetries is how many times an eval that masked more than
// Eval.MaxMasked of its rollouts is run again.
const evalRetries = 2

// Duration is a time.Duration written as "90s" in JSON.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"90s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("bad duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

//go:embed demo.json
var demoConfig []byte

// DefaultConfig is the embedded demo config `make demo` runs: the bash
// agent from the committed starter checkpoint (policy/starter), 28 RL
// iterations of 16 fresh tasks of the built-in suite drawn by the reward
// variance of their template, and the starting and final policies
// evaluated at temperature 1 and greedily on 30 held-out tasks of the
// suite (validation) and 30 of the run's test suite. Eight evals of 30
// tasks take about three quarters of the time of the two evals of 200
// tasks at temperature 1 the demo had before (four evals of 40 took 0.76
// to 0.95 of one of 200, side by side), which leaves room for generating
// the test suite's first instances: `make demo` stays under ten minutes
// on 2 cores.
func DefaultConfig() Config {
	c, err := ParseConfig(bytes.NewReader(demoConfig))
	if err != nil {
		panic("loop: the embedded demo config does not parse: " + err.Error()) // a build defect, caught by its test
	}
	return c
}

// ReadConfig reads a config file; unknown fields are errors.
func ReadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	c, err := ParseConfig(f)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes a config; unknown fields are errors.
func ParseConfig(r io.Reader) (Config, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return c, nil
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Store == "" {
		c.Store = "file://./legorl-data"
	}
	if c.WorkDir == "" {
		c.WorkDir = "legorl-work/" + c.Run
	}
	if c.Iterations == 0 {
		c.Iterations = 1
	}
	if c.Group == 0 {
		c.Group = 4
	}
	if c.Init.Vocab == 0 {
		c.Init.Vocab = 1024
	}
	if c.SFT != nil && c.SFT.Harness == "" {
		s := *c.SFT
		s.Harness = c.Harness
		c.SFT = &s
	}
	if len(c.Eval.Splits) == 0 {
		c.Eval.Splits = []string{tasks.SplitHeldout, tasks.SplitHeldoutFamily}
	}
	if c.Eval.Greedy == nil {
		greedy := true
		c.Eval.Greedy = &greedy
	}
	if c.Eval.MaxMasked == 0 {
		c.Eval.MaxMasked = 0.05
	}
	r := &c.Rollout
	if r.MaxTurns == 0 {
		r.MaxTurns = 8
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = 256
	}
	if r.Parallel == 0 {
		r.Parallel = 4
	}
	if r.Template == "" {
		r.Template = "qwen3"
	}
	if r.Backend == "" {
		r.Backend = "local"
	}
	if r.AgentTimeout == 0 {
		r.AgentTimeout = Duration(5 * time.Minute)
	}
	if r.GradeTimeout == 0 {
		r.GradeTimeout = Duration(5 * time.Minute)
	}
	if len(c.Eval.Harnesses) == 0 {
		c.Eval.Harnesses = []string{c.Harness}
	}
	if c.Eval.Group == 0 {
		c.Eval.Group = 1
	}
	if c.RL.Probe != nil {
		p := *c.RL.Probe
		if p.Tasks == 0 {
			p.Tasks = 128
		}
		if p.Every == 0 {
			p.Every = 10
		}
		c.RL.Probe = &p
	}
	if c.SFT != nil && c.SFT.Probe != nil {
		s, p := *c.SFT, *c.SFT.Probe
		if p.Tasks == 0 {
			p.Tasks = 32
		}
		if p.Every == 0 {
			p.Every = 1
		}
		if p.Band == ([2]float64{}) {
			p.Band = [2]float64{0.2, 0.5}
		}
		s.Probe = &p
		c.SFT = &s
	}
	return c
}

// Validate reports a config that cannot run, naming the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	if err := storage.CheckName("run id", c.Run); err != nil {
		return bad("run: %v", err)
	}
	if _, err := harness.Lookup(c.Harness); err != nil {
		return bad("harness: %v", err)
	}
	for _, h := range c.Eval.Harnesses {
		if _, err := harness.Lookup(h); err != nil {
			return bad("eval.harnesses: %v", err)
		}
	}
	if c.Iterations < 0 || c.Iterations > 999999 {
		return bad("iterations %d: want 1 to 999999", c.Iterations)
	}
	if c.Group < 1 || c.Group > 1024 || c.Eval.Group < 1 || c.Eval.Group > 1024 {
		return bad("group %d, eval.group %d: want 1 to 1024", c.Group, c.Eval.Group)
	}
	for _, sp := range c.Eval.Splits {
		if sp != tasks.SplitHeldout && sp != tasks.SplitHeldoutFamily {
			return bad("eval.splits: %q: want %s or %s", sp, tasks.SplitHeldout, tasks.SplitHeldoutFamily)
		}
	}
	if c.Eval.Every < 0 {
		return bad("eval.every %d is negative", c.Eval.Every)
	}
	if c.Tasks == "" && c.Builtin.N <= 0 {
		return bad("neither tasks (a suite) nor builtin.n (the built-in suite's size)")
	}
	if name, ok := strings.CutPrefix(c.Policy, starter.Prefix); ok && !slices.Contains(starter.Names(), name) {
		return bad("policy %q: no such starter (have %s)", c.Policy, strings.Join(starter.Names(), ", "))
	}
	if c.Policy == "" && len(c.Init.Model) == 0 {
		return bad("neither policy (a checkpoint) nor init.model (a config.json to initialise one)")
	}
	if c.Init.Vocab < 265 {
		return bad("init.vocab %d: at least 265", c.Init.Vocab)
	}
	if c.SFT != nil {
		if !slices.Contains(scripted.Formats(), c.SFT.Harness) {
			return bad("sft.harness %q: demonstrations exist for %s", c.SFT.Harness, strings.Join(scripted.Formats(), ", "))
		}
		if err := c.SFT.SFTConfig.Validate(); err != nil {
			return err
		}
	}
	switch {
	case c.RL.Select != "" && c.RL.Select != SelectOrder && c.RL.Select != SelectVariance && c.RL.Select != SelectTemplateVariance:
		return bad("rl.select %q: want %s, %s or %s", c.RL.Select, SelectOrder, SelectVariance, SelectTemplateVariance)
	case (c.RL.Select == SelectVariance || c.RL.Select == SelectTemplateVariance) && c.RL.TasksPerIteration == 0:
		return bad("rl.select %s needs rl.tasks_per_iteration", c.RL.Select)
	}
	if p := c.RL.Probe; p != nil {
		switch {
		case c.RL.TasksPerIteration == 0:
			return bad("rl.probe needs rl.tasks_per_iteration (the probe's tasks are held out of the iterations' pool)")
		case p.Tasks < 1 || p.Every < 1 || p.Patience < 0:
			return bad("rl.probe: tasks %d, every %d, patience %d: want tasks and every >= 1, patience >= 0", p.Tasks, p.Every, p.Patience)
		}
	}
	if !(c.Eval.MaxMasked > 0 && c.Eval.MaxMasked <= 1) {
		return bad("eval.max_masked %v: want a share in (0, 1]", c.Eval.MaxMasked)
	}
	if c.RL.TasksPerIteration < 0 || c.Eval.MaxTasks < 0 {
		return bad("rl.tasks_per_iteration %d, eval.max_tasks %d: negative", c.RL.TasksPerIteration, c.Eval.MaxTasks)
	}
	if c.SFT != nil && c.SFT.Probe != nil {
		p := c.SFT.Probe
		if p.Tasks < 1 || p.Every < 1 || p.Band[0] < 0 || p.Band[1] > 1 || p.Band[0] > p.Band[1] {
			return bad("sft.probe: tasks %d, every %d, band %v: want tasks and every >= 1 and 0 <= lo <= hi <= 1", p.Tasks, p.Every, p.Band)
		}
	}
	if u := c.Upcycle; u != nil && (u.Experts < 1 || u.Experts > 1<<15 || u.TopK < 1 || u.TopK > u.Experts || u.Noise < 0) {
		return bad("upcycle: experts %d, top_k %d, noise %g: want 1 <= top_k <= experts <= 32768, noise >= 0", u.Experts, u.TopK, u.Noise)
	}
	if p := c.Rollout.Precision; p != "" && p != "fp32" && p != "bf16" {
		return bad("rollout.precision %q: want fp32 or bf16", p)
	}
	if c.Rollout.MaxTurns < 0 || c.Rollout.MaxTokens < 0 || c.Rollout.Parallel < 0 {
		return bad("rollout: negative max_turns, max_tokens or parallel")
	}
	for j, p := range c.TrainFrom {
		if p.Iteration < 1 || p.Iteration >= c.Iterations || (j > 0 && p.Iteration <= c.TrainFrom[j-1].Iteration) {
			return bad("train_from[%d].iteration %d: want 1 to %d (iterations - 1), each after the one before", j, p.Iteration, c.Iterations-1)
		}
		if err := p.Train.WithDefaults().Validate(); err != nil {
			return fmt.Errorf("train_from[%d]: %w", j, err)
		}
	}
	return c.Train.WithDefaults().Validate()
}

// trainSplit is the only split the loop rolls out and fine-tunes on.
var trainSplit = []string{tasks.SplitTrain}
