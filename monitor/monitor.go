package monitor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Sentinel errors. Errors of this package wrap one of them, or an error of
// the storage package.
var (
	// ErrRun: the run id is not usable, or not served by this monitor.
	ErrRun = errors.New("monitor: unknown run")
	// ErrPanel: no panel has that id.
	ErrPanel = errors.New("monitor: unknown panel")
	// ErrData: a committed file holds something the panels cannot use
	// (a column missing or of another type).
	ErrData = errors.New("monitor: unusable data")
	// ErrNoRecomputed: no recomputed logprobs exist for an iteration.
	ErrNoRecomputed = errors.New("monitor: no recomputed logprobs")
	// ErrRollout: no rollout has that id in the run.
	ErrRollout = errors.New("monitor: unknown rollout")
)

// errMissing: a panel has nothing to show; its problems say why.
var errMissing = errors.New("missing data")

// Options configure New.
type Options struct {
	// Run restricts the monitor to one run, which need not exist yet.
	// Defaults to every run of the store.
	Run string
	// Poll is how often the store is listed again for new manifest
	// versions (at most, and only while a page asks). Defaults to 2s.
	Poll time.Duration
	// Refresh is how often the page asks for a new version. Defaults to Poll.
	Refresh time.Duration
	// LoadTimeout bounds one read of a run's manifests or of one table.
	// Defaults to 2 minutes.
	LoadTimeout time.Duration
	// Recomputed finds the trainer's recomputed logprobs for the scatter.
	// Defaults to none: the panel says how to give them.
	Recomputed RecomputedSource
	// ToolCollapse is the tool-use alarm's threshold: an iteration whose
	// tool calls per turn fall below ToolCollapse times the first
	// iteration's rate raises it. Defaults to 0.5.
	ToolCollapse float64
	// ScatterPoints bounds the logprob scatter's points per iteration.
	// Defaults to 600.
	ScatterPoints int
	// Allocator decodes Parquet. Defaults to memory.DefaultAllocator.
	Allocator memory.Allocator
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Monitor serves the dashboard of the runs of one store. It reads runs
// through their manifests only, caches every committed file once (files are
// written once, checked by sha256), and sees a new manifest version within
// Options.Poll. It is an http.Handler (see Handler).
type Monitor struct {
	st   storage.Store
	opts Options
	mem  memory.Allocator
	now  func() time.Time

	mu        sync.Mutex
	runs      map[string]*runState
	files     map[string]*fileData
	manifests map[string]storage.Manifest
	// agreements caches the logprob agreement of an iteration by run,
	// iteration, recomputed source and segments files.
	agreements map[string]Agreement

	reads atomic.Int64 // files decoded, for tests

	discMu  sync.Mutex
	discAt  time.Time
	discIDs []string
	discErr error
}

// New returns a monitor of the store.
func New(st storage.Store, opts Options) (*Monitor, error) {
	if opts.Run != "" {
		if err := storage.CheckName("run id", opts.Run); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
	}
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.Refresh <= 0 {
		opts.Refresh = opts.Poll
	}
	if opts.LoadTimeout <= 0 {
		opts.LoadTimeout = 2 * time.Minute
	}
	if opts.ToolCollapse <= 0 {
		opts.ToolCollapse = 0.5
	}
	if opts.ScatterPoints <= 0 {
		opts.ScatterPoints = 600
	}
	m := &Monitor{st: st, opts: opts, mem: opts.Allocator, now: opts.Now,
		runs: map[string]*runState{}, files: map[string]*fileData{}, manifests: map[string]storage.Manifest{},
		agreements: map[string]Agreement{}}
	if m.mem == nil {
		m.mem = memory.DefaultAllocator
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// checkRun reports whether the monitor serves run.
func (m *Monitor) checkRun(run string) error {
	if err := storage.CheckName("run id", run); err != nil {
		return fmt.Errorf("%w: %v", ErrRun, err)
	}
	if m.opts.Run != "" && run != m.opts.Run {
		return fmt.Errorf("%w: %q: this monitor serves run %s only", ErrRun, run, m.opts.Run)
	}
	return nil
}

// TableStatus says how much of a table could be read.
type TableStatus struct {
	Table    string    `json:"table"`
	Files    int       `json:"files"`
	Read     int       `json:"read"`
	Rows     int64     `json:"rows"`
	Status   string    `json:"status"` // ok, partial or missing
	Problems []Problem `json:"problems,omitempty"`
}

// Status is a run's state: the version the page compares to know when to
// redraw, and what was read.
type Status struct {
	RunID       string         `json:"run_id"`
	Version     int            `json:"version"`     // grows with every new manifest fingerprint
	Fingerprint string         `json:"fingerprint"` // the newest manifest keys
	LoadedAt    time.Time      `json:"loaded_at"`
	Manifests   []ManifestInfo `json:"manifests"`
	Problems    []Problem      `json:"problems,omitempty"` // manifests that could not be read
	Error       string         `json:"error,omitempty"`    // the store could not be listed: the data shown is older
}

// Status returns the run's status.
func (m *Monitor) Status(ctx context.Context, run string) (Status, error) {
	if err := m.checkRun(run); err != nil {
		return Status{}, err
	}
	s, err := m.snapshot(ctx, run)
	if s == nil {
		return Status{}, err
	}
	st := Status{RunID: run, Version: s.Version, Fingerprint: s.Fingerprint, LoadedAt: s.LoadedAt,
		Manifests: s.Manifests, Problems: s.Problems}
	if err != nil {
		st.Error = err.Error()
	}
	return st, nil
}

// tableStatus reads a table and says how it went.
func (s *snapshot) tableStatus(ctx context.Context, m *Monitor, t schemas.Table) TableStatus {
	td := s.table(ctx, m, t)
	ts := TableStatus{Table: string(t), Files: td.Files, Read: td.Read, Rows: td.Rows, Problems: td.Problems, Status: "ok"}
	switch {
	case td.missing():
		ts.Status = "missing"
	case len(td.Problems) > 0:
		ts.Status = "partial"
	}
	return ts
}

// PanelResult is one panel as the JSON endpoint serves it.
type PanelResult struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Status is ok; partial (some files could not be read: Problems say
	// which, the data shows the rest); or missing (nothing to show:
	// Problems say why).
	Status   string    `json:"status"`
	Problems []Problem `json:"problems,omitempty"`
	Data     any       `json:"data,omitempty"`
	Version  int       `json:"version"`
}

// Panel computes one panel of a run. Query parameters select what some
// panels show (rollouts: iter, task). A panel never fails for missing or
// bad data: its Status and Problems say what is missing and why; the error
// is for an unknown run or panel, or a store that cannot be listed at all.
func (m *Monitor) Panel(ctx context.Context, run, id string, q url.Values) (PanelResult, error) {
	p, ok := panelByID(id)
	if !ok {
		return PanelResult{}, fmt.Errorf("%w: %q", ErrPanel, id)
	}
	if err := m.checkRun(run); err != nil {
		return PanelResult{}, err
	}
	s, err := m.snapshot(ctx, run)
	if s == nil {
		return PanelResult{}, err
	}
	return m.panel(ctx, s, p, q), nil
}

func (m *Monitor) panel(ctx context.Context, s *snapshot, p panelDef, q url.Values) (res PanelResult) {
	v := &view{ctx: ctx, m: m, s: s, q: q}
	res = PanelResult{ID: p.ID, Title: p.Title, Status: "ok", Version: s.Version}
	defer func() {
		if r := recover(); r != nil { // a bug in one panel never takes the page down
			res.Status, res.Data = "missing", nil
			res.Problems = append(v.problems, Problem{Reason: fmt.Sprintf("monitor: panel %s failed: %v", p.ID, r)})
		}
	}()
	data, err := p.Data(v)
	res.Problems = dedup(v.problems)
	switch {
	case errors.Is(err, errMissing):
		res.Status = "missing"
	case err != nil:
		res.Status = "missing"
		res.Problems = append(res.Problems, Problem{Reason: err.Error()})
	default:
		res.Data = data
		if len(res.Problems) > 0 {
			res.Status = "partial"
		}
	}
	return res
}

func dedup(ps []Problem) []Problem {
	seen := map[Problem]bool{}
	var out []Problem
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// view is what a panel reads: the snapshot's tables, recording problems.
type view struct {
	ctx      context.Context
	m        *Monitor
	s        *snapshot
	q        url.Values
	problems []Problem
}

// table returns a table, or errMissing when none of it could be read.
func (v *view) table(t schemas.Table) (*tableData, error) {
	td := v.s.table(v.ctx, v.m, t)
	v.problems = append(v.problems, td.Problems...)
	if td.missing() {
		return td, errMissing
	}
	return td, nil
}

func (v *view) rollouts() ([]schemas.Rollout, error) {
	td, err := v.table(schemas.TableRollouts)
	return td.rollouts, err
}

func (v *view) intParam(name string, def int) int {
	if n, err := strconv.Atoi(v.q.Get(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// RunSummary is one run in the runs overview.
type RunSummary struct {
	RunID      string    `json:"run_id"`
	Iterations int       `json:"iterations"`
	Rollouts   int       `json:"rollouts"`
	Completed  int       `json:"completed"`
	Masked     int       `json:"masked"`
	Latest     int       `json:"latest_iteration"` // -1 without rollouts
	PassRate   Num       `json:"latest_pass_rate"` // of the latest iteration's completed rollouts
	TrainSteps int       `json:"train_steps"`
	LastCommit time.Time `json:"last_commit"`
	Problems   int       `json:"problems"` // manifests and files that could not be read
	Error      string    `json:"error,omitempty"`
}

// Runs returns the runs overview: every run with a committed manifest (or
// the one run of Options.Run), newest commit first.
func (m *Monitor) Runs(ctx context.Context) ([]RunSummary, error) {
	ids, err := m.discover(ctx)
	if err != nil && ids == nil {
		return nil, err
	}
	out := make([]RunSummary, 0, len(ids))
	for _, id := range ids {
		out = append(out, m.summary(ctx, id))
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].LastCommit.Equal(out[j].LastCommit) {
			return out[i].LastCommit.After(out[j].LastCommit)
		}
		return out[i].RunID < out[j].RunID
	})
	return out, err
}

func (m *Monitor) summary(ctx context.Context, id string) RunSummary {
	r := RunSummary{RunID: id, Latest: -1, PassRate: none()}
	s, err := m.snapshot(ctx, id)
	if err != nil {
		r.Error = err.Error()
	}
	if s == nil {
		return r
	}
	r.Problems = len(s.Problems)
	for _, man := range s.Manifests {
		if man.CommittedAt.After(r.LastCommit) {
			r.LastCommit = man.CommittedAt
		}
	}
	td := s.table(ctx, m, schemas.TableRollouts)
	if td.Files > 0 {
		r.Problems += len(td.Problems)
	}
	its := iterations(td.rollouts, rolloutIter)
	r.Iterations = len(its)
	var done, ok int
	for _, ro := range td.rollouts {
		r.Rollouts++
		if ro.Status == schemas.StatusCompleted {
			r.Completed++
		} else {
			r.Masked++
		}
		if len(its) > 0 && int(ro.Iteration) == its[len(its)-1] && ro.Status == schemas.StatusCompleted {
			done++
			if solved(ro) {
				ok++
			}
		}
	}
	if len(its) > 0 {
		r.Latest, r.PassRate = its[len(its)-1], ratio(ok, done)
	}
	tt := s.table(ctx, m, schemas.TableTrainSteps)
	if tt.Files > 0 {
		r.Problems += len(tt.Problems)
	}
	r.TrainSteps = len(tt.train)
	return r
}
