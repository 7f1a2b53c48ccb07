package transforms

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/legorl/legorl/rollout"
)

func init() {
	register.DoFn2x0[Task, func(Group)](&expandFn{})
	register.Emitter1[Group]()
}

// Expand turns each task into its group of cfg.Group rollouts, with
// deterministic ids (rollout.ID of run, iteration, task and index), a group
// id (rollout.GroupID) and seeds (rollout.Seed). It expects a
// PCollection<Task> and returns a PCollection<Group>.
func Expand(s beam.Scope, cfg Config, ts beam.PCollection) beam.PCollection {
	s = s.Scope("transforms.Expand")
	cfg = cfg.WithDefaults()
	return beam.ParDo(s, &expandFn{RunID: cfg.RunID, Stage: cfg.Stage, Iteration: cfg.Iteration, G: cfg.Group, SeedBase: cfg.SeedBase}, ts)
}

type expandFn struct {
	RunID     string
	Stage     string
	Iteration int32
	G         int
	SeedBase  uint64
}

func (f *expandFn) ProcessElement(t Task, emit func(Group)) {
	emit(NewGroup(f.RunID, f.Stage, f.Iteration, f.G, f.SeedBase, t))
}

// NewGroup is the group of g rollouts of a task in a stage of an iteration.
// The ids of the rollout stage (Stage, or "") are rollout.ID(run,
// iteration, task, index), as `legorl rollout --task` makes them; another
// stage's hash "STAGE/TASK" in the task's place.
func NewGroup(runID, stage string, iteration int32, g int, seedBase uint64, t Task) Group {
	id := t.Instance.InstanceID
	if stage != "" && stage != Stage {
		id = stage + "/" + id // instance ids have no '/'
	}
	grp := Group{GroupID: rollout.GroupID(runID, iteration, id), Task: t, Rollouts: make([]Spec, g)}
	for i := range g {
		grp.Rollouts[i] = Spec{RolloutID: rollout.ID(runID, iteration, id, i), Index: i,
			Seed: int64(rollout.Seed(seedBase, runID, iteration, id, i))}
	}
	return grp
}
