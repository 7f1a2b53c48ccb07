package monitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Problem says what a panel could not read, and why.
type Problem struct {
	Table  string `json:"table,omitempty"`
	Key    string `json:"key,omitempty"` // the object key of a file or manifest
	Reason string `json:"reason"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Table != "" {
		b.WriteString(p.Table + ": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// ManifestInfo is one committed manifest of a run, as the overview shows it.
type ManifestInfo struct {
	Stage       string    `json:"stage"`
	Iteration   int       `json:"iteration"`
	Version     int       `json:"version"`
	CommittedAt time.Time `json:"committed_at"`
	Files       int       `json:"files"`
	Key         string    `json:"key"`
}

// manifestKeyRE parses runs/RUN/manifests/STAGE/iter-NNNNNN/vNNNNNN.json.
var manifestKeyRE = regexp.MustCompile(`^runs/([^/]+)/manifests/([^/]+)/iter-(\d{6})/v(\d{6})\.json$`)

// snapshot is a run as one set of newest manifest versions shows it. It is
// immutable but for the tables it reads on first use.
type snapshot struct {
	RunID       string
	Fingerprint string // the newest manifest keys, joined: it changes with every commit
	Version     int    // counts the fingerprints this monitor has seen for the run
	LoadedAt    time.Time
	Manifests   []ManifestInfo
	Problems    []Problem // manifests that could not be read
	files       map[schemas.Table][]storage.FileEntry
	iterOf      map[string]int // data key -> iteration of its manifest

	mu     sync.Mutex
	tables map[schemas.Table]*tableData
	agree  map[int]*agreement // by iteration
}

// tableData is one table of a snapshot: the rows of every committed file
// that could be read, and a problem for each one that could not.
type tableData struct {
	Table    schemas.Table
	Files    int // committed files
	Read     int // files read
	Rows     int64
	Problems []Problem

	rollouts []schemas.Rollout
	segments []segSummary
	steps    []schemas.Step
	train    []schemas.TrainStep

	transient bool // a problem may go away by itself: read again next time
}

// missing reports whether nothing of the table could be read.
func (t *tableData) missing() bool { return t.Read == 0 }

// fileData is the decoded content of one committed file.
type fileData struct {
	sha      string
	rows     int64
	other    string // run id of rows of another run, when some were skipped
	rollouts []schemas.Rollout
	segments []segSummary
	steps    []schemas.Step
	train    []schemas.TrainStep
}

// runState holds the newest snapshot of one run.
type runState struct {
	mu      sync.Mutex
	checked time.Time
	snap    *snapshot
	version int
	err     error // the last refresh's error, when it kept an older snapshot
}

// snapshot returns the run's snapshot, listing its manifests again when
// the last look is older than the poll interval. A run without any
// manifest gives a snapshot without files; a store that cannot be listed
// gives the previous snapshot and the error, or no snapshot.
func (m *Monitor) snapshot(ctx context.Context, run string) (*snapshot, error) {
	if err := storage.CheckName("run id", run); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	m.mu.Lock()
	rs := m.runs[run]
	if rs == nil {
		rs = &runState{}
		m.runs[run] = rs
	}
	m.mu.Unlock()

	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := m.now()
	if rs.snap != nil && now.Sub(rs.checked) < m.opts.Poll {
		return rs.snap, rs.err
	}
	// Loads outlive a request that gives up: the next one reuses them.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.LoadTimeout)
	defer cancel()
	keys, err := m.st.List(lctx, schemas.ManifestsPrefix(run))
	if err != nil {
		rs.err = fmt.Errorf("monitor: list the manifests of run %s: %w", run, err)
		rs.checked = now
		return rs.snap, rs.err
	}
	newest := map[string]string{} // manifest prefix -> newest key
	for _, k := range keys {
		if !manifestKeyRE.MatchString(k) {
			continue
		}
		p := k[:strings.LastIndexByte(k, '/')+1]
		if k > newest[p] { // zero-padded versions sort as strings
			newest[p] = k
		}
	}
	latest := make([]string, 0, len(newest))
	for _, k := range newest {
		latest = append(latest, k)
	}
	sort.Strings(latest)
	fp := strings.Join(latest, "\n")
	rs.checked = now
	rs.err = nil
	if rs.snap != nil && rs.snap.Fingerprint == fp {
		return rs.snap, nil
	}
	snap, err := m.buildSnapshot(lctx, run, latest)
	if err != nil {
		rs.err = err
		return rs.snap, err
	}
	rs.version++
	snap.Version = rs.version
	snap.Fingerprint = fp
	rs.snap = snap
	return snap, nil
}

// buildSnapshot reads the newest manifests (cached by key: a manifest
// version is written once) and groups their files by table.
func (m *Monitor) buildSnapshot(ctx context.Context, run string, latest []string) (*snapshot, error) {
	s := &snapshot{RunID: run, LoadedAt: m.now(), files: map[schemas.Table][]storage.FileEntry{},
		iterOf: map[string]int{}, tables: map[schemas.Table]*tableData{}, agree: map[int]*agreement{}}
	for _, key := range latest {
		sub := manifestKeyRE.FindStringSubmatch(key)
		iter, _ := strconv.Atoi(sub[3])
		ref := storage.ManifestRef{RunID: run, Iteration: iter, Stage: sub[2]}
		man, err := m.manifest(ctx, ref, key)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("monitor: read manifest %s: %w", key, err)
			}
			s.Problems = append(s.Problems, Problem{Key: key, Reason: "manifest unreadable: " + err.Error()})
			continue
		}
		s.Manifests = append(s.Manifests, ManifestInfo{Stage: man.Stage, Iteration: man.Iteration, Version: man.Version,
			CommittedAt: man.CommittedAt, Files: len(man.Files), Key: ref.Key(man.Version)})
		for _, f := range man.Files {
			t := schemas.Table(f.Table)
			if !t.Valid() {
				s.Problems = append(s.Problems, Problem{Table: f.Table, Key: f.Key, Reason: "unknown table in manifest " + key})
				continue
			}
			s.files[t] = append(s.files[t], f)
			s.iterOf[f.Key] = man.Iteration
		}
	}
	sort.SliceStable(s.Manifests, func(i, j int) bool {
		a, b := s.Manifests[i], s.Manifests[j]
		if a.Iteration != b.Iteration {
			return a.Iteration < b.Iteration
		}
		return a.Stage < b.Stage
	})
	return s, nil
}

// manifest returns the newest manifest of ref, read once per key.
func (m *Monitor) manifest(ctx context.Context, ref storage.ManifestRef, key string) (storage.Manifest, error) {
	m.mu.Lock()
	man, ok := m.manifests[key]
	m.mu.Unlock()
	if ok {
		return man, nil
	}
	man, err := storage.Latest(ctx, m.st, ref)
	if err != nil {
		return storage.Manifest{}, err
	}
	if man.RunID != ref.RunID || man.Iteration != ref.Iteration || man.Stage != ref.Stage {
		return storage.Manifest{}, fmt.Errorf("%w: %s names run %s iteration %d stage %s", storage.ErrManifest, key, man.RunID, man.Iteration, man.Stage)
	}
	m.mu.Lock()
	m.manifests[ref.Key(man.Version)] = man
	m.mu.Unlock()
	return man, nil
}

// table returns a table of the snapshot, reading it on first use.
func (s *snapshot) table(ctx context.Context, m *Monitor, t schemas.Table) *tableData {
	s.mu.Lock()
	defer s.mu.Unlock()
	if td := s.tables[t]; td != nil && !td.transient {
		return td
	}
	td := &tableData{Table: t, Files: len(s.files[t])}
	if td.Files == 0 {
		reason := fmt.Sprintf("run %s has no committed %s files", s.RunID, t)
		if len(s.Manifests) == 0 {
			reason = fmt.Sprintf("run %s has no committed manifest yet: no data", s.RunID)
		}
		td.Problems = append(td.Problems, Problem{Table: string(t), Reason: reason})
		s.tables[t] = td
		return td
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.LoadTimeout)
	defer cancel()
	for _, fe := range s.files[t] {
		fd, err := m.file(lctx, fe)
		if err != nil {
			td.Problems = append(td.Problems, Problem{Table: string(t), Key: fe.Key, Reason: err.Error()})
			td.transient = td.transient || !permanent(err)
			continue
		}
		if fd.other != "" {
			td.Problems = append(td.Problems, Problem{Table: string(t), Key: fe.Key,
				Reason: fmt.Sprintf("skipped rows of run %s, which is not this file's run", fd.other)})
		}
		td.Read++
		td.Rows += fd.rows
		td.rollouts = append(td.rollouts, fd.rollouts...)
		td.segments = append(td.segments, fd.segments...)
		td.steps = append(td.steps, fd.steps...)
		td.train = append(td.train, fd.train...)
	}
	td.sort()
	s.tables[t] = td
	return td
}

// sort orders rows by iteration, then by id: the order of every panel.
func (t *tableData) sort() {
	slices.SortStableFunc(t.rollouts, func(a, b schemas.Rollout) int {
		return cmp.Or(cmp.Compare(a.Iteration, b.Iteration), strings.Compare(a.RolloutID, b.RolloutID))
	})
	slices.SortStableFunc(t.segments, func(a, b segSummary) int {
		return cmp.Or(cmp.Compare(a.Iteration, b.Iteration), strings.Compare(a.RolloutID, b.RolloutID),
			cmp.Compare(a.SegmentIndex, b.SegmentIndex))
	})
	slices.SortStableFunc(t.steps, func(a, b schemas.Step) int {
		return cmp.Or(cmp.Compare(a.Iteration, b.Iteration), strings.Compare(a.RolloutID, b.RolloutID), cmp.Compare(a.Turn, b.Turn))
	})
	slices.SortStableFunc(t.train, func(a, b schemas.TrainStep) int {
		return cmp.Or(cmp.Compare(a.Iteration, b.Iteration), cmp.Compare(a.Step, b.Step))
	})
}

// permanent reports whether a read error will not go away: the file is
// gone, altered or malformed (data files are written once).
func permanent(err error) bool {
	return errors.Is(err, storage.ErrChecksum) || errors.Is(err, storage.ErrCorrupt) ||
		errors.Is(err, storage.ErrNotFound) || errors.Is(err, ErrData)
}

// maxArgBytes bounds the arguments of a step kept in memory.
const maxArgBytes = 2048

// file returns a committed file's rows, decoded once per key and sha256.
func (m *Monitor) file(ctx context.Context, fe storage.FileEntry) (*fileData, error) {
	m.mu.Lock()
	fd, ok := m.files[fe.Key]
	m.mu.Unlock()
	if ok && fd.sha == fe.SHA256 {
		return fd, nil
	}
	fd, err := m.readFile(ctx, fe)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.files[fe.Key] = fd
	m.mu.Unlock()
	return fd, nil
}

func (m *Monitor) readFile(ctx context.Context, fe storage.FileEntry) (fd *fileData, err error) {
	defer func() {
		if r := recover(); r != nil {
			fd, err = nil, fmt.Errorf("%w: %s: %v", ErrData, fe.Key, r)
		}
	}()
	m.reads.Add(1)
	f, err := storage.OpenFile(ctx, m.st, fe, m.mem)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	run := f.Footer.RunID
	fd = &fileData{sha: fe.SHA256}
	for rec, err := range f.Batches(ctx, 0) {
		if err != nil {
			return nil, err
		}
		fd.rows += rec.NumRows()
		switch schemas.Table(fe.Table) {
		case schemas.TableRollouts:
			rows, err := storage.DecodeBatch[schemas.Rollout](rec, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fe.Key, err)
			}
			for _, r := range rows {
				if fd.keep(run, r.RunID) {
					fd.rollouts = append(fd.rollouts, r)
				}
			}
		case schemas.TableSegments:
			rows, err := decodeSegSummaries(rec)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fe.Key, err)
			}
			for _, r := range rows {
				if fd.keep(run, r.RunID) {
					fd.segments = append(fd.segments, r)
				}
			}
		case schemas.TableSteps:
			rows, err := storage.DecodeBatch[schemas.Step](rec, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fe.Key, err)
			}
			for _, r := range rows {
				if len(r.Arguments) > maxArgBytes {
					r.Arguments = r.Arguments[:maxArgBytes] + "…"
				}
				if fd.keep(run, r.RunID) {
					fd.steps = append(fd.steps, r)
				}
			}
		case schemas.TableTrainSteps:
			rows, err := storage.DecodeBatch[schemas.TrainStep](rec, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fe.Key, err)
			}
			for _, r := range rows {
				if fd.keep(run, r.RunID) {
					fd.train = append(fd.train, r)
				}
			}
		}
	}
	return fd, nil
}

// keep reports whether a row of run id may be used in a file of run; it
// remembers the first other run id seen.
func (fd *fileData) keep(run, id string) bool {
	if id == run {
		return true
	}
	if fd.other == "" {
		fd.other = id
	}
	return false
}

// discover lists the run ids of the store: every run with a committed
// manifest. It lists at most once per poll interval.
func (m *Monitor) discover(ctx context.Context) ([]string, error) {
	if m.opts.Run != "" {
		return []string{m.opts.Run}, nil
	}
	m.discMu.Lock()
	defer m.discMu.Unlock()
	if !m.discAt.IsZero() && m.now().Sub(m.discAt) < m.opts.Poll {
		return m.discIDs, m.discErr
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.LoadTimeout)
	defer cancel()
	keys, err := m.st.List(lctx, schemas.RunsPrefix)
	m.discAt = m.now()
	if err != nil {
		m.discErr = fmt.Errorf("monitor: list runs in %s: %w", m.st.URI(), err)
		return m.discIDs, m.discErr
	}
	seen := map[string]bool{}
	var ids []string
	for _, k := range keys {
		if sub := manifestKeyRE.FindStringSubmatch(k); sub != nil && !seen[sub[1]] {
			seen[sub[1]] = true
			ids = append(ids, sub[1])
		}
	}
	sort.Strings(ids)
	m.discIDs, m.discErr = ids, nil
	return ids, nil
}
