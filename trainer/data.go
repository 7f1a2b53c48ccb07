package trainer

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Sample is one segment of a completed rollout, in the model's terms: the
// prompt, then the completion whose sampled tokens (Mask 1) carry loss,
// interleaved with tokens the harness added (Mask 0).
type Sample struct {
	RolloutID    string
	GroupID      string
	SegmentIndex int32
	Prompt       []int32
	Completion   []int32
	Mask         []int8    // 1 for sampled tokens
	Logprobs     []float32 // rollout (inference) logprob of each completion token; 0 where Mask is 0
	Versions     []int64   // policy version that sampled each completion token; 0 where Mask is 0
	Routes       schemas.Routes
	Temperature  float64 // as recorded; 0 means 1
	// Advantage is the rollout's advantage, set by SetAdvantages.
	Advantage float64
	// Source names the stored row, "KEY row N", for messages.
	Source string
}

// Tokens returns the number of tokens the model runs over.
func (s *Sample) Tokens() int { return len(s.Prompt) + len(s.Completion) }

// Sampled returns the number of sampled tokens (mask 1).
func (s *Sample) Sampled() int {
	n := 0
	for _, m := range s.Mask {
		n += int(m)
	}
	return n
}

// checkLengths reports whether the per-token lists of s, and logprobs
// computed for it, have one entry per completion token.
func (s *Sample) checkLengths(logprobs []float32) error {
	c := len(s.Completion)
	if len(logprobs) != c || len(s.Logprobs) != c || len(s.Mask) != c || len(s.Versions) != c {
		return fmt.Errorf("%w: %s: %d completion tokens, %d recomputed logprobs, %d rollout logprobs, %d mask values, %d versions",
			ErrData, s.Source, c, len(logprobs), len(s.Logprobs), len(s.Mask), len(s.Versions))
	}
	return nil
}

// sequence returns the model input; with replay, the recorded routes as
// [tokens][layers][k] slices over the flat list (no copy of the ids).
func (s *Sample) sequence(replay bool) model.Sequence {
	seq := model.Sequence{Prompt: s.Prompt, Completion: s.Completion, Temperature: s.Temperature}
	if replay && !s.Routes.Empty() {
		r := s.Routes
		seq.Routing = make([][][]int16, r.Tokens)
		layers := make([][]int16, r.Tokens*r.Layers)
		for t := range seq.Routing {
			seq.Routing[t] = layers[t*r.Layers : (t+1)*r.Layers : (t+1)*r.Layers]
			for l := range seq.Routing[t] {
				seq.Routing[t][l] = r.At(t, l)
			}
		}
	}
	return seq
}

// RolloutReward is a completed rollout's group and reward.
type RolloutReward struct {
	RolloutID string
	GroupID   string
	Reward    float64
}

// ManifestUse records a manifest an update read, for its lineage.
type ManifestUse struct {
	Key     string              `json:"key"`
	SHA256  string              `json:"sha256"` // of the manifest's JSON as stored
	Stage   string              `json:"stage"`
	Version int                 `json:"version"`
	Files   []storage.FileEntry `json:"files"` // the rollouts and segments files read
}

// Data is one iteration's training data.
type Data struct {
	RunID     string
	Iteration int
	// Samples are the segments of completed rollouts, sorted by rollout id
	// and segment index.
	Samples []Sample
	// Rollouts are the completed rollouts, sorted by id.
	Rollouts []RolloutReward
	// Masked counts masked rollouts by termination; MaskedSegments the
	// segments dropped with them.
	Masked         map[string]int
	MaskedSegments int
	Manifest       ManifestUse
}

// LoadOptions configure Load.
type LoadOptions struct {
	// Stage is the manifest stage holding the rollouts and segments.
	// Defaults to "rollout".
	Stage string
	// Model is the config of the model to train: token ids must fit its
	// vocabulary and recorded routes its MoE layers and experts.
	Model model.Config
	// Mem allocates the Arrow buffers. Defaults to memory.DefaultAllocator.
	Mem memory.Allocator
}

