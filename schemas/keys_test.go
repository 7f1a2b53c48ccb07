package schemas_test

import (
	"testing"

	"github.com/legorl/legorl/schemas"
)

// TestKeyLayout pins the store's key layout: stores written by earlier
// versions must stay readable, so a change here is a format change.
func TestKeyLayout(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{schemas.RunPrefix("r"), "runs/r/"},
		{schemas.ManifestsPrefix("r"), "runs/r/manifests/"},
		{schemas.ManifestPrefix("r", schemas.StageTrain, 7), "runs/r/manifests/train/iter-000007/"},
		{schemas.DataKey("r", "rollouts", 3, schemas.StageRollout, "w1"), "runs/r/data/rollouts/iter-000003/rollout-w1.parquet"},
		{schemas.ClaimPrefix("r", "rollout", 2), "runs/r/claims/rollout/iter-000002/"},
		{schemas.ReportKey("r", "eval", 4, "j"), "runs/r/reports/eval/iter-000004/j.json"},
		{schemas.AuditReportKey("r", "j"), "runs/r/reports/audit/j.json"},
		{schemas.LoopResultKey("r", 1, 11, 42), "runs/r/reports/loop/results-v000001-v000011-42.json"},
		{schemas.CheckpointKey("r", 3, "model.safetensors"), "runs/r/checkpoints/v000003/model.safetensors"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
