// Package trainer turns one iteration of stored rollouts into the next
// policy checkpoint.
//
// The path of an update (Train):
//
//  1. Load reads the iteration's rollout-stage manifest, then its rollouts
//     and segments files as Arrow record batches, checks every row (a bad
//     row is an error naming the file and row) and drops masked rollouts,
//     counted by termination.
//  2. Advantages computes GRPO advantages per task group; groups whose
//     rewards do not vary give no gradient and are counted. With
//     Config.Baseline "none" the reward itself is the advantage (Rewards):
//     every success trains, every failure is left alone. Every segment of
//     a rollout carries the rollout's advantage.
//  3. Recompute scores every sampled token under the current weights at the
//     segment's temperature, replaying the recorded MoE routes, and Gate
//     compares them with the rollout logprobs (Pearson, Spearman, mean and
//     max absolute difference, k3 KL, overall and per rollout). Below the
//     threshold the update aborts with a GateError, or drops the offending
//     segments in the mask mode.
//  4. Trainer.Step runs one optimizer step: sequences packed into
//     micro-batches by a token budget, PPO-clip or GSPO with truncated
//     importance sampling against the rollout logprobs, gradients
//     accumulated, clipped, AdamW.
//  5. Train then writes the checkpoint folder atomically (HF layout,
//     optimizer state, recomputed logprobs, lineage.json) and the
//     iteration's train_steps rows, committed in the "train" manifest stage.
//
// The check runs once per iteration, before the first optimizer step, with
// the weights that sampled the rollouts (the parent checkpoint): only those
// weights can be expected to agree with the engine. Later steps of the same
// iteration use the recomputed logprobs as PPO's fixed "old" policy, and
// the truncated importance weight min(pi_old/pi_rollout, C) corrects for
// what disagreement remains. Tokens that a hot swap let another policy
// version sample (Segment.PolicyVersions) are trained on but not compared.
//
// Losses are built as per-token weights d(loss)/d(logprob) handed to
// model.BackwardFunc, so the model package knows nothing of RL.
//
// Entropy is estimated from the sampled tokens alone: the mean of
// -logprob over the step's sampled tokens (a Monte Carlo estimate of the
// policy's entropy at the sampling temperature, exact in expectation for
// on-policy tokens). The model does not expose full-vocabulary entropies.
package trainer

import "errors"

// Sentinel errors. Every error of this package wraps one of them, or an
// error of the storage or model packages.
var (
	// ErrConfig: a Config field out of range.
	ErrConfig = errors.New("trainer: bad config")
	// ErrData: a stored row the trainer cannot use (NaN reward, lengths that
	// disagree, a segment of an unknown rollout, routing of another model).
	// The message names the file and row.
	ErrData = errors.New("trainer: bad training data")
	// ErrGate: the train-inference logprob check failed; the error is a
	// *GateError carrying the report.
	ErrGate = errors.New("trainer: train-inference logprob check failed")
	// ErrCheckpoint: the parent or output checkpoint folder is unusable.
	ErrCheckpoint = errors.New("trainer: bad checkpoint")
)
