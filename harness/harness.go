// Package harness adapts coding-agent programs ("harnesses") to the rollout
// runner: one adapter per program says how to install it, how to start it
// inside a sandbox pointed at the proxy (command line, environment, config
// files), and how to read its final result.
//
// The runner (rollout) drives a Harness through this lifecycle:
// Install once into a cache folder on the host (shown read-only inside the
// sandbox at Env.ProgramDir); per rollout, Command with the rollout's Env
// (the proxy base URL http://127.0.0.1:PORT/rollout/<id>/v1 inside the
// sandbox's network namespace, the task file, the workspace); the Launch's
// Files are written into the folder shown read-only at Env.ConfigDir; the
// command runs under the agent deadline; then Result reads its stdout.
//
// Built in: the bash and tools agents of harness/agent (the legorl-agent
// program, which the runner provides, so their Install does nothing). The
// real programs from npm (Claude Code, OpenCode, Codex, pi, qwen-code) are
// adapters of this same interface, listed in registry.go.
package harness

import (
	"context"
	"errors"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/schemas"
)

// Wire APIs a harness speaks to the proxy.
const (
	WireChat      = "chat/completions" // OpenAI Chat Completions
	WireResponses = "responses"        // OpenAI Responses
	WireMessages  = "messages"         // Anthropic Messages
)

// Harness is one coding-agent program as the rollout runner drives it.
type Harness interface {
	// Name is the harness's name in rows and on the command line.
	Name() string
	// WireAPI is the API it calls (WireChat, WireResponses, WireMessages).
	WireAPI() string
	// Install makes the program available under cacheDir and returns the
	// host folder to show read-only at Env.ProgramDir, or "" when there is
	// none (the built-in agents). The runner calls it for every rollout,
	// under the setup deadline: it installs a pinned version once and is
	// quick when that is done (a stamp file), and safe to call concurrently.
	Install(ctx context.Context, cacheDir string) (string, error)
	// Command returns how to start the program for one rollout.
	Command(env Env) (Launch, error)
	// Result reads the program's final result from its standard output
	// (its last bytes, when long). An error means there is none: the
	// program crashed or printed nothing usable.
	Result(stdout []byte) (Result, error)
}

// Env is what a rollout gives a harness to start with. Paths are inside the
// sandbox.
type Env struct {
	// BaseURL is the proxy's base URL for this rollout:
	// http://127.0.0.1:PORT/rollout/<id>/v1.
	BaseURL string
	// Model is the model name to ask for (any name reaches the policy).
	Model string
	// TaskFile holds the problem statement.
	TaskFile string
	// Workspace is the repository folder; commands start there.
	Workspace string
	// MaxTurns bounds the agent's turns where the harness can be told.
	MaxTurns int
	// ConfigDir holds Launch.Files (read-only).
	ConfigDir string
	// ProgramDir holds what Install returned (read-only); empty when it
	// returned nothing.
	ProgramDir string
	// AgentPath is the legorl-agent program (built-in agents).
	AgentPath string
}

// Launch is how to start a harness for one rollout.
type Launch struct {
	// Cmd is the command; the runner sets its deadline and output.
	Cmd sandbox.Cmd
	// Files are written into Env.ConfigDir before the command starts:
	// configuration that points the program at the proxy. Keys are
	// relative slash paths.
	Files map[string][]byte
}

// Stop reasons of a Result.
const (
	StopSubmitted   = "submitted"     // the agent submitted its work
	StopMaxTurns    = "max_turns"     // the turn budget ran out
	StopNoToolCalls = "no_tool_calls" // the model stopped acting for K consecutive turns
	StopDone        = "done"          // the program ended by itself (harnesses that do not say more)
	StopError       = "error"         // the program gave up on an error
)

// Result is what a harness reports at its end.
type Result struct {
	// Stop is why it ended: one of the Stop constants.
	Stop string
	// Turns, ToolCalls and ParseFailures count model turns, actions run
	// and actions that could not be read; -1 when the harness does not say.
	Turns, ToolCalls, ParseFailures int
	// LLMSeconds and ToolSeconds are the time spent waiting for the model
	// and running tools, as the harness measured it; -1 when unknown.
	LLMSeconds, ToolSeconds float64
	// Error says why a run with Stop StopError ended.
	Error string
	// Steps are its turns (RunID, Iteration and RolloutID left empty).
	Steps []schemas.Step
	// Flags note what the run did beyond the counts ("condensed").
	Flags []string
}

// ErrUnknown: no harness has that name.
var ErrUnknown = errors.New("harness: unknown harness")
