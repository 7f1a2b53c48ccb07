package transforms

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/text"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(Task), error](&readTasksFn{})
	register.DoFn3x0[Task, func(Task), func(Rejected)](&checkTaskFn{})
	register.Function1x2[Task, string, Task](keyTask)
	register.DoFn4x0[string, func(*Task) bool, func(Task), func(Rejected)](&dedupeFn{})
	register.Emitter1[Task]()
	register.Emitter1[Rejected]()
	register.Iter1[Task]()
}

// ReadTasks reads a task suite (a .jsonl or .parquet file, or a folder
// with tasks.jsonl; tasks.Load) when the pipeline runs, on a worker, so the
// path is a worker's path. It returns a PCollection<Task>.
func ReadTasks(s beam.Scope, path string) beam.PCollection {
	s = s.Scope("transforms.ReadTasks")
	return beam.ParDo(s, &readTasksFn{Path: path}, beam.Impulse(s))
}

type readTasksFn struct {
	Path string
}

func (f *readTasksFn) ProcessElement(ctx context.Context, _ []byte, emit func(Task)) error {
	suite, err := tasks.Load(f.Path)
	if err != nil {
		return err
	}
	for _, in := range suite.Instances {
		emit(Task{SuiteDir: suite.Dir, Instance: in})
	}
	return nil
}

// Validate checks tasks without running them: the instance's fields
// (tasks.Instance.Check), its snapshot repository on the worker, and
// instance ids that occur more than once (identical copies count once;
// differing ones are all rejected). It expects a PCollection<Task> and
// returns the valid PCollection<Task> and a PCollection<Rejected>.
func Validate(s beam.Scope, ts beam.PCollection) (valid, rejected beam.PCollection) {
	s = s.Scope("transforms.Validate")
	checked, bad := beam.ParDo2(s, &checkTaskFn{}, ts)
	grouped := beam.GroupByKey(s, beam.ParDo(s, keyTask, checked))
	valid, dup := beam.ParDo2(s, &dedupeFn{}, grouped)
	return valid, beam.Flatten(s, bad, dup)
}

type checkTaskFn struct{}

func (f *checkTaskFn) ProcessElement(t Task, valid func(Task), rejected func(Rejected)) {
	in := t.Instance
	if err := in.Check(); err != nil {
		rejected(Rejected{TaskID: in.InstanceID, Reason: tasks.Reason(err), Detail: text.OneLine(err.Error(), 500)})
		return
	}
	if in.Snapshot != "" {
		dir := in.SnapshotDir(t.SuiteDir)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			why := "not a folder"
			if err != nil {
				why = err.Error()
			}
			rejected(Rejected{TaskID: in.InstanceID, Reason: tasks.Reason(tasks.ErrSnapshot),
				Detail: text.OneLine(fmt.Sprintf("snapshot %s: %s", dir, why), 500)})
			return
		}
	}
	valid(t)
}

func keyTask(t Task) (string, Task) { return t.Instance.InstanceID, t }

type dedupeFn struct{}

func (f *dedupeFn) ProcessElement(id string, copies func(*Task) bool, valid func(Task), rejected func(Rejected)) {
	var first Task
	var firstJSON []byte
	n, differ := 0, false
	var t Task
	for copies(&t) {
		b, _ := json.Marshal(t)
		if n == 0 {
			first, firstJSON = t, b
		} else if string(b) != string(firstJSON) {
			differ = true
		}
		n++
	}
	if !differ {
		valid(first)
		return
	}
	rejected(Rejected{TaskID: id, Reason: tasks.Reason(tasks.ErrDuplicate),
		Detail: fmt.Sprintf("%d instances share the id and differ", n)})
}
