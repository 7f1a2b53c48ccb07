package trainer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Options configure Train.
type Options struct {
	Store     storage.Store
	RunID     string
	Iteration int
	// PolicyDir is the parent checkpoint: the weights that sampled the
	// iteration's rollouts, in HF layout, with optimizer state and
	// lineage.json when an earlier update wrote it.
	PolicyDir string
	// OutDir is the new checkpoint's folder; it must not exist.
	OutDir string
	Config Config
	// ParentVersion overrides the parent's policy version. Defaults to the
	// version in PolicyDir/lineage.json, or 0 without one.
	ParentVersion *int64
	// Stage is the manifest stage of the rollouts. Defaults to "rollout".
	Stage string
	// CodeVersion goes into footers and the lineage. Defaults to "dev".
	CodeVersion string
	// Mem allocates Arrow buffers. Defaults to memory.DefaultAllocator.
	Mem memory.Allocator
	// Progress, when not nil, hears of each phase's progress.
	Progress func(Progress)
	// Metrics, when not nil, receives each optimizer step's figures and
	// the gate's as Prometheus metrics (NewMetrics), as they happen.
	// Defaults to nil: no metrics.
	Metrics *Metrics
	// Backend runs the recompute, the gradients and the optimizer steps.
	// Defaults to the CPU backend. Train does not close it.
	Backend backend.Backend
}

// Result is what Train published.
type Result struct {
	Dir        string // the new checkpoint folder
	Lineage    *Lineage
	Data       *Data
	Update     *IterationResult
	TrainSteps storage.FileEntry
}

// Train runs the update of one iteration from stored data and publishes
// the next checkpoint: it loads the parent (weights, optimizer state,
// version), the iteration's data, runs Trainer.Iteration, then writes the
// checkpoint folder atomically (a temporary folder beside OutDir, renamed)
// and the iteration's train_steps rows, committed in the "train" manifest
// stage. On any error nothing is visible: no folder at OutDir, no train
// manifest version (a train_steps file put before a failed commit is named
// by no manifest, so readers never see it).
func Train(ctx context.Context, o Options) (*Result, error) {
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Store == nil || o.PolicyDir == "" || o.OutDir == "" {
		return nil, fmt.Errorf("%w: a store, a policy folder and an output folder are required", ErrConfig)
	}
	if err := storage.CheckName("run id", o.RunID); err != nil {
		return nil, err
	}
	if o.CodeVersion == "" {
		o.CodeVersion = "dev"
	}
	progress := func(p Progress) {
		if o.Progress != nil {
			o.Progress(p)
		}
	}
	if _, err := os.Lstat(o.OutDir); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: output folder %s already exists (checkpoints are write-once)", ErrCheckpoint, o.OutDir)
	}
	parent, err := loadParent(o.PolicyDir, cfg, o.ParentVersion, o.Backend)
	if err != nil {
		return nil, err
	}
	progress(Progress{Phase: "load"})
	data, err := Load(ctx, o.Store, o.RunID, o.Iteration, LoadOptions{Stage: o.Stage, Model: parent.model.Config(), Mem: o.Mem})
	if err != nil {
		return nil, err
	}
	tr, err := New(parent.model, parent.opt, cfg)
	if err != nil {
		return nil, err
	}
	tr.metrics = o.Metrics
	upd, err := tr.Iteration(data, parent.ref.Version, progress)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	progress(Progress{Phase: "publish"})
	rows := trainStepRows(o.RunID, o.Iteration, parent.ref.Version, upd)
	for i := range rows {
		if err := rows[i].Validate(); err != nil {
			return nil, fmt.Errorf("trainer: %w", err)
		}
	}
	lin := &Lineage{
		Format: LineageFormat, RunID: o.RunID, Iteration: o.Iteration, Version: parent.ref.Version + 1,
		Parent: parent.ref, CreatedAt: time.Now().UTC(), CodeVersion: o.CodeVersion,
		Config: cfg, ConfigHash: cfg.Hash(), Gate: upd.Gate,
		Data: DataUse{Manifests: []ManifestUse{data.Manifest}, Rollouts: len(data.Rollouts), Masked: data.Masked,
			MaskedSegments: data.MaskedSegments, Segments: len(data.Samples), Trained: upd.Trained, Groups: upd.Groups},
	}
	for _, r := range rows {
		lin.Steps = append(lin.Steps, stepColumns(r))
	}
	ref := storage.ManifestRef{RunID: o.RunID, Iteration: o.Iteration, Stage: schemas.StageTrain}
	// Unique per attempt: a put that was never committed leaves its key taken.
	lin.TrainStepsKey = ref.DataKey(string(schemas.TableTrainSteps), fmt.Sprintf("v%06d-%d", lin.Version, time.Now().UnixNano()))

	out := filepath.Clean(o.OutDir)
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".legorl-ckpt-*")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := writeCheckpoint(tmp, o.PolicyDir, tr.Model(), tr.Optimizer(), data.Samples, upd.Recomputed, lin); err != nil {
		return nil, err
	}
	footer := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableTrainSteps, RunID: o.RunID,
		ConfigHash: lin.ConfigHash, PolicyVersion: parent.ref.Version, CodeVersion: o.CodeVersion}
	fe, err := storage.WriteFile(ctx, o.Store, lin.TrainStepsKey, footer, rows)
	if err != nil {
		return nil, fmt.Errorf("trainer: write train_steps: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("%w: publish %s: %w", ErrCheckpoint, out, err)
	}
	if _, err := storage.Commit(ctx, o.Store, ref, []storage.FileEntry{fe}); err != nil {
		os.RemoveAll(out) // the rows are not committed: take the checkpoint back
		return nil, fmt.Errorf("trainer: commit train_steps: %w", err)
	}
	return &Result{Dir: out, Lineage: lin, Data: data, Update: upd, TrainSteps: fe}, nil
}

