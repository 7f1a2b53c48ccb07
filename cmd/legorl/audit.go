package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/legorl/legorl/pipelines/audit"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
	"github.com/legorl/legorl/transforms"
)

// runAudit is `legorl audit`: the offline reproducibility audit of a run.
// The audit pipeline re-verifies every committed file (sha256, size, rows,
// schema, row validation, no rollout twice); then each checkpoint given
// has its lineage checked (its files' and data manifests' hashes) and the
// logprobs of a sample of the run's segments are recomputed with the
// checkpoint of the policy version that sampled them (replaying recorded
// MoE routes) and compared with the recorded ones. One line per check on
// stdout; any failure exits non-zero.
func runAudit(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", stderr)
	var sf storeFlags
	sf.register(fs, env)
	run := fs.String("run", "", "run id (required)")
	ckpts := fs.String("checkpoints", "", "checkpoint folders, comma-separated: lineage checks, and the weights of each policy version for the logprob check")
	sample := fs.Int("sample", 32, "segments per iteration and policy version whose logprobs are recomputed")
	minPearson := fs.Float64("min-pearson", 0.99, "the recomputed and recorded logprobs' Pearson correlation must reach this")
	runnerName := fs.String("runner", runner.Prism, "Beam runner: prism or universal")
	endpoint := fs.String("endpoint", "", "job server HOST:PORT (--runner universal)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *run == "" {
		return errors.New("--run is required (see legorl audit -h)")
	}
	transforms.SetStoreOptions(storage.Options{AccessKey: env.AccessKey, SecretKey: env.SecretKey, SessionToken: env.Session, Region: env.Region})
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	failures := 0
	check := func(ok bool, what, detail string) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
			failures++
		}
		fmt.Fprintf(stdout, "%s %-10s %s\n", mark, what, detail)
	}

	// Files: the audit pipeline.
	rep, err := audit.Run(ctx, transforms.AuditConfig{Store: sf.uri, S3Endpoint: sf.endpoint, RunID: *run, JobID: newJobID()},
		runner.Options{Runner: *runnerName, Endpoint: *endpoint})
	if err != nil {
		return err
	}
	check(rep.Files > 0, "files", fmt.Sprintf("%d committed files of run %s checked (sha256, size, schema, rows)", rep.Files, *run))
	for _, f := range rep.Failures {
		check(false, f.Check, f.Key+": "+f.Detail)
	}

	// Checkpoints: lineage, and the weights of each policy version.
	weights := map[int64]string{}
	for _, dir := range strings.Split(*ckpts, ",") {
		if dir = strings.TrimSpace(dir); dir == "" {
			continue
		}
		v, ok, detail := auditLineage(ctx, st, *run, dir)
		check(ok, "lineage", detail)
		if ok {
			weights[v] = dir
		}
	}

	// Logprobs: recompute a sample of each iteration's segments.
	ms, err := storage.Manifests(ctx, st, *run)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Stage != transforms.Stage || len(weights) == 0 {
			continue
		}
		for _, line := range auditLogprobs(ctx, st, *run, m.Iteration, weights, *sample, *minPearson) {
			check(line.ok, "logprobs", line.detail)
		}
	}
	if failures > 0 {
		return fmt.Errorf("audit of run %s: %d check(s) failed", *run, failures)
	}
	fmt.Fprintf(stdout, "audit of run %s: every check passed\n", *run)
	return nil
}

