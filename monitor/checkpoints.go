package monitor

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/safetensors"
)

// CheckpointFolders is a RecomputedSource over a folder of the trainer's
// checkpoints: for an iteration it reads the recomputed logprobs of the
// checkpoint folder (up to three levels below Root) whose lineage.json
// names the run and iteration; the newest one wins when an iteration was
// trained more than once. What it read is kept until the file changes.
type CheckpointFolders struct {
	Root string

	mu    sync.Mutex
	cache map[string]*Recomputed // by recomputed file path and mtime
}

var _ RecomputedSource = (*CheckpointFolders)(nil)

// Recomputed implements RecomputedSource.
func (c *CheckpointFolders) Recomputed(ctx context.Context, runID string, iteration int) (*Recomputed, error) {
	type found struct {
		dir string
		at  time.Time
	}
	var hits []found
	err := filepath.WalkDir(c.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable folder holds no checkpoint we can use
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(c.Root, p); strings.Count(rel, string(filepath.Separator)) >= 3 {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() != checkpoint.File {
			return nil
		}
		h, err := checkpoint.Read(filepath.Dir(p))
		if err != nil || h == nil || h.RunID != runID || h.Iteration != iteration {
			return nil
		}
		hits = append(hits, found{filepath.Dir(p), h.CreatedAt})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(hits) == 0 {
		return nil, fmt.Errorf("%w: no checkpoint under %s has a lineage of run %s iteration %d", ErrNoRecomputed, c.Root, runID, iteration)
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].at.After(hits[j].at) })
	path := filepath.Join(hits[0].dir, checkpoint.RecomputedFile)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s has no %s", ErrNoRecomputed, hits[0].dir, checkpoint.RecomputedFile)
	}
	key := path + "@" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	c.mu.Lock()
	if r := c.cache[key]; r != nil {
		c.mu.Unlock()
		return r, nil
	}
	c.mu.Unlock()
	set, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRecomputed, err)
	}
	out := &Recomputed{Source: hits[0].dir, Logprobs: map[SegmentRef][]float32{}}
	for _, name := range set.Names() {
		i := strings.LastIndexByte(name, '/')
		seg, err := strconv.ParseInt(name[i+1:], 10, 32)
		if i < 0 || err != nil {
			continue
		}
		info, _ := set.Info(name)
		v, err := set.Float32(name, info.Shape)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoRecomputed, path, err)
		}
		out.Logprobs[SegmentRef{RolloutID: name[:i], Segment: int32(seg)}] = v
	}
	c.mu.Lock()
	if c.cache == nil {
		c.cache = map[string]*Recomputed{}
	}
	c.cache[key] = out
	c.mu.Unlock()
	return out, nil
}
