package transforms

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Config configures the rollout DoFns. It travels inside the pipeline (Beam
// serializes DoFns as JSON), so it holds no secrets: S3 credentials come
// from the worker process (SetStoreOptions). Zero fields take the defaults
// in their comments.
type Config struct {
	// Store is the store URI (file:// or s3://); S3Endpoint its endpoint.
	Store      string
	S3Endpoint string

	RunID     string
	Iteration int32
	// Stage is the manifest stage the rows are committed under. Defaults to
	// "rollout" (Stage); another stage (e.g. "eval-bash") also scopes the
	// rollout and group ids, so that stages of one run never share ids.
	Stage string
	// Group is G, the rollouts per task. Defaults to 1.
	Group int
	// SeedBase mixes into every rollout's seed (rollout.Seed). Defaults to 0.
	SeedBase uint64

	// Harness is the harness name (harness.Lookup).
	Harness string
	// MaxTurns bounds the agent's turns (0: the harness's default).
	MaxTurns int
	// AgentBinary is legorl-agent's path on the workers (built-in harnesses).
	AgentBinary string

	// Policy is the checkpoint folder on the workers: config.json,
	// model.safetensors, tokenizer.json (only tokenizer.json with a remote
	// engine). PolicyVersion is its version (lineage.json; 0 without one).
	Policy        string
	PolicyVersion int64
	// Template is the chat template: qwen3 or qwen3-coder. Defaults to qwen3.
	Template string
	// TopK, when positive, samples among the K most likely tokens only;
	// 1 is greedy decoding (evals that separate sharpening from new
	// solving). Defaults to 0: temperature 1 over the whole support, the
	// training distribution.
	TopK int `json:",omitempty"`
	// MaxTokens bounds a completion when the harness asks for no limit.
	// Defaults to 1024.
	MaxTokens int
	// RemoteURL, when set, is a vLLM or SGLang server (RemoteKind "vllm" or
	// "sglang") used instead of the embedded engine. Defaults to "": the
	// embedded engine.
	RemoteURL  string
	RemoteKind string
	// Compute is the compute backend of the embedded engine's model
	// (policy/backend: cpu, or cuda in a binary built with -tags cuda) and
	// Precision its matrix products' (fp32 or bf16). Defaults to "": the
	// model's own CPU backend.
	Compute   string
	Precision string

	// Backend is the sandbox backend: local or docker. Defaults to local.
	Backend string
	// Parallel bounds the rollouts running at once in one worker process
	// (all groups of all DoFns there share the bound). Defaults to 4.
	Parallel int

	// Deadlines of a rollout's phases (rollout.Config): setup
	// (workspace, harness install, sandbox boot) defaults to 5 minutes, the
	// agent to 30 minutes, grading to 10 minutes.
	SetupTimeout time.Duration
	AgentTimeout time.Duration
	GradeTimeout time.Duration
	// TailShare and TailGrace are the tail-kill: once TailShare of a
	// group's rollouts have ended, the rest get TailGrace more, then they
	// are killed and masked as timeout. TailShare 0 defaults to 0.75; 1 or
	// more turns the tail-kill off. TailGrace defaults to 10 minutes.
	TailShare float64
	TailGrace time.Duration
	// StoreTimeout bounds each store operation (a put, a claim, the
	// commit). Defaults to 10 minutes.
	StoreTimeout time.Duration

	// ConfigHash goes into every file's footer. Defaults to Hash().
	ConfigHash string
	// CodeVersion goes into every file's footer. Defaults to "dev".
	CodeVersion string
	// JobID names this pipeline run's report (runs/RUN/reports/rollout/
	// iter-N/JOBID.json). Defaults to "job".
	JobID string

	// TestFault injects a failure, for tests of retries: "after-shard"
	// fails a group after its files are put and before its claim,
	// "after-claim" after its claim and before the bundle ends. Only the
	// group whose task id is TestFaultTask fails (any, when empty), and
	// only while the file TestFaultOnce names does not exist (it is
	// created at the first fault; "" fails every time). Defaults to "".
	TestFault     string
	TestFaultTask string
	TestFaultOnce string
}

// WithDefaults returns the config with its zero fields defaulted.
func (c Config) WithDefaults() Config {
	if c.Group <= 0 {
		c.Group = 1
	}
	if c.Stage == "" {
		c.Stage = Stage
	}
	if c.Template == "" {
		c.Template = "qwen3"
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 1024
	}
	if c.Backend == "" {
		c.Backend = "local"
	}
	if c.Parallel <= 0 {
		c.Parallel = 4
	}
	c.SetupTimeout, c.AgentTimeout, c.GradeTimeout = rollout.DefaultDeadlines(c.SetupTimeout, c.AgentTimeout, c.GradeTimeout)
	if c.TailShare <= 0 {
		c.TailShare = 0.75
	}
	if c.TailGrace <= 0 {
		c.TailGrace = 10 * time.Minute
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 10 * time.Minute
	}
	if c.CodeVersion == "" {
		c.CodeVersion = "dev"
	}
	if c.JobID == "" {
		c.JobID = "job"
	}
	if c.ConfigHash == "" {
		c.ConfigHash = c.Hash()
	}
	return c
}

// Check reports a config that cannot work, before any pipeline runs.
func (c Config) Check() error {
	c = c.WithDefaults()
	if c.Store == "" || c.Policy == "" || c.Harness == "" {
		return fmt.Errorf("%w: Store, Policy and Harness are required", ErrConfig)
	}
	if err := storage.CheckName("run id", c.RunID); err != nil {
		return err
	}
	if err := storage.CheckName("stage", c.Stage); err != nil {
		return err
	}
	if c.Iteration < 0 || c.Iteration > 999999 {
		return fmt.Errorf("%w: iteration %d not in [0, 999999]", ErrConfig, c.Iteration)
	}
	if c.TopK < 0 {
		return fmt.Errorf("%w: top-k %d is negative", ErrConfig, c.TopK)
	}
	if c.Group > 1024 {
		return fmt.Errorf("%w: group %d: at most 1024 rollouts per task", ErrConfig, c.Group)
	}
	if _, err := harness.Lookup(c.Harness); err != nil {
		return err
	}
	if _, err := rollout.Template(c.Template); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch c.Backend {
	case "local", "docker":
	default:
		return fmt.Errorf("%w: unknown backend %q: want local or docker", ErrConfig, c.Backend)
	}
	switch c.RemoteKind {
	case "", "vllm", "sglang":
	default:
		return fmt.Errorf("%w: unknown remote kind %q: want vllm or sglang", ErrConfig, c.RemoteKind)
	}
	if c.RemoteURL != "" && c.RemoteKind == "" {
		return fmt.Errorf("%w: a remote engine needs its kind (vllm or sglang)", ErrConfig)
	}
	if math.IsNaN(c.TailShare) {
		return fmt.Errorf("%w: tail share is NaN", ErrConfig)
	}
	switch c.TestFault {
	case "", "after-shard", "after-claim":
	default:
		return fmt.Errorf("%w: unknown test fault %q", ErrConfig, c.TestFault)
	}
	return nil
}

// ErrConfig: a Config that cannot work.
var ErrConfig = fmt.Errorf("transforms: bad config")

// Hash is the sha256 of what decides the rollouts' content: run, iteration,
// group size, seeds, harness, policy, sampling limits and deadlines (not
// the store, the runner or the parallelism).
func (c Config) Hash() string {
	c.Store, c.S3Endpoint, c.Parallel, c.ConfigHash, c.JobID = "", "", 0, "", ""
	c.TestFault, c.TestFaultTask, c.TestFaultOnce, c.StoreTimeout = "", "", "", 0
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ref is the rollout stage's manifest of the run and iteration.
func (c Config) ref() storage.ManifestRef {
	return storage.ManifestRef{RunID: c.RunID, Iteration: int(c.Iteration), Stage: c.Stage}
}

// Stage is the manifest stage the rollout pipeline commits by default.
const Stage = schemas.StageRollout

func (c Config) footer(t schemas.Table) schemas.Footer {
	return schemas.Footer{SchemaVersion: schemas.Version, Table: t, RunID: c.RunID, ConfigHash: c.ConfigHash,
		PolicyVersion: c.PolicyVersion, CodeVersion: c.CodeVersion}
}

// ReportKey is the key of a pipeline run's report.
func ReportKey(runID, stage string, iteration int32, jobID string) string {
	return schemas.ReportKey(runID, stage, iteration, jobID)
}
