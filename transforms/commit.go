package transforms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

func init() {
	register.DoFn6x1[context.Context, []byte, func(*Group) bool, func(*GroupResult) bool, func(*Rejected) bool, func(Report), error](&commitFn{})
	register.Iter1[Group]()
	register.Iter1[GroupResult]()
	register.Iter1[Rejected]()
	register.Emitter1[Report]()
}

// Commit checks the accounting of an iteration and commits it: every
// launched rollout (the groups' specs) must have ended exactly once, as
// completed or masked, in exactly one claimed group, so launched =
// completed + masked; otherwise it fails with ErrAccounting and commits
// nothing. Then it adds every claimed file to the rollout stage's manifest
// of the run and iteration in one storage.Commit, and puts the report
// (ReportKey). It runs once, after its inputs are complete: it expects a
// PCollection<Group>, a PCollection<GroupResult> and a PCollection<Rejected>
// and returns a PCollection<Report> of one element.
func Commit(s beam.Scope, cfg Config, groups, results, rejected beam.PCollection) beam.PCollection {
	s = s.Scope("transforms.Commit")
	return beam.ParDo(s, &commitFn{Cfg: cfg.WithDefaults()}, beam.Impulse(s),
		beam.SideInput{Input: groups}, beam.SideInput{Input: results}, beam.SideInput{Input: rejected})
}

type commitFn struct {
	Cfg Config
}

func (f *commitFn) ProcessElement(ctx context.Context, _ []byte, groups func(*Group) bool, results func(*GroupResult) bool,
	rejected func(*Rejected) bool, emit func(Report)) error {
	cfg := f.Cfg
	var gs []Group
	var g Group
	for groups(&g) {
		gs = append(gs, g)
		g = Group{}
	}
	var rs []GroupResult
	var r GroupResult
	for results(&r) {
		rs = append(rs, r)
		r = GroupResult{}
	}
	var rej []Rejected
	var x Rejected
	for rejected(&x) {
		rej = append(rej, x)
	}
	rep, files, err := Account(cfg.RunID, cfg.Iteration, gs, rs)
	if err != nil {
		return err
	}
	rep.Stage = cfg.Stage
	sort.Slice(rej, func(i, j int) bool { return rej[i].TaskID < rej[j].TaskID })
	rep.Rejected = rej

	st, err := storage.Open(ctx, cfg.Store, currentStoreOptions(cfg))
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.StoreTimeout)
	defer cancel()
	if len(files) > 0 {
		ref := cfg.ref()
		if err := checkManifest(cctx, st, ref, rs); err != nil {
			return err
		}
		m, err := storage.Commit(cctx, st, ref, files)
		if err != nil {
			return fmt.Errorf("transforms: commit %s: %w", ref.Prefix(), err)
		}
		rep.ManifestVersion = m.Version
	}
	body, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	key := ReportKey(cfg.RunID, cfg.Stage, cfg.Iteration, cfg.JobID)
	if err := (sameContent{st}).Put(cctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("transforms: report: %w", err)
	}
	emit(rep)
	return nil
}

func currentStoreOptions(cfg Config) storage.Options {
	storeOptions.mu.Lock()
	opt := storeOptions.opt
	storeOptions.mu.Unlock()
	opt.S3Endpoint = cfg.S3Endpoint
	return opt
}

