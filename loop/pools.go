package loop

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/legorl/legorl/tasks"
)

// The suite's pools (DESIGN.md §6): SFT's demonstrations come from the
// sft split, RL's tasks from the train split, evaluations from heldout and
// heldout_family; no task is in two. Each pipeline reads a task file the
// loop writes once under WorkDir/pools (the suite's instances, snapshots
// made absolute), so a resumed run reads the same tasks.

// load reads the suite once.
func (l *looper) load() ([]tasks.Instance, error) {
	if l.instances == nil {
		all, err := loadSuite(l.suite)
		if err != nil {
			return nil, err
		}
		l.instances = all
	}
	return l.instances, nil
}

// loadSuite reads a suite's instances, their snapshots made absolute.
func loadSuite(path string) ([]tasks.Instance, error) {
	s, err := tasks.Load(path)
	if err != nil {
		return nil, err
	}
	for i := range s.Instances {
		in := &s.Instances[i]
		if in.Snapshot != "" && !filepath.IsAbs(in.Snapshot) {
			in.Snapshot = filepath.Join(s.Dir, in.Snapshot)
		}
	}
	return s.Instances, nil
}

// split returns the valid instances of a split, in the suite's order.
func (l *looper) split(name string) ([]tasks.Instance, error) {
	all, err := l.load()
	if err != nil {
		return nil, err
	}
	var out []tasks.Instance
	for _, in := range all {
		if in.Split == name && in.Check() == nil {
			out = append(out, in)
		}
	}
	return out, nil
}

// rlPool is the train split in a seeded order: iterations walk it from
// the start, SFT's probe takes its end.
func (l *looper) rlPool() ([]tasks.Instance, error) {
	ins, err := l.split(tasks.SplitTrain)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(l.cfg.Run))
	r := rand.New(rand.NewPCG(l.cfg.Builtin.Seed, h.Sum64()))
	r.Shuffle(len(ins), func(i, j int) { ins[i], ins[j] = ins[j], ins[i] })
	return ins, nil
}

// iterationTasks is the task file of iteration i: K fresh tasks of the RL
// pool, or "" for the whole suite (K = 0), and how many of them earlier
// iterations rolled out already. Tasks repeat once the pool, or under
// rl.select the pool's tasks of the arms drawn, are used up; a policy
// trained on repeats can learn those tasks rather than the skill, so the
// loop says so, and the summary counts them per iteration.
func (l *looper) iterationTasks(ctx context.Context, i int) (string, int, error) {
	k := l.cfg.RL.TasksPerIteration
	if k == 0 {
		return "", 0, nil
	}
	pool, err := l.iterationPool()
	if err != nil {
		return "", 0, err
	}
	if len(pool) == 0 {
		return "", 0, fmt.Errorf("%w: rl.tasks_per_iteration %d: the suite has no train task", ErrConfig, k)
	}
	used, err := l.usedTasks(i)
	if err != nil {
		return "", 0, err
	}
	var ins []tasks.Instance
	if l.cfg.RL.Select == SelectVariance || l.cfg.RL.Select == SelectTemplateVariance {
		if ins, err = l.varianceTasks(ctx, i, k, pool, used); err != nil {
			return "", 0, err
		}
	} else {
		for j := range k {
			ins = append(ins, pool[(i*k+j)%len(pool)])
		}
	}
	repeated := countUsed(used, ins)
	if repeated > 0 {
		l.logf("iteration %d: %d of its %d tasks were rolled out by earlier iterations: the RL pool (%d tasks) or, under rl.select, its tasks of the arms drawn are used up (a larger builtin.n gives more)", i, repeated, k, len(pool))
	}
	path, err := l.taskFile(iterationTaskFile(i), ins)
	return path, repeated, err
}

// iterationTaskFile names iteration i's task file under WorkDir/pools
// (taskFile adds .jsonl).
func iterationTaskFile(i int) string { return fmt.Sprintf("rl-iter-%06d", i) }

// iterationTaskPath is the path of iteration i's task file.
func (l *looper) iterationTaskPath(i int) string {
	return filepath.Join(l.cfg.WorkDir, "pools", iterationTaskFile(i)+".jsonl")
}

