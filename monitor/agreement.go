package monitor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// SegmentRef names one segment of a rollout.
type SegmentRef struct {
	RolloutID string
	Segment   int32
}

// Recomputed holds the logprobs the trainer recomputed for the segments of
// one iteration: one per completion token, as in the segment's logprobs.
type Recomputed struct {
	Source   string // where they came from, for the page: a checkpoint folder
	Logprobs map[SegmentRef][]float32
}

// RecomputedSource finds the trainer's recomputed logprobs of an iteration
// of a run (the trainer keeps them in its checkpoint folders, beside
// lineage.json). It wraps ErrNoRecomputed when there are none.
// Implementations must be safe for concurrent use.
type RecomputedSource interface {
	Recomputed(ctx context.Context, runID string, iteration int) (*Recomputed, error)
}

// agreement is the cached Agreement of one iteration of a snapshot.
type agreement struct {
	a   Agreement
	err error
}

// agreement returns the iteration's agreement between rollout and
// recomputed logprobs, computed once per snapshot.
func (s *snapshot) agreement(ctx context.Context, m *Monitor, iter int) Agreement {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agree[iter]; a != nil {
		return a.a
	}
	a := Agreement{Iteration: iter, Pearson: none(), MeanAbs: none(), MaxAbs: none()}
	if m.opts.Recomputed == nil {
		a.Missing = "no recomputed logprobs: start the monitor with the trainer's checkpoint folders (legorl monitor --checkpoints DIR)"
		s.agree[iter] = &agreement{a: a}
		return a
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.LoadTimeout)
	defer cancel()
	rec, err := m.opts.Recomputed.Recomputed(lctx, s.RunID, iter)
	if err != nil {
		a.Missing = err.Error()
		if !errors.Is(err, ErrNoRecomputed) {
			return a // may go away: try again next time
		}
		s.agree[iter] = &agreement{a: a}
		return a
	}
	a.Source = rec.Source
	var files []storage.FileEntry
	for _, fe := range s.files[schemas.TableSegments] {
		if s.iterOf[fe.Key] == iter {
			files = append(files, fe)
		}
	}
	if len(files) == 0 {
		a.Missing = fmt.Sprintf("iteration %d has no committed segments files to compare with", iter)
		s.agree[iter] = &agreement{a: a}
		return a
	}
	// The same files and source give the same numbers: a new commit of
	// another iteration reads nothing again.
	key := s.RunID + "\n" + strconv.Itoa(iter) + "\n" + rec.Source
	for _, fe := range files {
		key += "\n" + fe.Key + "@" + fe.SHA256
	}
	m.mu.Lock()
	cached, ok := m.agreements[key]
	m.mu.Unlock()
	if ok {
		s.agree[iter] = &agreement{a: cached}
		return cached
	}
	// An even sample: every k-th compared token, k from the sampled count.
	total := 0
	for _, seg := range s.tables[schemas.TableSegments].segmentsOf(iter) {
		total += seg.Sampled
	}
	every := max(1, int(math.Ceil(float64(total)/float64(m.opts.ScatterPoints))))
	var c corr
	for _, fe := range files {
		if err := m.compareFile(lctx, fe, rec, &a, &c, every); err != nil {
			a.Missing = err.Error()
			if permanent(err) {
				s.agree[iter] = &agreement{a: a}
			}
			return a
		}
	}
	a.Tokens = c.n
	a.Pearson, a.MeanAbs, a.MaxAbs = c.pearson(), none(), none()
	if c.n > 0 {
		a.MeanAbs, a.MaxAbs = Num(c.absSum/float64(c.n)), Num(c.absMax)
	}
	if a.Segments == 0 {
		a.Missing = fmt.Sprintf("%s has no recomputed logprobs for the segments of iteration %d", rec.Source, iter)
	}
	s.agree[iter] = &agreement{a: a}
	m.mu.Lock()
	m.agreements[key] = a
	m.mu.Unlock()
	return a
}

// segmentsOf returns the segment summaries of an iteration; t may be nil.
func (t *tableData) segmentsOf(iter int) []segSummary {
	if t == nil {
		return nil
	}
	var out []segSummary
	for _, s := range t.segments {
		if int(s.Iteration) == iter {
			out = append(out, s)
		}
	}
	return out
}

// compareFile adds a segments file's sampled tokens to the agreement.
func (m *Monitor) compareFile(ctx context.Context, fe storage.FileEntry, rec *Recomputed, a *Agreement, c *corr, every int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrData, fe.Key, r)
		}
	}()
	f, err := storage.OpenFile(ctx, m.st, fe, m.mem)
	if err != nil {
		return err
	}
	defer f.Close()
	type meta struct {
		RolloutID    string `parquet:"rollout_id"`
		SegmentIndex int32  `parquet:"segment_index"`
	}
	for b, err := range f.Batches(ctx, 0) {
		if err != nil {
			return err
		}
		metas, err := storage.DecodeBatch[meta](b, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", fe.Key, err)
		}
		mask, err := storage.ListOf[int8, *array.Int8](b, "loss_mask")
		if err != nil {
			return fmt.Errorf("%s: %w", fe.Key, err)
		}
		lps, err := storage.ListOf[float32, *array.Float32](b, "logprobs")
		if err != nil {
			return fmt.Errorf("%s: %w", fe.Key, err)
		}
		for i, md := range metas {
			r, ok := rec.Logprobs[SegmentRef{md.RolloutID, md.SegmentIndex}]
			lp, mk := lps.At(i), mask.At(i)
			if !ok || len(r) != len(lp) || len(mk) != len(lp) {
				a.Unmatched++
				continue
			}
			a.Segments++
			for t := range lp {
				if mk[t] != 1 {
					continue
				}
				x, y := float64(lp[t]), float64(r[t])
				if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
					continue
				}
				if c.n%every == 0 && len(a.Points) < m.opts.ScatterPoints {
					a.Points = append(a.Points, ScatterPoint{Rollout: lp[t], Recomputed: r[t]})
				}
				c.add(x, y)
			}
		}
	}
	return nil
}

// corr accumulates Pearson's correlation with Welford's co-moments.
type corr struct {
	n                   int
	mx, my, sxx, syy    float64
	sxy, absSum, absMax float64
}

func (c *corr) add(x, y float64) {
	c.n++
	dx := x - c.mx
	c.mx += dx / float64(c.n)
	dy := y - c.my
	c.my += dy / float64(c.n)
	c.sxx += dx * (x - c.mx)
	c.syy += dy * (y - c.my)
	c.sxy += dx * (y - c.my)
	d := math.Abs(x - y)
	c.absSum += d
	c.absMax = math.Max(c.absMax, d)
}

func (c *corr) pearson() Num {
	if c.n < 2 || c.sxx == 0 || c.syy == 0 {
		return none()
	}
	return Num(c.sxy / math.Sqrt(c.sxx*c.syy))
}
