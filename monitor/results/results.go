// Package results turns the committed run summaries under docs/results
// into docs/RESULTS.md's tables, and checks that a document's pass@1 and
// difference figures are rows of them.
//
// A results run `legorl run --config docs/results/NAME.json` writes a
// summary whose before/after comparisons are committed as
// docs/results/NAME.summary.json; a measurement made after a run (`legorl
// compare --out` of two evals of its policies) is committed as
// docs/results/NAME/WHAT.compare.json. Load reads both, Render writes one
// table per agent, and Splice puts the tables between RESULTS.md's markers,
// so that every number of the tables comes from a committed file and none
// is typed.
package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// ErrSummary marks a summary, comparison file or config that cannot be read.
var ErrSummary = errors.New("results")

// Comparison is one paired before/after measurement of a summary: pass@1
// of the first and last evals over the same tasks of one split, in one
// decoding mode, with the difference's 95% interval and McNemar's p.
type Comparison struct {
	Harness string  `json:"harness"`
	Split   string  `json:"split"` // "heldout" (validation), "test", "heldout_family", ...
	Mode    string  `json:"mode"`  // "t1" or "greedy"
	Before  float64 `json:"before"`
	After   float64 `json:"after"`
	Diff    float64 `json:"diff"`
	Lo      float64 `json:"ci95_lo"`
	Hi      float64 `json:"ci95_hi"`
	P       float64 `json:"mcnemar_p"`
	Tasks   int     `json:"tasks"`
}

// Row is a comparison and the file it was read from, relative to the
// results folder ("NAME.summary.json" or "NAME/WHAT.compare.json").
type Row struct {
	Comparison
	Source string
}

// Run is one results config and what its committed files say of it.
type Run struct {
	// Name is the config's file name without ".json"; the summary, the
	// comparison files and NOTES.md are named after it.
	Name string
	// Agent is the table the run belongs to: the first dash-separated
	// word of Name (bash, tools, pi, demo, moe, ...).
	Agent string
	// Rows are the summary's comparisons, then those of each compare file.
	Rows []Row
	// Iterations is the number of RL iterations the summary lists.
	Iterations int
	// Pearson is the lowest gate Pearson of an update that trained
	// segments; HasPearson is false when no update trained.
	Pearson    float64
	HasPearson bool
	// WallSeconds is the summary's wall time. LastProcess is true when
	// the run was resumed and the summary lists no processes: its wall
	// time is then that of its last process only.
	WallSeconds float64
	LastProcess bool
	// Notes is "NAME/NOTES.md" when it exists, else "".
	Notes string
	// key is the config without its run name and its training and
	// sampling seeds (a "seed" or "*_seed" field anywhere but in the
	// suite's "builtin"): runs with the same key are replicates of one
	// config.
	key string
}

type summaryFile struct {
	Comparisons []Comparison `json:"comparisons"`
	Iterations  []struct {
		Trained int     `json:"trained"` // segments trained; 0: no update
		Pearson float64 `json:"pearson"`
		Resumed bool    `json:"resumed"`
	} `json:"iterations"`
	WallSeconds float64 `json:"wall_seconds"`
}

// Load reads every NAME.summary.json of fsys (the results folder), its
// NAME.json config and its NAME/*.compare.json files, sorted by name. A
// summary without its config, a file that is not JSON, or a compare file
// without its run's summary is an error naming the file.
func Load(fsys fs.FS) ([]Run, error) {
	sums, err := fs.Glob(fsys, "*.summary.json")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSummary, err)
	}
	byName := map[string]*Run{}
	var runs []*Run
	for _, f := range sums {
		r, err := loadRun(fsys, f)
		if err != nil {
			return nil, err
		}
		byName[r.Name] = r
		runs = append(runs, r)
	}
	compares, err := fs.Glob(fsys, "*/*.compare.json")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSummary, err)
	}
	slices.Sort(compares)
	for _, f := range compares {
		r, ok := byName[path.Dir(f)]
		if !ok {
			return nil, fmt.Errorf("%w: %s: no %s.summary.json beside it", ErrSummary, f, path.Dir(f))
		}
		var c struct {
			Comparisons []Comparison `json:"comparisons"`
		}
		if err := readJSON(fsys, f, &c); err != nil {
			return nil, err
		}
		if len(c.Comparisons) == 0 {
			return nil, fmt.Errorf("%w: %s: no comparisons", ErrSummary, f)
		}
		for _, cmp := range c.Comparisons {
			r.Rows = append(r.Rows, Row{cmp, f})
		}
	}
	out := make([]Run, len(runs))
	for i, r := range runs {
		out[i] = *r
	}
	slices.SortFunc(out, func(a, b Run) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func loadRun(fsys fs.FS, file string) (*Run, error) {
	name := strings.TrimSuffix(file, ".summary.json")
	var s summaryFile
	if err := readJSON(fsys, file, &s); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := readJSON(fsys, file, &raw); err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := readJSON(fsys, name+".json", &cfg); err != nil {
		return nil, err
	}
	delete(cfg, "run")
	suite, hasSuite := cfg["builtin"] // its seed picks the tasks: another suite is another config
	delete(cfg, "builtin")
	withoutSeeds(cfg)
	if hasSuite {
		cfg["builtin"] = suite
	}
	key, _ := json.Marshal(cfg) // map keys sorted: the same config gives the same bytes
	agent, _, _ := strings.Cut(name, "-")
	r := &Run{Name: name, Agent: agent, Iterations: len(s.Iterations), WallSeconds: s.WallSeconds, key: string(key)}
	resumed := false
	for _, it := range s.Iterations {
		resumed = resumed || it.Resumed
		if it.Trained > 0 && (!r.HasPearson || it.Pearson < r.Pearson) {
			r.Pearson, r.HasPearson = it.Pearson, true
		}
	}
	r.LastProcess = resumed && !listsProcesses(raw)
	for _, c := range s.Comparisons {
		r.Rows = append(r.Rows, Row{c, file})
	}
	if _, err := fs.Stat(fsys, path.Join(name, "NOTES.md")); err == nil {
		r.Notes = path.Join(name, "NOTES.md")
	}
	return r, nil
}

// listsProcesses reports whether a summary lists the processes of a
// resumed run (a top-level array whose name holds "process"), in which
// case its wall_seconds is their sum.
func listsProcesses(raw map[string]json.RawMessage) bool {
	for k, v := range raw {
		if strings.Contains(k, "process") && bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) {
			return true
		}
	}
	return false
}

func readJSON(fsys fs.FS, file string, v any) error {
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSummary, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSummary, file, err)
	}
	return nil
}

// withoutSeeds returns v without its "seed" and "*_seed" fields, at any
// depth.
func withoutSeeds(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "seed" || strings.HasSuffix(k, "_seed") {
				delete(x, k)
			} else {
				x[k] = withoutSeeds(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = withoutSeeds(e)
		}
	}
	return v
}