// repeatedTasks counts the tasks of iteration i's task file that earlier
// iterations rolled out: what iterationTasks said when it wrote the file.
func (l *looper) repeatedTasks(i int) (int, error) {
	if l.cfg.RL.TasksPerIteration == 0 {
		return 0, nil
	}
	used, err := l.usedTasks(i)
	if err != nil {
		return 0, err
	}
	cur, err := tasks.Load(l.iterationTaskPath(i))
	if err != nil {
		return 0, fmt.Errorf("iteration %d's tasks: %w", i, err)
	}
	return countUsed(used, cur.Instances), nil
}

func countUsed(used map[string]bool, ins []tasks.Instance) int {
	n := 0
	for _, in := range ins {
		if used[in.InstanceID] {
			n++
		}
	}
	return n
}

// usedTasks is the set of tasks iterations 0..i-1 rolled out, read back
// from their task files (so a resumed run counts the same).
func (l *looper) usedTasks(i int) (map[string]bool, error) {
	used := map[string]bool{}
	for j := 0; j < i; j++ {
		prev, err := tasks.Load(l.iterationTaskPath(j))
		if err != nil {
			return nil, fmt.Errorf("iteration %d's tasks: %w", j, err)
		}
		for _, in := range prev.Instances {
			used[in.InstanceID] = true
		}
	}
	return used, nil
}

// varianceTasks draws iteration i's k tasks by drawByVariance, with the
// tasks of iterations 0..i-1 (used) and their outcomes read back from
// their reports (so a resumed run draws the same tasks), seeded by the run
// and i.
func (l *looper) varianceTasks(ctx context.Context, i, k int, pool []tasks.Instance, used map[string]bool) ([]tasks.Instance, error) {
	outcomes := map[string][2]int{} // task id -> completed, passed
	for j := 0; j < i; j++ {
		rep, err := l.iterationReport(ctx, j)
		if err != nil {
			return nil, fmt.Errorf("rl.select %s: %w", l.cfg.RL.Select, err)
		}
		for _, t := range rep.Tasks {
			o := outcomes[t.TaskID]
			outcomes[t.TaskID] = [2]int{o[0] + t.Completed, o[1] + t.Passed}
		}
	}
	h := fnv.New64a()
	h.Write([]byte(l.cfg.Run))
	r := rand.New(rand.NewPCG(l.cfg.Builtin.Seed^uint64(i+1)*0x9e3779b97f4a7c15, h.Sum64()))
	byTemplate := l.cfg.RL.Select == SelectTemplateVariance
	out, weights := drawByVariance(r, pool, used, outcomes, k, byTemplate)
	arm := "family"
	if byTemplate {
		arm = "template"
	}
	l.logf("iteration %d: %s weights (rl.select %s): %s", i, arm, l.cfg.RL.Select, weights)
	return out, nil
}

// drawByVariance draws k tasks of pool: each draw picks an arm (a task's
// family, or with byTemplate its template) with weight p(1-p), p =
// (passed+1)/(completed+2) over the outcomes of the arm's tasks, then the
// arm's first task in pool order not in used (an arm used up starts
// again). It returns the tasks and the weights, described for the log.
func drawByVariance(r *rand.Rand, pool []tasks.Instance, used map[string]bool, outcomes map[string][2]int, k int, byTemplate bool) ([]tasks.Instance, string) {
	byArm := map[string][]tasks.Instance{} // arm -> its tasks
	counts := map[string][2]int{}          // arm -> completed, passed
	var arms []string
	for _, in := range pool {
		a := in.Family
		if byTemplate && in.Template != "" {
			a = in.Template
		}
		if _, ok := byArm[a]; !ok {
			arms = append(arms, a)
		}
		byArm[a] = append(byArm[a], in)
		o, c := outcomes[in.InstanceID], counts[a]
		counts[a] = [2]int{c[0] + o[0], c[1] + o[1]}
	}
	sort.Strings(arms)
	weights := make([]float64, len(arms))
	var total float64
	for n, a := range arms {
		p := float64(counts[a][1]+1) / float64(counts[a][0]+2)
		weights[n] = p * (1 - p)
		total += weights[n]
	}
	used = maps.Clone(used)
	if used == nil {
		used = map[string]bool{}
	}
	next := map[string]int{} // arm -> cursor into byArm
	var out []tasks.Instance
	for len(arms) > 0 && len(out) < k {
		x, n := r.Float64()*total, 0
		for n < len(arms)-1 && x >= weights[n] {
			x -= weights[n]
			n++
		}
		a := arms[n]
		list := byArm[a]
		for next[a] < len(list) && used[list[next[a]].InstanceID] {
			next[a]++
		}
		if next[a] == len(list) { // the arm is used up: start it again
			next[a] = 0
			for _, in := range list {
				delete(used, in.InstanceID)
			}
		}
		in := list[next[a]]
		used[in.InstanceID] = true
		out = append(out, in)
	}
	desc := make([]string, len(arms))
	for n, a := range arms {
		desc[n] = fmt.Sprintf("%s %.2f (%d/%d)", a, weights[n]/total, counts[a][1], counts[a][0])
	}
	return out, strings.Join(desc, ", ")
}

