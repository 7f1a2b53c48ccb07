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
