package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Process is one process of a run: one `legorl run` of its config. A run
// stopped and resumed is several, each recorded in its own file under
// WorkDir/processes as it goes (rewritten at every phase and every
// processBeat), so one that was killed keeps its record up to its last
// beat. The summary lists them all, oldest first, and its wall_seconds is
// the sum of their Seconds.
type Process struct {
	Start   time.Time `json:"start,omitzero"`
	End     time.Time `json:"end,omitzero"`
	Seconds float64   `json:"seconds"`
	// Did is what the process did, in order: each phase that ran (made a
	// file, rolled out or trained), consecutive iterations as one entry;
	// what it found done by an earlier process (a resumed iteration, an
	// eval whose rollouts were committed) is not listed.
	Did []string `json:"did"`
	// Exit is how it ended: "done", or "error: " and the error (a stop by
	// a signal is "error: context canceled"). Empty: it ended without
	// saying so (killed, or still running), and End is its last beat.
	Exit string `json:"exit,omitempty"`
	// Note says where a record comes from when not from the process
	// itself: a process of a run from before processes were recorded is
	// known from the summary.json it left (End its time of writing, Seconds
	// its wall_seconds, which was that process's alone; the processes
	// before it are unknown).
	Note string `json:"note,omitempty"`
}

// processBeat is how often a running process rewrites its record.
const processBeat = 30 * time.Second

// procRecorder keeps the current process's record in its file.
type procRecorder struct {
	mu   sync.Mutex
	path string
	p    Process
	stop chan struct{}
	done sync.WaitGroup
}

// startProcess records a process starting now in workDir/processes (and,
// the first time a work folder that holds a summary.json from before
// process records is resumed, that summary's process) and rewrites the
// record every processBeat until finish.
func startProcess(workDir string) (*procRecorder, error) {
	dir := filepath.Join(workDir, "processes")
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("process records: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := importEarlierProcess(workDir, dir); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	r := &procRecorder{path: filepath.Join(dir, fmt.Sprintf("%s-%d.json", now.UTC().Format("20060102T150405.000000000Z"), os.Getpid())),
		p: Process{Start: now, End: now, Did: []string{}}, stop: make(chan struct{})}
	if err := r.save(); err != nil {
		return nil, err
	}
	r.done.Add(1)
	stop := r.stop
	go func() {
		defer r.done.Done()
		t := time.NewTicker(processBeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.mu.Lock()
				r.saveLocked() // best effort: the next beat or phase tries again
				r.mu.Unlock()
			}
		}
	}()
	return r, nil
}

// importEarlierProcess writes the record of the process that left
// workDir/summary.json before process records existed, if it did.
func importEarlierProcess(workDir, dir string) error {
	path := filepath.Join(workDir, "summary.json")
	fi, err := os.Stat(path)
	if err != nil {
		return nil // a new run
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s struct {
		WallSeconds float64 `json:"wall_seconds"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	end := fi.ModTime()
	p := Process{Start: end.Add(-time.Duration(s.WallSeconds * float64(time.Second))), End: end, Seconds: s.WallSeconds, Did: []string{}, Exit: "done",
		Note: "from the summary.json it left, written before process records: its wall_seconds covered this process alone; earlier ones are unrecorded"}
	body, _ := json.MarshalIndent(p, "", "  ")
	return atomicFile(filepath.Join(dir, p.Start.UTC().Format("20060102T150405.000000000Z")+"-summary.json"), append(body, '\n'))
}

var iterationsDid = regexp.MustCompile(`^iterations? (\d+)(?:-(\d+))?$`)

// did records that the process did what (see Process.Did): "iteration N"
// right after "iteration M" or "iterations K-M", M = N-1, extends it.
func (r *procRecorder) did(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := iterationsDid.FindStringSubmatch(what); m != nil && len(r.p.Did) > 0 {
		last := iterationsDid.FindStringSubmatch(r.p.Did[len(r.p.Did)-1])
		if last != nil {
			from, to := last[1], last[2]
			if to == "" {
				to = from
			}
			n, _ := strconv.Atoi(m[1])
			if t, _ := strconv.Atoi(to); t == n-1 {
				r.p.Did[len(r.p.Did)-1] = fmt.Sprintf("iterations %s-%d", from, n)
				r.saveLocked()
				return
			}
		}
	}
	r.p.Did = append(r.p.Did, what)
	r.saveLocked()
}

// finish records the process's end: done when err is nil.
func (r *procRecorder) finish(err error) error {
	r.mu.Lock()
	if r.stop != nil {
		close(r.stop)
		r.stop = nil
	}
	r.p.Exit = "done"
	if err != nil {
		r.p.Exit = "error: " + err.Error()
	}
	r.mu.Unlock()
	r.done.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveLocked()
}

func (r *procRecorder) save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveLocked()
}

func (r *procRecorder) saveLocked() error {
	r.p.End = time.Now()
	r.p.Seconds = r.p.End.Sub(r.p.Start).Seconds()
	body, err := json.MarshalIndent(r.p, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicFile(r.path, append(body, '\n')); err != nil {
		return fmt.Errorf("process record: %w", err)
	}
	return nil
}

// readProcesses reads every process record of a work folder, oldest
// first, and the sum of their seconds.
func readProcesses(workDir string) ([]Process, float64, error) {
	dir := filepath.Join(workDir, "processes")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("process records: %w", err)
	}
	var out []Process
	var total float64
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, 0, err
		}
		var p Process
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, 0, fmt.Errorf("process record %s: %w", filepath.Join(dir, e.Name()), err)
		}
		out = append(out, p)
		total += p.Seconds
	}
	slices.SortStableFunc(out, func(a, b Process) int { return a.Start.Compare(b.Start) })
	return out, total, nil
}
