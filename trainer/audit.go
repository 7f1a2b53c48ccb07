package trainer

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/storage"
)

// AuditLine is one check of an audit: whether it passed, and what it
// checked, in one line.
type AuditLine struct {
	OK     bool
	Detail string
}

// AuditLineage checks the checkpoint folder dir against its lineage: every
// file the lineage lists has that sha256, and, when the checkpoint was
// trained on run, every data manifest it read is stored with its recorded
// sha256 and its files with theirs. It returns the checkpoint's policy
// version (0 for a base checkpoint without lineage) and the check's line.
func AuditLineage(ctx context.Context, st storage.Getter, run, dir string) (int64, AuditLine) {
	lin, err := ReadLineage(dir)
	if err != nil {
		return 0, AuditLine{false, fmt.Sprintf("%s: %v", dir, err)}
	}
	if lin == nil {
		return 0, AuditLine{true, fmt.Sprintf("%s: no lineage.json (a base checkpoint, policy version 0)", dir)}
	}
	names := make([]string, 0, len(lin.Files))
	for n := range lin.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		got, err := hashFile(filepath.Join(dir, n))
		if err != nil || got != lin.Files[n] {
			return lin.Version, AuditLine{false, fmt.Sprintf("%s: %s has sha256 %.12s, the lineage says %.12s (%v)", dir, n, got, lin.Files[n], err)}
		}
	}
	if lin.RunID != run {
		return lin.Version, AuditLine{true, fmt.Sprintf("%s: version %d, %d files match; trained on run %s, not this one", dir, lin.Version, len(names), lin.RunID)}
	}
	for _, mu := range lin.Data.Manifests {
		if got, err := storage.HashObject(ctx, st, mu.Key); err != nil {
			return lin.Version, AuditLine{false, fmt.Sprintf("%s: data manifest %s: %v", dir, mu.Key, err)}
		} else if got != mu.SHA256 {
			return lin.Version, AuditLine{false, fmt.Sprintf("%s: data manifest %s has sha256 %.12s, the lineage says %.12s", dir, mu.Key, got, mu.SHA256)}
		}
		for _, f := range mu.Files {
			if got, err := storage.HashObject(ctx, st, f.Key); err != nil {
				return lin.Version, AuditLine{false, fmt.Sprintf("%s: data file %s: %v", dir, f.Key, err)}
			} else if got != f.SHA256 {
				return lin.Version, AuditLine{false, fmt.Sprintf("%s: data file %s has sha256 %.12s, the lineage says %.12s", dir, f.Key, got, f.SHA256)}
			}
		}
	}
	return lin.Version, AuditLine{true, fmt.Sprintf("%s: version %d (parent %d), %d files and %d data manifests match", dir, lin.Version,
		lin.Parent.Version, len(names), len(lin.Data.Manifests))}
}

// AuditLogprobs recomputes, for each policy version with a checkpoint
// folder in weights, the logprobs of up to n segments of the iteration
// that it sampled tokens of (every k-th: deterministic, spread over the
// iteration; n <= 0: all), replaying their routes, and compares them with
// the recorded ones under the gate's checks with minPearson. One line per
// version that sampled a token of the iteration, in version order.
func AuditLogprobs(ctx context.Context, st storage.Store, run string, iter int, weights map[int64]string, n int, minPearson float64) []AuditLine {
	versions := make([]int64, 0, len(weights))
	for v := range weights {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	var out []AuditLine
	for _, v := range versions {
		dir := weights[v]
		where := fmt.Sprintf("iteration %d, version %d (%s)", iter, v, dir)
		m, err := model.Load(dir)
		if err != nil {
			out = append(out, AuditLine{false, where + ": " + err.Error()})
			continue
		}
		data, err := Load(ctx, st, run, iter, LoadOptions{Model: m.Config()})
		if err != nil {
			out = append(out, AuditLine{false, where + ": " + err.Error()})
			continue
		}
		var mine []Sample
		for _, s := range data.Samples {
			for i, mk := range s.Mask {
				if mk == 1 && s.Versions[i] == v {
					mine = append(mine, s)
					break
				}
			}
		}
		if len(mine) == 0 {
			continue // nothing of this iteration was sampled by this version
		}
		if n > 0 && len(mine) > n {
			picked := make([]Sample, 0, n)
			for i := 0; i < n; i++ {
				picked = append(picked, mine[i*len(mine)/n])
			}
			mine = picked
		}
		rec, err := Recompute(m, mine, 16384, true, nil)
		if err != nil {
			out = append(out, AuditLine{false, where + ": " + err.Error()})
			continue
		}
		rep, _, err := Check(mine, rec, v, Config{MinPearson: minPearson}.WithDefaults())
		if rep == nil {
			out = append(out, AuditLine{false, fmt.Sprintf("%s: %v", where, err)})
			continue
		}
		out = append(out, AuditLine{rep.Passed, fmt.Sprintf("%s: %d segments: %s", where, len(mine), rep.Summary())})
	}
	return out
}