// iterationPool is the RL pool the iterations draw from: all of it, or
// with rl.probe all but its last rl.probe.tasks tasks, which the probe
// holds out.
func (l *looper) iterationPool() ([]tasks.Instance, error) {
	pool, err := l.rlPool()
	p := l.cfg.RL.Probe
	if err != nil || p == nil {
		return pool, err
	}
	if len(pool) <= p.Tasks {
		return nil, fmt.Errorf("%w: rl.probe.tasks %d: the train split has %d tasks, none would be left to train on", ErrConfig, p.Tasks, len(pool))
	}
	return pool[:len(pool)-p.Tasks], nil
}

// rlProbeTasks is the task file of RL's probe: the last rl.probe.tasks
// tasks of the RL pool, which the iterations never draw.
func (l *looper) rlProbeTasks() (string, error) {
	pool, err := l.rlPool()
	if err != nil {
		return "", err
	}
	if n := l.cfg.RL.Probe.Tasks; len(pool) > n {
		pool = pool[len(pool)-n:]
	}
	return l.taskFile("rl-probe", pool)
}

// probeTasks is the task file of SFT's probe: the last tasks of the RL
// pool (the iterations reach them last, if at all).
func (l *looper) probeTasks(n int) (string, error) {
	pool, err := l.rlPool()
	if err != nil {
		return "", err
	}
	if len(pool) == 0 {
		return "", fmt.Errorf("%w: sft.probe: the suite has no train task to probe", ErrConfig)
	}
	n = min(n, len(pool))
	return l.taskFile("sft-probe", pool[len(pool)-n:])
}

// evalTasks is the task file of a held-out split's evals: its first
// eval.max_tasks tasks, or every one.
func (l *looper) evalTasks(split string) (string, []tasks.Instance, error) {
	ins, err := l.split(split)
	if err != nil {
		return "", nil, err
	}
	if m := l.cfg.Eval.MaxTasks; m > 0 && len(ins) > m {
		ins = ins[:m]
	}
	if len(ins) == 0 {
		return "", nil, nil
	}
	p, err := l.taskFile("eval-"+split, ins)
	return p, ins, err
}

// taskFile writes ins to WorkDir/pools/NAME.jsonl once; a file already
// there must hold the same instances (a resumed run with another suite or
// config is refused).
func (l *looper) taskFile(name string, ins []tasks.Instance) (string, error) {
	var buf bytes.Buffer
	if err := tasks.WriteJSONL(&buf, ins); err != nil {
		return "", err
	}
	dir := filepath.Join(l.cfg.WorkDir, "pools")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".jsonl")
	if old, err := os.ReadFile(path); err == nil {
		if !bytes.Equal(old, buf.Bytes()) {
			return "", fmt.Errorf("%w: %s holds other tasks than this config chooses (another suite or config in the same work dir?)", ErrConfig, path)
		}
		return path, nil
	}
	return path, atomicFile(path, buf.Bytes())
}

// demoSplit is the split SFT's demonstrations come from: sft when the
// suite has one, else train (a suite without an SFT pool).
func (l *looper) demoSplit() string {
	all, _ := l.load()
	if slices.ContainsFunc(all, func(in tasks.Instance) bool { return in.Split == tasks.SplitSFT }) {
		return tasks.SplitSFT
	}
	return tasks.SplitTrain
}