// Load reads the newest manifest of (run, iteration, stage) and every
// rollouts and segments file it names (each checked against its sha256),
// as Arrow record batches. It checks every row it uses: a NaN or
// out-of-range reward, a status that disagrees with the termination,
// per-token lists whose lengths differ, token ids outside the vocabulary,
// routes of another model, a segment of an unknown rollout, duplicates.
// Each such error wraps ErrData (or the schemas sentinel) and names the file
// key and row. Segments of masked rollouts are dropped and counted.
func Load(ctx context.Context, st storage.Store, runID string, iteration int, opt LoadOptions) (*Data, error) {
	if opt.Stage == "" {
		opt.Stage = schemas.StageRollout
	}
	if opt.Mem == nil {
		opt.Mem = memory.DefaultAllocator
	}
	if err := opt.Model.Validate(); err != nil {
		return nil, fmt.Errorf("trainer: load: %w", err)
	}
	ref := storage.ManifestRef{RunID: runID, Iteration: iteration, Stage: opt.Stage}
	man, err := storage.Latest(ctx, st, ref)
	if err != nil {
		return nil, fmt.Errorf("trainer: load run %s iteration %d: %w", runID, iteration, err)
	}
	use := ManifestUse{Key: ref.Key(man.Version), Stage: man.Stage, Version: man.Version}
	if use.SHA256, err = storage.HashObject(ctx, st, use.Key); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	d := &Data{RunID: runID, Iteration: iteration, Masked: map[string]int{}}
	rollouts := map[string]rolloutRow{}
	var segs []Sample
	for _, table := range []schemas.Table{schemas.TableRollouts, schemas.TableSegments} {
		for _, fe := range man.Files {
			if fe.Table != string(table) {
				continue
			}
			use.Files = append(use.Files, fe)
			err := readFile(ctx, st, fe, opt.Mem, func(rec arrow.RecordBatch, row0 int64) error {
				if table == schemas.TableSegments {
					ss, err := decodeSegments(rec, fe.Key, row0, runID, iteration, opt.Model)
					segs = append(segs, ss...)
					return err
				}
				rs, err := decodeRollouts(rec, fe.Key, row0, runID, iteration)
				for _, r := range rs {
					if prev, ok := rollouts[r.RolloutID]; ok {
						return fmt.Errorf("%w: %s: rollout %s already read from %s", ErrData, r.source, r.RolloutID, prev.source)
					}
					rollouts[r.RolloutID] = r
				}
				return err
			})
			if err != nil {
				return nil, err
			}
		}
	}
	d.Manifest = use
	if len(rollouts) == 0 {
		return nil, fmt.Errorf("%w: manifest %s names no rollouts rows", ErrData, use.Key)
	}
	type segKey struct {
		rollout string
		index   int32
	}
	seen := map[segKey]string{}
	for _, s := range segs {
		r, ok := rollouts[s.RolloutID]
		if !ok {
			return nil, fmt.Errorf("%w: %s: segment of rollout %s, which the iteration's rollouts table lacks", ErrData, s.Source, s.RolloutID)
		}
		k := segKey{s.RolloutID, s.SegmentIndex}
		if prev, ok := seen[k]; ok {
			return nil, fmt.Errorf("%w: %s: segment %s/%d already read from %s", ErrData, s.Source, s.RolloutID, s.SegmentIndex, prev)
		}
		seen[k] = s.Source
		if r.status != schemas.StatusCompleted {
			d.MaskedSegments++
			continue
		}
		s.GroupID = r.GroupID
		d.Samples = append(d.Samples, s)
	}
	for _, r := range rollouts {
		if r.status == schemas.StatusCompleted {
			d.Rollouts = append(d.Rollouts, r.RolloutReward)
		} else {
			d.Masked[string(r.termination)]++
		}
	}
	sort.Slice(d.Rollouts, func(i, j int) bool { return d.Rollouts[i].RolloutID < d.Rollouts[j].RolloutID })
	sort.Slice(d.Samples, func(i, j int) bool {
		a, b := &d.Samples[i], &d.Samples[j]
		if a.RolloutID != b.RolloutID {
			return a.RolloutID < b.RolloutID
		}
		return a.SegmentIndex < b.SegmentIndex
	})
	return d, nil
}

// rolloutRow is what Load keeps of a rollouts row.
type rolloutRow struct {
	RolloutReward
	status      schemas.Status
	termination schemas.Termination
	source      string
}
