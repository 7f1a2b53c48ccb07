package transforms

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/tasks"
)

// Task is one task instance as a pipeline element.
type Task struct {
	// SuiteDir is the folder the instance's relative snapshot path is
	// relative to (the suite file's), on the workers' file system.
	SuiteDir string
	Instance tasks.Instance
}

// Rejected is a task that failed validation: it runs no rollout.
type Rejected struct {
	TaskID string
	// Reason is the short name of the failure (tasks.Reason: "invalid",
	// "snapshot", "duplicate", ...).
	Reason string
	Detail string
}

// Spec is one rollout of a group.
type Spec struct {
	RolloutID string // rollout.ID(run, iteration, task, Index)
	Index     int
	Seed      int64 // rollout.Seed(base, run, iteration, task, Index)
}

// Group is the G rollouts of one task in one iteration: the unit a worker
// runs (its rollouts run side by side, batching in the shared engine, and
// the tail-kill needs to see the whole group), claims and commits.
type Group struct {
	GroupID  string // rollout.GroupID(run, iteration, task)
	Task     Task
	Rollouts []Spec
}

// Outcome is how one rollout ended.
type Outcome struct {
	RolloutID   string
	Status      string // completed or masked
	Termination string
	Reward      float64
	Seconds     float64 // setup + agent + grade wall time
	TailKilled  bool    // masked as timeout by the group's tail-kill
}

// GroupResult is a claimed group: its files and the outcome of each of its
// rollouts.
type GroupResult struct {
	GroupID  string
	TaskID   string
	Attempt  string              // the attempt whose files the claim names
	Files    []storage.FileEntry // rollouts, segments and steps shards
	Rollouts []Outcome
	// Reused is true when the claim was found rather than made: the group
	// ran in an earlier attempt (a retried bundle or a rerun of the run).
	Reused bool
}

// Report is the accounting of one run and iteration, made by the commit.
type Report struct {
	RunID     string
	Stage     string
	Iteration int32
	// Launched rollouts: G per valid task.
	Launched  int
	Completed int
	Masked    int
	// MaskedBy counts masked rollouts by termination, "reason=n" sorted by
	// reason (a map does not survive every coder).
	MaskedBy []string
	// Passed counts completed rollouts with reward 1; PassRate is
	// Passed / Completed (0 without completed rollouts).
	Passed   int
	PassRate float64
	// Ran counts rollouts run by this pipeline; Reused those whose group was
	// claimed before it started.
	Ran      int
	Reused   int
	Rejected []Rejected
	// ManifestVersion is the committed version of the rollout stage's
	// manifest (0 when there was nothing to commit).
	ManifestVersion int
	Files           int
	// Tasks counts each task's completed and passed rollouts, sorted by
	// task id: what a variance-based task selection reads (loop, rl.select).
	Tasks []TaskOutcomes
}

// Summary is the report in one line, with the rollouts run per minute over
// took: what `legorl rollout` prints.
func (r Report) Summary(took time.Duration) string {
	masked := "none"
	if len(r.MaskedBy) > 0 {
		masked = strings.Join(r.MaskedBy, " ")
	}
	perMin := 0.0
	if took > 0 {
		perMin = float64(r.Ran) / took.Minutes()
	}
	return fmt.Sprintf("run %s iteration %d: launched %d, completed %d, masked %d (%s), pass rate %.3f (%d/%d), %.1f rollouts/min (ran %d, reused %d, %s), rejected %d, manifest v%d",
		r.RunID, r.Iteration, r.Launched, r.Completed, r.Masked, masked, r.PassRate, r.Passed, r.Completed,
		perMin, r.Ran, r.Reused, took.Round(time.Second), len(r.Rejected), r.ManifestVersion)
}

// TaskOutcomes counts one task's completed rollouts and those with reward 1.
type TaskOutcomes struct {
	TaskID    string
	Completed int
	Passed    int
}

func init() {
	for _, t := range []any{Task{}, Rejected{}, Spec{}, Group{}, Outcome{}, GroupResult{}, Report{}, TaskOutcomes{}} {
		beam.RegisterType(reflect.TypeOf(t))
	}
}
