package trainer

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
)

// LineageKindSFT is the kind of a lineage written by SFT.
const LineageKindSFT = "sft"

// Demo is one demonstration conversation: a line of a demonstrations file
// (JSON lines, as harness/scripted writes them). Fields other than these
// are ignored.
type Demo struct {
	InstanceID string         `json:"instance_id,omitempty"`
	Agent      string         `json:"agent,omitempty"`
	Messages   []chat.Message `json:"messages"`
	Tools      []chat.Tool    `json:"tools,omitempty"`
}

// ReadDemos reads a demonstrations file and returns its conversations and
// the file's sha256. A line that is not a JSON object with messages, or
// whose conversation has no assistant turn, is an error naming the file
// and line (wrapping ErrData); blank lines are skipped.
func ReadDemos(path string) ([]Demo, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("%w: demos: %w", ErrData, err)
	}
	defer f.Close()
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(f, h))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out []Demo
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var d Demo
		dec := json.NewDecoder(strings.NewReader(text))
		if err := dec.Decode(&d); err != nil {
			return nil, "", fmt.Errorf("%w: %s:%d: %v", ErrData, path, line, err)
		}
		if dec.More() {
			return nil, "", fmt.Errorf("%w: %s:%d: more than one JSON value on the line", ErrData, path, line)
		}
		if err := checkDemo(d); err != nil {
			return nil, "", fmt.Errorf("%w: %s:%d: %v", ErrData, path, line, err)
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		return nil, "", fmt.Errorf("%w: %s: %w", ErrData, path, err)
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("%w: %s: no demonstrations", ErrData, path)
	}
	return out, hex.EncodeToString(h.Sum(nil)), nil
}

func checkDemo(d Demo) error {
	if len(d.Messages) == 0 {
		return errors.New("no messages")
	}
	n := 0
	for i, m := range d.Messages {
		switch m.Role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleTool:
		case chat.RoleAssistant:
			if i == 0 {
				return errors.New("the conversation starts with an assistant turn")
			}
			n++
		default:
			return fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	if n == 0 {
		return errors.New("no assistant turn")
	}
	return nil
}

// DemoSequences turns a demonstration into one sequence per assistant turn:
// the prompt is the conversation before the turn rendered with the
// generation prompt, exactly what the agent's request renders to (the
// proxy renders with chat.Qwen3, tools included, thinking on); the
// completion is what the model would have sampled for the turn: the rest
// of the conversation rendered up to and including the turn, ending with
// <|im_end|>. Loss goes on completion tokens only.
func DemoSequences(tok *tokenizer.Tokenizer, d Demo) ([]model.Sequence, error) {
	var out []model.Sequence
	for i, m := range d.Messages {
		if m.Role != chat.RoleAssistant {
			continue
		}
		prompt, err := chat.Qwen3{}.Render(d.Messages[:i], d.Tools, chat.Options{AddGenerationPrompt: true})
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrData, i, err)
		}
		full, err := chat.Qwen3{}.Render(d.Messages[:i+1], d.Tools, chat.Options{})
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrData, i, err)
		}
		if !strings.HasPrefix(full, prompt) {
			return nil, fmt.Errorf("%w: message %d: the rendered turn does not extend its prompt", ErrData, i)
		}
		completion := strings.TrimSuffix(full[len(prompt):], "\n")
		out = append(out, model.Sequence{Prompt: tok.EncodeSpecial(prompt), Completion: tok.EncodeSpecial(completion)})
	}
	return out, nil
}

