// Package transforms holds the Beam DoFns and composite transforms of the
// rollout side: reading and validating tasks, expanding each task to its
// group of G rollouts, running the groups (rollout.Run per
// rollout, against an engine shared by the worker process) with deadlines
// and a tail-kill, writing each group's rows as write-once Parquet shards
// with a claim, and the one manifest commit per run and iteration with its
// accounting check.
//
// Element types (all plain structs, encoded by Beam's schema coder):
//
//	Task         a task instance and the folder its snapshot paths are relative to
//	Rejected     a task that failed validation, with its reason
//	Group        the G rollouts of one task in one iteration (ids, seeds)
//	GroupResult  a group's claimed files and the outcome of each rollout
//	Report       the iteration's accounting, after the manifest commit
//
// # Retries, crashes and the claim
//
// Beam may run a bundle twice, and a whole run may be killed and started
// again. A group is the unit of work: its rollouts share a deterministic
// group id, and each rollout a deterministic id and seed. A group attempt
// writes its shards under keys that carry a random attempt token (so a
// retry never collides with a dead attempt's files), then puts the group's
// claim, runs/RUN/claims/rollout/iter-N/GROUP.json, write-once. The claim
// is the group's commit point: the first claim wins, a later attempt adopts
// it (its own files stay orphaned, invisible to every reader), and a group
// whose claim exists is never run again. A put whose key already holds the
// same bytes (sha256 compared) counts as success, so a put retried after a
// lost reply is harmless. The final commit adds the files of every claim
// of the iteration to the manifest in one storage.Commit, after checking
// that each launched rollout ended exactly once (completed or masked), so
// the manifest never lists a rollout twice and readers never see half an
// iteration.
package transforms
