// Package checkpoint reads the header of a checkpoint folder: the part of
// its lineage.json that serving, rollouts, audits and the monitor need
// (policy version, parent, file hashes), without the trainer that wrote
// it. A folder without lineage.json is an initial checkpoint, version 0.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File is the lineage file of a checkpoint folder.
const File = "lineage.json"

// RecomputedFile holds the logprobs the trainer recomputed with the
// parent's weights, one F32 tensor per segment named
// "ROLLOUT_ID/SEGMENT_INDEX" (the monitor's scatter reads it).
const RecomputedFile = "recomputed_logprobs.safetensors"

// Format is the format tag of the lineage files this code reads and the
// trainer writes.
const Format = "legorl-lineage/1"

// ErrHeader: a lineage.json that cannot be read, is not JSON, or is not of
// Format.
var ErrHeader = errors.New("checkpoint: bad lineage header")

// Header is the common part of every lineage.json (an RL update's and an
// SFT run's).
type Header struct {
	Format    string `json:"format"`
	Kind      string `json:"kind,omitempty"` // "" for an RL update, "sft" for SFT
	RunID     string `json:"run_id,omitempty"`
	Iteration int    `json:"iteration"`
	// Version is the policy version of the checkpoint: its parent's + 1.
	Version int64  `json:"version"`
	Parent  Parent `json:"parent"`
	// CreatedAt is when the checkpoint was written.
	CreatedAt time.Time `json:"created_at"`
	// Files maps each file of the folder but lineage.json to its sha256.
	Files map[string]string `json:"files,omitempty"`
}

// Parent names the checkpoint an update started from.
type Parent struct {
	Version int64  `json:"version"`
	Path    string `json:"path"`
	// WeightsSHA256 is the sha256 of the parent's model.safetensors (or of
	// its shard index when sharded).
	WeightsSHA256 string `json:"weights_sha256"`
}

// Read returns the header of the checkpoint in dir, or nil and no error
// when dir has no lineage.json.
func Read(dir string) (*Header, error) {
	path := filepath.Join(dir, File)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHeader, err)
	}
	var h Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrHeader, path, err)
	}
	if h.Format != Format || h.Version < 0 {
		return nil, fmt.Errorf("%w: %s: format %q version %d, want %s", ErrHeader, path, h.Format, h.Version, Format)
	}
	return &h, nil
}

// Version returns the policy version of the checkpoint in dir: its
// header's, or 0 when it has none.
func Version(dir string) (int64, error) {
	h, err := Read(dir)
	if err != nil || h == nil {
		return 0, err
	}
	return h.Version, nil
}
