// Package audit is the audit pipeline: it re-verifies every file the
// manifests of a run name (size and sha256, footer, table and schema, row
// count, every row's validation) and that no rollout is listed twice, and
// stores a report. The checks that need the trainer (checkpoint lineage,
// logprob recomputation with routing replay) run in `legorl audit` after
// it.
package audit

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/transforms"
)

// Build adds the audit pipeline to s and returns its PCollection of one
// transforms.AuditReport.
func Build(s beam.Scope, cfg transforms.AuditConfig) beam.PCollection {
	s = s.Scope("audit")
	return transforms.StoreAuditReport(s, cfg, transforms.AuditFiles(s, cfg))
}

// Run runs the audit pipeline and returns the report it stored.
func Run(ctx context.Context, cfg transforms.AuditConfig, ro runner.Options) (transforms.AuditReport, error) {
	if err := storage.CheckName("run id", cfg.RunID); err != nil {
		return transforms.AuditReport{}, err
	}
	if cfg.JobID == "" {
		cfg.JobID = "job"
	}
	if err := storage.CheckName("job id", cfg.JobID); err != nil {
		return transforms.AuditReport{}, err
	}
	if err := runner.RunNew(ctx, ro, "audit", func(s beam.Scope) { Build(s, cfg) }); err != nil {
		return transforms.AuditReport{}, err
	}
	st, err := transforms.OpenStore(ctx, transforms.Config{Store: cfg.Store, S3Endpoint: cfg.S3Endpoint})
	if err != nil {
		return transforms.AuditReport{}, err
	}
	var rep transforms.AuditReport
	err = transforms.ReadJSON(ctx, st, transforms.AuditReportKey(cfg.RunID, cfg.JobID), "audit pipeline: the report", &rep)
	return rep, err
}
