package engine

import "github.com/legorl/legorl/policy/infer"

// The engine implements the generation contract of policy/infer; these
// names keep the engine's own API readable (engine.Request, ...).
type (
	Sampling   = infer.Sampling
	Request    = infer.Request
	Token      = infer.Token
	Generation = infer.Generation
)

// Sentinel errors, the contract's (infer.ErrInput, ...).
var (
	ErrInput     = infer.ErrInput
	ErrOverlong  = infer.ErrOverlong
	ErrClosed    = infer.ErrClosed
	ErrBadOutput = infer.ErrBadOutput
)

// Finish reasons of a Generation.
const (
	FinishStop    = infer.FinishStop
	FinishLength  = infer.FinishLength
	FinishContext = infer.FinishContext
)

// DefaultSampling is infer.DefaultSampling.
func DefaultSampling(seed uint64) Sampling { return infer.DefaultSampling(seed) }
