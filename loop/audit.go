package loop

import (
	"context"
	"fmt"
	"io"

	"github.com/legorl/legorl/pipelines/audit"
	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
	"github.com/legorl/legorl/transforms"
)

// AuditOptions configure Audit.
type AuditOptions struct {
	// Store is the run's store; Files names it (URI, endpoint), the run
	// and the job for the audit pipeline.
	Store storage.Store
	Files transforms.AuditConfig
	// Runner runs the audit pipeline.
	Runner runner.Options
	// Checkpoints are checkpoint folders: each has its lineage checked,
	// and is the weights of its policy version for the logprob check.
	Checkpoints []string
	// Sample is how many segments per iteration and policy version have
	// their logprobs recomputed; 0: all.
	Sample int
	// MinPearson is the correlation the recomputed and recorded logprobs
	// must reach.
	MinPearson float64
}

// Audit is the offline reproducibility audit of a run. The audit pipeline
// re-verifies every committed file (sha256, size, rows, schema, row
// validation, no rollout twice); then each checkpoint has its lineage
// checked (trainer.AuditLineage) and the logprobs of a sample of each
// iteration's segments are recomputed with the checkpoint of the policy
// version that sampled them (trainer.AuditLogprobs). It writes one line
// per check to w and fails when any check did.
func Audit(ctx context.Context, o AuditOptions, w io.Writer) error {
	run := o.Files.RunID
	failures := 0
	check := func(l trainer.AuditLine, what string) {
		mark := "ok  "
		if !l.OK {
			mark = "FAIL"
			failures++
		}
		fmt.Fprintf(w, "%s %-10s %s\n", mark, what, l.Detail)
	}

	rep, err := audit.Run(ctx, o.Files, o.Runner)
	if err != nil {
		return err
	}
	check(trainer.AuditLine{OK: rep.Files > 0, Detail: fmt.Sprintf("%d committed files of run %s checked (sha256, size, schema, rows)", rep.Files, run)}, "files")
	for _, f := range rep.Failures {
		check(trainer.AuditLine{Detail: f.Key + ": " + f.Detail}, f.Check)
	}

	weights := map[int64]string{}
	for _, dir := range o.Checkpoints {
		v, line := trainer.AuditLineage(ctx, o.Store, run, dir)
		check(line, "lineage")
		if line.OK {
			weights[v] = dir
		}
	}

	ms, err := storage.Manifests(ctx, o.Store, run)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Stage != schemas.StageRollout || len(weights) == 0 {
			continue
		}
		for _, line := range trainer.AuditLogprobs(ctx, o.Store, run, m.Iteration, weights, o.Sample, o.MinPearson) {
			check(line, "logprobs")
		}
	}
	if failures > 0 {
		return fmt.Errorf("audit of run %s: %d check(s) failed", run, failures)
	}
	fmt.Fprintf(w, "audit of run %s: every check passed\n", run)
	return nil
}
