package trainer

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/legorl/legorl/policy/model"
)

// LineageKindUpcycle is the kind of a lineage written by Upcycle.
const LineageKindUpcycle = "upcycle"

// UpcycleLineage is the lineage.json of an upcycled checkpoint: a
// Qwen3-MoE made from a dense parent by model.Upcycle. Like SFTLineage it
// shares the fields readers of a parent use, so RL starts from it.
type UpcycleLineage struct {
	Format      string               `json:"format"`
	Kind        string               `json:"kind"` // LineageKindUpcycle
	Version     int64                `json:"version"`
	Parent      ParentRef            `json:"parent"`
	CreatedAt   time.Time            `json:"created_at"`
	CodeVersion string               `json:"code_version"`
	Options     model.UpcycleOptions `json:"options"`
	Config      model.Config         `json:"model_config"`
	Files       map[string]string    `json:"files"`
}

// Upcycle writes to dir (which must not exist) the mixture of experts
// model.Upcycle makes of the dense checkpoint parent, with the parent's
// tokenizer files and an UpcycleLineage; the folder appears whole or not
// at all.
func Upcycle(parent, dir string, o model.UpcycleOptions, codeVersion string) (*UpcycleLineage, error) {
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("%w: upcycle: %s exists", ErrCheckpoint, dir)
	}
	m, err := model.Load(parent)
	if err != nil {
		return nil, fmt.Errorf("%w: parent %s: %w", ErrCheckpoint, parent, err)
	}
	ref, err := parentOf(parent)
	if err != nil {
		return nil, err
	}
	moe, err := model.Upcycle(m, o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	lin := &UpcycleLineage{Format: LineageFormat, Kind: LineageKindUpcycle, Version: ref.Version + 1, Parent: ref,
		CreatedAt: time.Now().UTC(), CodeVersion: codeVersion, Options: o, Config: moe.Config()}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	if err := saveModel(tmp, parent, moe); err != nil {
		return nil, err
	}
	if err := sealLineage(tmp, &lin.Files, lin); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	return lin, nil
}

// parentOf is the ParentRef of the checkpoint in dir: its absolute path,
// its weights' sha256 and its policy version (0 without a lineage).
func parentOf(dir string) (ParentRef, error) {
	var ref ParentRef
	var err error
	if ref.Path, err = filepath.Abs(dir); err != nil {
		return ref, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if ref.WeightsSHA256, err = weightsHash(dir); err != nil {
		return ref, err
	}
	lin, err := ReadLineage(dir)
	if err != nil {
		return ref, err
	}
	if lin != nil {
		ref.Version = lin.Version
	}
	return ref, nil
}