// parentCheckpoint is the loaded parent.
type parentCheckpoint struct {
	model *model.Model
	opt   *model.AdamW
	ref   ParentRef
}

// loadParent loads the weights, the optimizer state when the folder has
// one, and the policy version.
func loadParent(dir string, cfg Config, version *int64, be backend.Backend) (*parentCheckpoint, error) {
	m, err := model.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: parent %s: %w", ErrCheckpoint, dir, err)
	}
	m.SetBackend(be)
	p := &parentCheckpoint{model: m}
	if p.ref.Path, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if p.ref.WeightsSHA256, err = weightsHash(dir); err != nil {
		return nil, err
	}
	lin, err := ReadLineage(dir)
	if err != nil {
		return nil, err
	}
	switch {
	case version != nil:
		p.ref.Version = *version
	case lin != nil:
		p.ref.Version = lin.Version
	}
	if p.ref.Version < 0 {
		return nil, fmt.Errorf("%w: parent version %d is negative", ErrConfig, p.ref.Version)
	}
	if p.opt, err = NewOptimizer(m, cfg); err != nil {
		return nil, err
	}
	if st := filepath.Join(dir, OptimizerFile); fileExists(st) {
		if err := p.opt.LoadState(st); err != nil {
			return nil, fmt.Errorf("trainer: parent: %w", err)
		}
	}
	return p, nil
}

// trainStepRows makes one train_steps row per optimizer step; the
// train-inference figures are the iteration's check, before the first step.
func trainStepRows(runID string, iteration int, version int64, upd *IterationResult) []schemas.TrainStep {
	g := upd.Gate.Overall
	rows := make([]schemas.TrainStep, len(upd.Steps))
	for k, s := range upd.Steps {
		st := s.Stats
		rows[k] = schemas.TrainStep{
			RunID: runID, Iteration: int32(iteration), Step: int32(k), PolicyVersion: version,
			Loss: st.Loss, GradNorm: s.GradNorm, LR: s.LR, ClipFraction: st.ClipFraction(),
			Entropy: st.Entropy(), KL: st.KL(),
			LogprobPearson: g.Pearson, LogprobSpearman: g.Spearman,
			LogprobMeanAbsDiff: g.MeanAbsDiff, LogprobMaxAbsDiff: g.MaxAbsDiff,
			ISRatioMean: st.RatioMean(), ISRatioMin: st.RatioMin, ISRatioMax: st.RatioMax, ESS: st.ESS(),
			Tokens: int64(s.Tokens), Sequences: int32(s.Sequences),
		}
		if s.Seconds > 0 {
			rows[k].TokensPerSecond = float64(s.Tokens) / s.Seconds
		}
	}
	return rows
}