// Account checks that the results account for every launched rollout of
// the groups exactly once, and returns the report and the files to commit.
// A group with two results of different attempts, a result for no launched
// group, a rollout missing, unknown or ended twice, or launched !=
// completed + masked is an ErrAccounting error.
func Account(runID string, iteration int32, groups []Group, results []GroupResult) (Report, []storage.FileEntry, error) {
	rep := Report{RunID: runID, Iteration: iteration}
	launched := map[string]string{} // rollout id -> group id
	byGroup := map[string]Group{}
	for _, g := range groups {
		if _, dup := byGroup[g.GroupID]; dup {
			return rep, nil, fmt.Errorf("%w: group %s (task %s) launched twice", ErrAccounting, g.GroupID, g.Task.Instance.InstanceID)
		}
		byGroup[g.GroupID] = g
		for _, s := range g.Rollouts {
			if _, dup := launched[s.RolloutID]; dup {
				return rep, nil, fmt.Errorf("%w: rollout %s launched twice", ErrAccounting, s.RolloutID)
			}
			launched[s.RolloutID] = g.GroupID
		}
	}
	rep.Launched = len(launched)
	sort.Slice(results, func(i, j int) bool { return results[i].GroupID < results[j].GroupID })
	seen := map[string]GroupResult{}
	ended := map[string]bool{}
	masked := map[string]int{}
	perTask := map[string]*[2]int{} // completed, passed
	var files []storage.FileEntry
	for _, r := range results {
		if prev, ok := seen[r.GroupID]; ok {
			if prev.Attempt != r.Attempt {
				return rep, nil, fmt.Errorf("%w: group %s has results of attempts %s and %s", ErrAccounting, r.GroupID, prev.Attempt, r.Attempt)
			}
			continue // the same claim twice: one group
		}
		seen[r.GroupID] = r
		g, ok := byGroup[r.GroupID]
		if !ok {
			return rep, nil, fmt.Errorf("%w: a result for group %s, which was not launched", ErrAccounting, r.GroupID)
		}
		if len(r.Rollouts) != len(g.Rollouts) {
			return rep, nil, fmt.Errorf("%w: group %s (task %s) was claimed with %d rollouts, the run launches %d (a different --group?)",
				ErrAccounting, r.GroupID, r.TaskID, len(r.Rollouts), len(g.Rollouts))
		}
		if perTask[r.TaskID] == nil {
			perTask[r.TaskID] = new([2]int)
		}
		for _, o := range r.Rollouts {
			if launched[o.RolloutID] != r.GroupID {
				return rep, nil, fmt.Errorf("%w: group %s claims rollout %s, which it did not launch", ErrAccounting, r.GroupID, o.RolloutID)
			}
			if ended[o.RolloutID] {
				return rep, nil, fmt.Errorf("%w: rollout %s ended twice", ErrAccounting, o.RolloutID)
			}
			ended[o.RolloutID] = true
			switch schemas.Status(o.Status) {
			case schemas.StatusCompleted:
				rep.Completed++
				perTask[r.TaskID][0]++
				if o.Reward == 1 {
					rep.Passed++
					perTask[r.TaskID][1]++
				}
			case schemas.StatusMasked:
				rep.Masked++
				masked[o.Termination]++
			default:
				return rep, nil, fmt.Errorf("%w: rollout %s has status %q", ErrAccounting, o.RolloutID, o.Status)
			}
			if r.Reused {
				rep.Reused++
			} else {
				rep.Ran++
			}
		}
		files = append(files, r.Files...)
	}
	var missing []string
	for id, gid := range launched {
		if !ended[id] {
			missing = append(missing, id+" (group "+gid+")")
		}
	}
	if len(missing) > 0 || rep.Launched != rep.Completed+rep.Masked {
		sort.Strings(missing)
		if len(missing) > 5 {
			missing = append(missing[:5], "...")
		}
		return rep, nil, fmt.Errorf("%w: launched %d != completed %d + masked %d; not ended: %s",
			ErrAccounting, rep.Launched, rep.Completed, rep.Masked, strings.Join(missing, ", "))
	}
	for t, n := range masked {
		rep.MaskedBy = append(rep.MaskedBy, fmt.Sprintf("%s=%d", t, n))
	}
	sort.Strings(rep.MaskedBy)
	if rep.Completed > 0 {
		rep.PassRate = float64(rep.Passed) / float64(rep.Completed)
	}
	for id, n := range perTask {
		rep.Tasks = append(rep.Tasks, TaskOutcomes{TaskID: id, Completed: n[0], Passed: n[1]})
	}
	sort.Slice(rep.Tasks, func(i, j int) bool { return rep.Tasks[i].TaskID < rep.Tasks[j].TaskID })
	rep.Files = len(files)
	return rep, files, nil
}

// checkManifest refuses to commit when the manifest already names a
// rollouts file of one of the groups that is not the claimed one: the
// manifest would then list its rollouts twice.
func checkManifest(ctx context.Context, st storage.Store, ref storage.ManifestRef, results []GroupResult) error {
	m, err := storage.Latest(ctx, st, ref)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	}
	claimed := map[string]string{} // group id -> claimed rollouts key
	for _, r := range results {
		for _, f := range r.Files {
			if f.Table == string(schemas.TableRollouts) {
				claimed[r.GroupID] = f.Key
			}
		}
	}
	for _, f := range m.Files {
		if f.Table != string(schemas.TableRollouts) {
			continue
		}
		base := f.Key[strings.LastIndexByte(f.Key, '/')+1:]
		name := strings.TrimSuffix(strings.TrimPrefix(base, ref.Stage+"-"), ".parquet")
		gid, _, ok := strings.Cut(name, ".")
		if !ok {
			continue // not a pipeline shard (legorl rollout --task writes one file per rollout)
		}
		if key, ok := claimed[gid]; ok && key != f.Key {
			return fmt.Errorf("%w: the manifest already lists %s for group %s, whose claim names %s", ErrAccounting, f.Key, gid, key)
		}
	}
	return nil
}
