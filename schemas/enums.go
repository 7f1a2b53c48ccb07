package schemas

// Status says whether a rollout's reward may be trained on.
type Status string

const (
	// StatusCompleted: the agent ran to an end the policy is responsible for;
	// the reward counts.
	StatusCompleted Status = "completed"
	// StatusMasked: an infrastructure failure ended the rollout; it never
	// enters the loss (it is not a reward of 0).
	StatusMasked Status = "masked"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s == StatusCompleted || s == StatusMasked }

// Termination says why a rollout ended.
type Termination string

const (
	TerminationAgentCompleted Termination = "agent_completed"  // the agent submitted or stopped by itself
	TerminationMaxTurns       Termination = "max_turns"        // the turn budget ran out: the policy's fault, scored
	TerminationTimeout        Termination = "timeout"          // a wall-clock deadline or tail-kill: masked
	TerminationOverlong       Termination = "overlong"         // the context outgrew the model: masked
	TerminationContextError   Termination = "context_error"    // the harness sent a history the proxy could not serve: masked
	TerminationEnvSetupFailed Termination = "env_setup_failed" // the task environment did not build: masked
	TerminationSandboxCrash   Termination = "sandbox_crash"    // the sandbox itself failed: masked
	TerminationHarnessError   Termination = "harness_error"    // the harness program failed outside the policy's control: masked
)

// Terminations lists every known termination in a stable order.
func Terminations() []Termination {
	return []Termination{
		TerminationAgentCompleted, TerminationMaxTurns, TerminationTimeout,
		TerminationOverlong, TerminationContextError, TerminationEnvSetupFailed,
		TerminationSandboxCrash, TerminationHarnessError,
	}
}

// Valid reports whether t is a known termination.
func (t Termination) Valid() bool {
	for _, k := range Terminations() {
		if t == k {
			return true
		}
	}
	return false
}

// Status returns the status a rollout with this termination must have:
// only agent_completed and max_turns are scored; every infrastructure
// failure is masked.
func (t Termination) Status() Status {
	switch t {
	case TerminationAgentCompleted, TerminationMaxTurns:
		return StatusCompleted
	default:
		return StatusMasked
	}
}

// Mismatch is the kind of difference a replay found between a stored
// rollout and the same rollout run again (the replay table).
type Mismatch string

const (
	// MismatchNone: reproduced bit for bit.
	MismatchNone Mismatch = ""
	// MismatchPrompt: the harness rendered a different request (a clock,
	// randomness, the environment), or asked for more or fewer calls.
	MismatchPrompt Mismatch = "prompt"
	// MismatchDiff: every call matched but the workspace diff differs (the
	// environment changed what a command did), or the stored diff was
	// changed.
	MismatchDiff Mismatch = "diff"
	// MismatchReward: the same diff graded differently (the grader or the
	// tests are not deterministic, or were changed), or the stored reward
	// was changed.
	MismatchReward Mismatch = "reward"
	// MismatchOutcome: the same calls, diff and reward, but another
	// termination, turn count or tool-call count.
	MismatchOutcome Mismatch = "outcome"
)

// Mismatches lists every kind of mismatch, the causes first: a prompt
// divergence explains the rest, a diff divergence the reward's.
func Mismatches() []Mismatch {
	return []Mismatch{MismatchPrompt, MismatchDiff, MismatchReward, MismatchOutcome}
}

// Valid reports whether m is MismatchNone or a known mismatch.
func (m Mismatch) Valid() bool {
	for _, k := range Mismatches() {
		if m == k {
			return true
		}
	}
	return m == MismatchNone
}
