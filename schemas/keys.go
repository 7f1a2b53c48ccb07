package schemas

import "fmt"

// The store's key layout, defined once: every package that names an
// object of a run formats its key here. Under runs/RUN/:
//
//	manifests/STAGE/iter-NNNNNN/vNNNNNN.json    committed manifest versions
//	data/TABLE/iter-NNNNNN/STAGE-NAME.parquet    data files
//	claims/STAGE/iter-NNNNNN/GROUP.json          claimed groups (progress)
//	reports/STAGE/iter-NNNNNN/JOB.json           pipeline reports (eval: STAGE "eval")
//	reports/audit/JOB.json                       file audits
//	reports/loop/results-vA-vB-NANOS.json        a loop's before/after results
//	checkpoints/vNNNNNN/FILE                     published policy checkpoints

// Manifest stages.
const (
	// StageRollout holds a rollout pipeline's (or a single rollout's)
	// rollouts, segments and steps.
	StageRollout = "rollout"
	// StageServe holds the segments `legorl serve` recorded (iteration 0).
	StageServe = "serve"
	// StageTrain holds an update's train_steps.
	StageTrain = "train"
	// StageReplay holds the rollout audit's replay rows (the replay
	// table), in the iteration of the rollouts they replayed.
	StageReplay = "replay"
)

// RunsPrefix is the prefix of every run.
const RunsPrefix = "runs/"

// RunPrefix is the prefix of run's objects.
func RunPrefix(run string) string { return RunsPrefix + run + "/" }

// ManifestsPrefix is the prefix of run's manifests.
func ManifestsPrefix(run string) string { return RunPrefix(run) + "manifests/" }

// ManifestPrefix is the prefix of the versions of one manifest.
func ManifestPrefix(run, stage string, iteration int) string {
	return fmt.Sprintf("%s%s/iter-%06d/", ManifestsPrefix(run), stage, iteration)
}

// DataKey is the key of a data file of table; name is unique within the
// run, iteration and stage (a shard or writer id).
func DataKey(run string, table string, iteration int, stage, name string) string {
	return fmt.Sprintf("%sdata/%s/iter-%06d/%s-%s.parquet", RunPrefix(run), table, iteration, stage, name)
}

// ClaimPrefix is the prefix of a stage's claims in an iteration.
func ClaimPrefix(run, stage string, iteration int32) string {
	return fmt.Sprintf("%sclaims/%s/iter-%06d/", RunPrefix(run), stage, iteration)
}

// ReportKey is the key of a pipeline run's report.
func ReportKey(run, stage string, iteration int32, job string) string {
	return fmt.Sprintf("%sreports/%s/iter-%06d/%s.json", RunPrefix(run), stage, iteration, job)
}

// AuditReportKey is the key of a file audit's report.
func AuditReportKey(run, job string) string {
	return fmt.Sprintf("%sreports/audit/%s.json", RunPrefix(run), job)
}

// LoopResultKey is the key of a loop's results, policy first to last.
func LoopResultKey(run string, first, last int64, nanos int64) string {
	return fmt.Sprintf("%sreports/loop/results-v%06d-v%06d-%d.json", RunPrefix(run), first, last, nanos)
}

// CheckpointKey is the key of a file of a published checkpoint.
func CheckpointKey(run string, version int64, file string) string {
	return fmt.Sprintf("%scheckpoints/v%06d/%s", RunPrefix(run), version, file)
}