// SFTConfig configures SFT. Zero fields take the defaults in their comments.
type SFTConfig struct {
	// Epochs over the demonstrations. Defaults to 3.
	Epochs int `json:"epochs"`
	// LR is AdamW's learning rate (constant). Defaults to 1e-4.
	LR float64 `json:"lr"`
	// BatchSize is conversations per optimizer step. Defaults to 8.
	BatchSize int `json:"batch_size"`
	// Seed orders the conversations of each epoch. Defaults to 0.
	Seed uint64 `json:"seed"`
	// MaxTokens drops turns whose prompt and completion hold more tokens
	// (counted). Defaults to 4096, and at most the model's
	// max_position_embeddings.
	MaxTokens int `json:"max_tokens"`
	// MaxGradNorm clips the global gradient norm; defaults to 1.
	MaxGradNorm float64 `json:"max_grad_norm"`
	// WeightDecay is AdamW's decoupled weight decay. Defaults to 0.
	WeightDecay float64 `json:"weight_decay"`
	// SharedPrefix runs the tokens every sequence of a step starts with
	// (the chat template's system prompt and tool schemas) once per step
	// instead of once per sequence (model.BackwardSharedPrefix). Losses
	// and gradients equal the default's to float32 rounding, not bitwise,
	// so an SFT with it does not reproduce the bytes of one without (the
	// committed starters' sha256); it is deterministic for a seed all the
	// same. Defaults to false.
	SharedPrefix bool `json:"shared_prefix,omitempty"`
	// Copy, when set, adds copy drills (CopyDrills): steps of drills
	// alone before the first epoch, and drills in every step.
	Copy *CopyDrills `json:"copy,omitempty"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c SFTConfig) WithDefaults() SFTConfig {
	if c.Epochs == 0 {
		c.Epochs = 3
	}
	if c.LR == 0 {
		c.LR = 1e-4
	}
	if c.BatchSize == 0 {
		c.BatchSize = 8
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = 4096
	}
	if c.MaxGradNorm == 0 {
		c.MaxGradNorm = 1
	}
	if c.Copy != nil {
		d := c.Copy.withDefaults()
		c.Copy = &d
	}
	return c
}

// Validate reports a config no run can use (wrapping ErrConfig).
func (c SFTConfig) Validate() error {
	if c.Epochs < 0 || c.BatchSize < 0 || c.MaxTokens < 0 || !(c.LR >= 0) || math.IsInf(c.LR, 0) || !(c.MaxGradNorm >= 0) || !(c.WeightDecay >= 0) {
		return fmt.Errorf("%w: sft %+v", ErrConfig, c)
	}
	if c.Copy != nil {
		return c.Copy.validate()
	}
	return nil
}

// Hash returns the sha256 of the config with defaults applied.
func (c SFTConfig) Hash() string {
	b, _ := json.Marshal(c.WithDefaults())
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// SFTOptions are the inputs of SFT.
type SFTOptions struct {
	Demos     string // demonstrations file (JSON lines)
	PolicyDir string // the checkpoint to start from
	OutDir    string // the new checkpoint folder; must not exist
	Config    SFTConfig
	// CodeVersion is recorded in the lineage. Defaults to "dev".
	CodeVersion string
	// Progress, when set, is called after every step.
	Progress func(SFTStep)
	// Backend runs the passes and the optimizer. Defaults to the CPU
	// backend. SFT does not close it.
	Backend backend.Backend
	// Probe, when set, measures the policy as SFT goes and stops it once
	// it enters a band of competence: RL learns from tasks the policy
	// sometimes solves, not from ones it always or never does (DESIGN.md
	// §6). Nil: every epoch runs and the last weights are kept.
	Probe *SFTProbe
}

// SFTProbe measures the policy during SFT. Every Every epochs (and after
// the last), the weights are written as a checkpoint to Dir/epoch-NNNN and
// Measure returns their pass rate; SFT stops at the first in [Band[0],
// Band[1]] and keeps those weights. If none is, it keeps the probe nearest
// the band (the later of equals).
type SFTProbe struct {
	// Every is the period in epochs. Defaults to 1.
	Every int
	// Band is the pass-rate interval to stop in. Defaults to [0.2, 0.5].
	Band [2]float64
	// Dir holds the probe checkpoints (one folder per probe; a folder
	// left by an interrupted run is replaced).
	Dir string
	// Measure returns the pass rate of the checkpoint at dir and the
	// number of tasks it measured.
	Measure func(ctx context.Context, dir string, epoch int) (passRate float64, tasks int, err error)
}

// SFTProbeResult is one probe, as the lineage records it.
type SFTProbeResult struct {
	Epoch      int     `json:"epoch"` // 0-based: after this epoch
	Step       int     `json:"step"`  // steps done
	PassRate   float64 `json:"pass_rate"`
	Tasks      int     `json:"tasks"`
	Checkpoint string  `json:"checkpoint"`
	InBand     bool    `json:"in_band"`
	// Seconds is the wall time of the measurement (Measure).
	Seconds float64 `json:"seconds,omitempty"`
}

// distance is how far a pass rate is from the band (0 inside).
func (p SFTProbe) distance(rate float64) float64 {
	switch {
	case rate < p.Band[0]:
		return p.Band[0] - rate
	case rate > p.Band[1]:
		return rate - p.Band[1]
	}
	return 0
}

// SFTStep is one optimizer step.
type SFTStep struct {
	Epoch int     `json:"epoch"` // 0-based
	Step  int     `json:"step"`  // 0-based, over the run
	Steps int     `json:"steps"` // of the run
	Loss  float64 `json:"loss"`  // mean negative logprob of the batch's completion tokens, before the step
	// CopyLoss is the same over the step's copy drills (SFTConfig.Copy).
	CopyLoss  float64 `json:"copy_loss,omitempty"`
	GradNorm  float64 `json:"grad_norm"`
	Tokens    int     `json:"tokens"` // completion tokens
	Sequences int     `json:"sequences"`
	Seconds   float64 `json:"seconds"`
}

// String is the step's progress line: "sft step 3/40 (epoch 1): loss
// 0.5000" (with ", copy loss L" when the step had drills), or for a copy
// pretraining step "sft copy drills 3/600: copy loss L".
func (s SFTStep) String() string {
	if s.Epoch < 0 {
		return fmt.Sprintf("sft copy drills %d/%d: copy loss %.4f", s.Step+1, s.Steps, s.CopyLoss)
	}
	line := fmt.Sprintf("sft step %d/%d (epoch %d): loss %.4f", s.Step+1, s.Steps, s.Epoch+1, s.Loss)
	if s.CopyLoss > 0 {
		line += fmt.Sprintf(", copy loss %.4f", s.CopyLoss)
	}
	return line
}

// SFTLineage is the lineage.json of an SFT checkpoint. It shares the
// fields of Lineage that readers of a parent use (format, version, parent,
// files), so an RL update can start from it.
type SFTLineage struct {
	Format      string    `json:"format"`
	Kind        string    `json:"kind"` // LineageKindSFT
	Version     int64     `json:"version"`
	Parent      ParentRef `json:"parent"`
	CreatedAt   time.Time `json:"created_at"`
	CodeVersion string    `json:"code_version"`
	Config      SFTConfig `json:"config"`
	ConfigHash  string    `json:"config_hash"`
	Demos       DemosUse  `json:"demos"`
	// FinalLoss is the mean loss of the last epoch's steps.
	FinalLoss float64 `json:"final_loss"`
	// Probes are the pass rates measured during SFT (SFTOptions.Probe),
	// and Kept the index of the probe whose weights this checkpoint holds
	// (nil without probes: the last step's weights).
	Probes []SFTProbeResult `json:"probes,omitempty"`
	Kept   *int             `json:"kept_probe,omitempty"`
	// CopyPretrain are the steps on copy drills alone before the first
	// epoch (SFTConfig.Copy.PretrainSteps).
	CopyPretrain []SFTStep         `json:"copy_pretrain,omitempty"`
	Steps        []SFTStep         `json:"steps"`
	Files        map[string]string `json:"files"`
}

// DemosUse says which demonstrations SFT read.
type DemosUse struct {
	Path          string `json:"path"`
	SHA256        string `json:"sha256"`
	Conversations int    `json:"conversations"`
	Turns         int    `json:"turns"`         // assistant turns trained on
	DroppedTurns  int    `json:"dropped_turns"` // longer than MaxTokens
	Tokens        int    `json:"tokens"`        // completion tokens per epoch
}

// SFTResult is what SFT did.
type SFTResult struct {
	Dir     string
	Lineage *SFTLineage
}

// SFT fine-tunes the policy at PolicyDir on the demonstrations: each
// assistant turn is a sequence (DemoSequences); every step takes BatchSize
// conversations of a seeded shuffle and minimises the mean negative
// logprob of their completion tokens (model.BackwardFunc, or with
// Config.SharedPrefix model.BackwardSharedPrefix, with weight -1/N per
// token) with AdamW. The result is deterministic for a seed. The
// checkpoint (HF layout, the parent's tokenizer files, lineage.json) is
// written to a temporary folder beside OutDir and renamed: on any error
// nothing is at OutDir.
func SFT(ctx context.Context, o SFTOptions) (*SFTResult, error) {
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Demos == "" || o.PolicyDir == "" || o.OutDir == "" {
		return nil, fmt.Errorf("%w: demos, a policy folder and an output folder are required", ErrConfig)
	}
	if o.CodeVersion == "" {
		o.CodeVersion = "dev"
	}
	if _, err := os.Lstat(o.OutDir); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: output folder %s already exists (checkpoints are write-once)", ErrCheckpoint, o.OutDir)
	}
	demos, sum, err := ReadDemos(o.Demos)
	if err != nil {
		return nil, err
	}
	m, err := model.Load(o.PolicyDir)
	if err != nil {
		return nil, fmt.Errorf("%w: parent %s: %w", ErrCheckpoint, o.PolicyDir, err)
	}
	m.SetBackend(o.Backend)
	tok, err := tokenizer.Load(filepath.Join(o.PolicyDir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: parent %s: %w", ErrCheckpoint, o.PolicyDir, err)
	}
	parent, err := parentOf(o.PolicyDir)
	if err != nil {
		return nil, err
	}
	maxTok := cfg.MaxTokens
	if mp := m.Config().MaxPositionEmbeddings; mp > 0 && mp < maxTok {
		maxTok = mp
	}
	use := DemosUse{Path: o.Demos, SHA256: sum, Conversations: len(demos)}
	seqs := make([][]model.Sequence, len(demos))
	for i, d := range demos {
		all, err := DemoSequences(tok, d)
		if err != nil {
			return nil, fmt.Errorf("%s: conversation %d (%s): %w", o.Demos, i+1, d.InstanceID, err)
		}
		for _, s := range all {
			if len(s.Prompt)+len(s.Completion) > maxTok || len(s.Completion) == 0 {
				use.DroppedTurns++
				continue
			}
			seqs[i] = append(seqs[i], s)
			use.Turns++
			use.Tokens += len(s.Completion)
		}
	}
	if use.Turns == 0 {
		return nil, fmt.Errorf("%w: %s: no assistant turn fits in %d tokens", ErrData, o.Demos, maxTok)
	}
	opt, err := model.NewAdamW(m, model.AdamWConfig{LR: cfg.LR, WeightDecay: cfg.WeightDecay, MaxGradNorm: cfg.MaxGradNorm})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	g := m.NewGrads()
	perEpoch := (len(demos) + cfg.BatchSize - 1) / cfg.BatchSize
	lin := &SFTLineage{Format: LineageFormat, Kind: LineageKindSFT, Version: parent.Version + 1, Parent: parent,
		CreatedAt: time.Now().UTC(), CodeVersion: o.CodeVersion, Config: cfg, ConfigHash: cfg.Hash(), Demos: use}
	probe := o.Probe
	if probe != nil {
		p := *probe
		if p.Every <= 0 {
			p.Every = 1
		}
		if p.Band == ([2]float64{}) {
			p.Band = [2]float64{0.2, 0.5}
		}
		if p.Measure == nil || p.Dir == "" || !(p.Band[0] <= p.Band[1]) {
			return nil, fmt.Errorf("%w: an SFT probe needs Measure, Dir and a band lo <= hi", ErrConfig)
		}
		probe = &p
	}
	var drillIDs []int32
	if cfg.Copy != nil {
		if drillIDs = drillTokens(tok, m.Support()); len(drillIDs) < 2 {
			return nil, fmt.Errorf("%w: copy drills need at least 2 ordinary token ids, the vocabulary has %d", ErrConfig, len(drillIDs))
		}
		for s := range cfg.Copy.PretrainSteps {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			st, err := sftStep(m, opt, g, nil, copyDrills(drillRand(cfg.Seed, 0, s), drillIDs, cfg.Copy.batch(), *cfg.Copy), false, cfg.Copy.LR)
			if err != nil {
				return nil, err
			}
			st.Epoch, st.Step, st.Steps = -1, s, cfg.Copy.PretrainSteps
			lin.CopyPretrain = append(lin.CopyPretrain, st)
			if o.Progress != nil {
				o.Progress(st)
			}
		}
	}
	epochLoss := make([]float64, 0, cfg.Epochs)
	for epoch := range cfg.Epochs {
		order := rand.New(rand.NewPCG(cfg.Seed, uint64(epoch))).Perm(len(demos))
		var sum float64
		var n int
		for b := 0; b < len(order); b += cfg.BatchSize {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var batch []model.Sequence
			for _, i := range order[b:min(b+cfg.BatchSize, len(order))] {
				batch = append(batch, seqs[i]...)
			}
			var drills []model.Sequence
			if cfg.Copy != nil && cfg.Copy.PerStep > 0 {
				drills = copyDrills(drillRand(cfg.Seed, 1, len(lin.Steps)), drillIDs, cfg.Copy.PerStep, *cfg.Copy)
			}
			st, err := sftStep(m, opt, g, batch, drills, cfg.SharedPrefix, 0)
			if err != nil {
				return nil, err
			}
			st.Epoch, st.Step, st.Steps = epoch, len(lin.Steps), cfg.Epochs*perEpoch
			lin.Steps = append(lin.Steps, st)
			if o.Progress != nil {
				o.Progress(st)
			}
			if st.Tokens > 0 {
				sum += st.Loss * float64(st.Tokens)
				n += st.Tokens
			}
		}
		if n > 0 {
			lin.FinalLoss = sum / float64(n)
		}
		epochLoss = append(epochLoss, lin.FinalLoss)
		if probe == nil || ((epoch+1)%probe.Every != 0 && epoch != cfg.Epochs-1) {
			continue
		}
		r, err := runProbe(ctx, probe, o.PolicyDir, m, lin, epoch)
		if err != nil {
			return nil, err
		}
		lin.Probes = append(lin.Probes, r)
		if r.InBand {
			break
		}
	}
	if probe != nil && len(lin.Probes) > 0 {
		kept := 0
		for i, r := range lin.Probes {
			if probe.distance(r.PassRate) <= probe.distance(lin.Probes[kept].PassRate) {
				kept = i
			}
		}
		lin.Kept = &kept
		if r := lin.Probes[kept]; r.Epoch != lin.Probes[len(lin.Probes)-1].Epoch {
			if m, err = model.Load(r.Checkpoint); err != nil {
				return nil, fmt.Errorf("%w: probe checkpoint %s: %w", ErrCheckpoint, r.Checkpoint, err)
			}
			lin.FinalLoss = epochLoss[r.Epoch]
		}
	}
	out := filepath.Clean(o.OutDir)
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".legorl-ckpt-*")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := writeSFTCheckpoint(tmp, o.PolicyDir, m, lin); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("%w: publish %s: %w", ErrCheckpoint, out, err)
	}
	return &SFTResult{Dir: out, Lineage: lin}, nil
}

// sftStep runs one step on batch and drills: weight -1/N on each of the N
// completion tokens of both, so the gradient is that of their mean
// negative logprob. shared computes the batch's common leading tokens once
// (SFTConfig.SharedPrefix); the drills, which share nothing with it, run
// in a backward pass of their own into the same gradient. lr 0 steps at
// the optimizer's configured rate.
func sftStep(m *model.Model, opt *model.AdamW, g *model.Grads, batch, drills []model.Sequence, shared bool, lr float64) (SFTStep, error) {
	start := time.Now()
	st := SFTStep{Sequences: len(batch)}
	st.Tokens = completionTokens(batch)
	nDrill := completionTokens(drills)
	if st.Tokens+nDrill == 0 {
		return st, nil
	}
	w := float32(-1 / float64(st.Tokens+nDrill))
	g.Zero()
	backward := m.BackwardFunc
	if shared {
		backward = m.BackwardSharedPrefix
	}
	nll, err := nllBackward(backward, batch, w, g)
	if err != nil {
		return st, err
	}
	copyNLL, err := nllBackward(m.BackwardFunc, drills, w, g)
	if err != nil {
		return st, err
	}
	if st.Tokens > 0 {
		st.Loss = nll / float64(st.Tokens)
	}
	if nDrill > 0 {
		st.CopyLoss = copyNLL / float64(nDrill)
	}
	if st.GradNorm, err = opt.Step(m, g, lr); err != nil {
		return st, fmt.Errorf("trainer: sft step: %w", err)
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// completionTokens counts the completion tokens of seqs.
func completionTokens(seqs []model.Sequence) int {
	n := 0
	for _, s := range seqs {
		n += len(s.Completion)
	}
	return n
}

// nllBackward adds to g the gradient of weight w times the logprob of every
// completion token of seqs, and returns their summed negative logprob.
func nllBackward(backward func([]model.Sequence, model.WeightFunc, *model.Grads) ([]model.Result, error), seqs []model.Sequence, w float32, g *model.Grads) (float64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	nll := make([]float64, len(seqs))
	_, err := backward(seqs, func(i int, lp []float32) []float32 {
		ws := make([]float32, len(lp))
		for k, l := range lp {
			ws[k] = w
			nll[i] -= float64(l)
		}
		return ws
	}, g)
	if err != nil {
		return 0, fmt.Errorf("trainer: sft step: %w", err)
	}
	var sum float64
	for _, v := range nll { // in order: the sum does not depend on scheduling
		sum += v
	}
	return sum, nil
}

// SFTLoss returns the mean negative logprob of the completion tokens of
// seqs under m (the SFT loss, without a step).
func SFTLoss(m *model.Model, seqs []model.Sequence) (float64, error) {
	res, err := m.Logprobs(seqs)
	if err != nil {
		return 0, fmt.Errorf("trainer: %w", err)
	}
	var sum float64
	var n int
	for _, r := range res {
		for _, l := range r.Logprobs {
			sum -= float64(l)
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: no completion tokens", ErrData)
	}
	return sum / float64(n), nil
}

// writeSFTCheckpoint writes the model in HF layout (F32) with the parent's
// tokenizer files, then lineage.json with every other file's sha256.
func writeSFTCheckpoint(dir, parent string, m *model.Model, lin *SFTLineage) error {
	if err := saveModel(dir, parent, m); err != nil {
		return err
	}
	return sealLineage(dir, &lin.Files, lin)
}

// runProbe writes the weights after epoch as a probe checkpoint and
// measures it.
func runProbe(ctx context.Context, p *SFTProbe, parent string, m *model.Model, lin *SFTLineage, epoch int) (SFTProbeResult, error) {
	dir := filepath.Join(p.Dir, fmt.Sprintf("epoch-%04d", epoch))
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return SFTProbeResult{}, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return SFTProbeResult{}, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return SFTProbeResult{}, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	snap := *lin
	snap.Files = nil
	if err := writeSFTCheckpoint(dir, parent, m, &snap); err != nil {
		return SFTProbeResult{}, err
	}
	start := time.Now()
	rate, n, err := p.Measure(ctx, dir, epoch)
	if err != nil {
		return SFTProbeResult{}, fmt.Errorf("trainer: sft probe after epoch %d: %w", epoch, err)
	}
	return SFTProbeResult{Epoch: epoch, Step: len(lin.Steps), PassRate: rate, Tasks: n, Checkpoint: dir,
		InBand: p.distance(rate) == 0, Seconds: time.Since(start).Seconds()}, nil
}
