package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/safetensors"
	"github.com/legorl/legorl/schemas"
)

// Files of a checkpoint folder besides the HF ones (config.json,
// model.safetensors, tokenizer files).
const (
	// LineageFile records where the checkpoint came from; policy/checkpoint
	// reads its header without the trainer.
	LineageFile = checkpoint.File
	// OptimizerFile holds AdamW's moments and step count, so the next
	// iteration continues the optimizer (and the warm-up) where this one
	// stopped.
	OptimizerFile = "optimizer.safetensors"
	// RecomputedFile holds the logprobs the trainer recomputed for every
	// completion token of every segment with the parent's weights, one F32
	// tensor per segment named "ROLLOUT_ID/SEGMENT_INDEX", so an audit can
	// verify the train-inference check from the stored data and the parent
	// (policy/checkpoint names it for readers without the trainer).
	RecomputedFile = checkpoint.RecomputedFile
)

// LineageFormat is the format tag of lineage files this code writes.
const LineageFormat = checkpoint.Format

// Lineage says where a checkpoint came from: its parent, the data and
// config of the update, and what the update measured.
type Lineage struct {
	Format      string      `json:"format"`
	RunID       string      `json:"run_id"`
	Iteration   int         `json:"iteration"`
	Version     int64       `json:"version"` // the policy version of this checkpoint: parent's + 1
	Parent      ParentRef   `json:"parent"`
	CreatedAt   time.Time   `json:"created_at"`
	CodeVersion string      `json:"code_version"`
	Config      Config      `json:"config"` // defaults applied
	ConfigHash  string      `json:"config_hash"`
	Data        DataUse     `json:"data"`
	Gate        *GateReport `json:"gate"`
	// Steps are the iteration's train_steps rows, keyed by column name.
	Steps []map[string]any `json:"steps"`
	// TrainStepsKey is the store key of the Parquet file holding Steps.
	TrainStepsKey string `json:"train_steps_key"`
	// Files maps each file of the checkpoint folder (but this one) to its
	// sha256.
	Files map[string]string `json:"files"`
}

// ParentRef names the checkpoint an update started from.
type ParentRef = checkpoint.Parent

// DataUse summarises the data an update read.
type DataUse struct {
	Manifests      []ManifestUse  `json:"manifests"`
	Rollouts       int            `json:"rollouts"` // completed
	Masked         map[string]int `json:"masked"`   // masked rollouts by termination
	MaskedSegments int            `json:"masked_segments"`
	Segments       int            `json:"segments"` // of completed rollouts
	Trained        int            `json:"trained_segments"`
	Groups         GroupStats     `json:"groups"`
}

// ReadLineage reads dir/lineage.json; a folder without one (a checkpoint
// made by `legorl model init` or from Hugging Face) gives nil and no error.
func ReadLineage(dir string) (*Lineage, error) {
	b, err := os.ReadFile(filepath.Join(dir, LineageFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	var l Lineage
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckpoint, filepath.Join(dir, LineageFile), err)
	}
	if l.Format != LineageFormat || l.Version < 0 {
		return nil, fmt.Errorf("%w: %s: format %q version %d, want %s", ErrCheckpoint, filepath.Join(dir, LineageFile), l.Format, l.Version, LineageFormat)
	}
	return &l, nil
}

// stepColumns returns a train_steps row as a map from column name to value.
func stepColumns(s schemas.TrainStep) map[string]any {
	out := map[string]any{}
	v := reflect.ValueOf(s)
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("parquet"), ",")
		val := v.Field(i).Interface()
		if f, ok := val.(float64); ok && !isFinite(f) {
			val = nil // JSON has no NaN
		}
		out[name] = val
	}
	return out
}

// writeCheckpoint writes the new checkpoint into the empty folder dir: the
// model in HF layout (F32) with the parent's tokenizer files, the optimizer
// state, the recomputed logprobs, then lineage.json with every other
// file's sha256.
func writeCheckpoint(dir, parent string, m *model.Model, opt *model.AdamW, samples []Sample, rec [][]float32, lin *Lineage) error {
	if err := saveModel(dir, parent, m); err != nil {
		return err
	}
	if err := opt.SaveState(filepath.Join(dir, OptimizerFile)); err != nil {
		return fmt.Errorf("trainer: save optimizer state: %w", err)
	}
	if err := writeRecomputed(filepath.Join(dir, RecomputedFile), samples, rec, lin); err != nil {
		return err
	}
	return sealLineage(dir, &lin.Files, lin)
}

// saveModel writes m into dir in HF layout (F32) with the tokenizer files
// of the parent checkpoint folder.
func saveModel(dir, parent string, m *model.Model) error {
	var toks []string
	for _, n := range model.TokenizerFileNames {
		if p := filepath.Join(parent, n); fileExists(p) {
			toks = append(toks, p)
		}
	}
	if err := m.Save(dir, model.SaveOptions{DType: safetensors.F32, TokenizerFiles: toks}); err != nil {
		return fmt.Errorf("trainer: save checkpoint: %w", err)
	}
	return nil
}

// sealLineage records the sha256 of every file already in dir into *files
// (a field of lin), then writes lin as dir/lineage.json: the last file of a
// checkpoint.
func sealLineage(dir string, files *map[string]string, lin any) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	*files = map[string]string{}
	for _, e := range ents {
		if (*files)[e.Name()], err = hashFile(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(lin, "", "  ")
	if err != nil {
		return fmt.Errorf("trainer: encode lineage: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, LineageFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return nil
}

// writeRecomputed writes one F32 tensor of recomputed logprobs per segment.
func writeRecomputed(path string, samples []Sample, rec [][]float32, lin *Lineage) error {
	ts := make([]safetensors.Tensor, 0, len(samples))
	for i := range samples {
		ts = append(ts, safetensors.Tensor{Name: recomputedName(samples[i].RolloutID, samples[i].SegmentIndex),
			Shape: []int{len(rec[i])}, Data: rec[i]})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	meta := map[string]string{
		"format":         "legorl-recomputed-logprobs",
		"run_id":         lin.RunID,
		"iteration":      strconv.Itoa(lin.Iteration),
		"policy_version": strconv.FormatInt(lin.Parent.Version, 10),
		"replay":         strconv.FormatBool(!lin.Config.NoReplay),
	}
	if err := safetensors.WriteFile(path, ts, safetensors.F32, meta); err != nil {
		return fmt.Errorf("trainer: write recomputed logprobs: %w", err)
	}
	return nil
}

// recomputedName is a segment's tensor name in RecomputedFile.
func recomputedName(rolloutID string, segment int32) string {
	return rolloutID + "/" + strconv.Itoa(int(segment))
}

// ReadRecomputed reads the recomputed logprobs of one segment from a
// checkpoint folder.
func ReadRecomputed(dir, rolloutID string, segment int32) ([]float32, error) {
	set, err := safetensors.ReadFile(filepath.Join(dir, RecomputedFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	name := recomputedName(rolloutID, segment)
	info, ok := set.Info(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no segment %s", ErrCheckpoint, RecomputedFile, name)
	}
	return set.Float32(name, info.Shape)
}

// weightsHash returns the sha256 of a checkpoint's weights file.
func weightsHash(dir string) (string, error) {
	p := filepath.Join(dir, safetensors.SingleFile)
	if !fileExists(p) {
		p = filepath.Join(dir, safetensors.IndexFile)
	}
	return hashFile(p)
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("trainer: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("trainer: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
