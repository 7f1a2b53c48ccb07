// Package schemas is the data model of legorl: the Go row types, Arrow schemas,
// Parquet footer metadata and validation rules of every table the project writes.
//
// It is the bottom layer of the project and imports no other legorl package.
// Every table is one Parquet dataset partitioned by run and iteration:
//
//   - rollouts: one row per rollout (one agent episode on one task), with its
//     outcome, reward and timings.
//   - segments: the token-level training data recorded by the proxy at
//     generation time; a rollout has one or more segments.
//   - steps: optional per-turn detail (tool name, arguments, observation size).
//   - train_steps: one row per optimizer step of the trainer.
//   - replay: one row per stored rollout run again by the rollout audit
//     (legorl audit --replay), with what matched and what did not.
//
// Row types carry parquet-go struct tags; the Arrow schema of each table
// (ArrowSchema) is the contract readers rely on, and tests check that files
// written from the row types read back with exactly that schema.
package schemas

// Version is the schema version written into every file's footer. Bump it on
// any change to a row type; readers refuse files from a newer version.
// History: 2 added segments.policy_versions (one version per completion
// token, for generations that span a checkpoint swap).
const Version = 2