// auditLineage checks a checkpoint folder: every file its lineage lists
// has that sha256, and every data manifest it read is stored with its
// recorded sha256 and names the files it recorded. It returns the
// checkpoint's policy version (0 without lineage).
func auditLineage(ctx context.Context, st storage.Store, run, dir string) (int64, bool, string) {
	lin, err := trainer.ReadLineage(dir)
	if err != nil {
		return 0, false, fmt.Sprintf("%s: %v", dir, err)
	}
	if lin == nil {
		return 0, true, fmt.Sprintf("%s: no lineage.json (a base checkpoint, policy version 0)", dir)
	}
	names := make([]string, 0, len(lin.Files))
	for n := range lin.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		got, err := fileSHA256(filepath.Join(dir, n))
		if err != nil || got != lin.Files[n] {
			return lin.Version, false, fmt.Sprintf("%s: %s has sha256 %.12s, the lineage says %.12s (%v)", dir, n, got, lin.Files[n], err)
		}
	}
	if lin.RunID != run {
		return lin.Version, true, fmt.Sprintf("%s: version %d, %d files match; trained on run %s, not this one", dir, lin.Version, len(names), lin.RunID)
	}
	for _, mu := range lin.Data.Manifests {
		rc, err := st.Get(ctx, mu.Key)
		if err != nil {
			return lin.Version, false, fmt.Sprintf("%s: data manifest %s: %v", dir, mu.Key, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if got := hex.EncodeToString(h.Sum(nil)); err != nil || got != mu.SHA256 {
			return lin.Version, false, fmt.Sprintf("%s: data manifest %s has sha256 %.12s, the lineage says %.12s", dir, mu.Key, got, mu.SHA256)
		}
		for _, f := range mu.Files {
			rc, err := st.Get(ctx, f.Key)
			if err != nil {
				return lin.Version, false, fmt.Sprintf("%s: data file %s: %v", dir, f.Key, err)
			}
			h := sha256.New()
			_, err = io.Copy(h, rc)
			rc.Close()
			if got := hex.EncodeToString(h.Sum(nil)); err != nil || got != f.SHA256 {
				return lin.Version, false, fmt.Sprintf("%s: data file %s has sha256 %.12s, the lineage says %.12s", dir, f.Key, got, f.SHA256)
			}
		}
	}
	return lin.Version, true, fmt.Sprintf("%s: version %d (parent %d), %d files and %d data manifests match", dir, lin.Version,
		lin.Parent.Version, len(names), len(lin.Data.Manifests))
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type auditLine struct {
	ok     bool
	detail string
}

// auditLogprobs recomputes, for each policy version with weights, the
// logprobs of up to n segments of the iteration that it sampled tokens of,
// replaying their routes, and compares them with the recorded ones.
func auditLogprobs(ctx context.Context, st storage.Store, run string, iter int, weights map[int64]string, n int, minPearson float64) []auditLine {
	versions := make([]int64, 0, len(weights))
	for v := range weights {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	var out []auditLine
	for _, v := range versions {
		dir := weights[v]
		where := fmt.Sprintf("iteration %d, version %d (%s)", iter, v, dir)
		m, err := model.Load(dir)
		if err != nil {
			out = append(out, auditLine{false, where + ": " + err.Error()})
			continue
		}
		data, err := trainer.Load(ctx, st, run, iter, trainer.LoadOptions{Model: m.Config()})
		if err != nil {
			out = append(out, auditLine{false, where + ": " + err.Error()})
			continue
		}
		var mine []trainer.Sample
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
		if n > 0 && len(mine) > n { // every k-th: deterministic, spread over the iteration
			picked := make([]trainer.Sample, 0, n)
			for i := 0; i < n; i++ {
				picked = append(picked, mine[i*len(mine)/n])
			}
			mine = picked
		}
		rec, err := trainer.Recompute(m, mine, 16384, true, nil)
		if err != nil {
			out = append(out, auditLine{false, where + ": " + err.Error()})
			continue
		}
		rep, _, err := trainer.Check(mine, rec, v, trainer.Config{MinPearson: minPearson}.WithDefaults())
		if rep == nil {
			out = append(out, auditLine{false, fmt.Sprintf("%s: %v", where, err)})
			continue
		}
		out = append(out, auditLine{rep.Passed, fmt.Sprintf("%s: %d segments: %s", where, len(mine), rep.Summary())})
	}
	return out
}
