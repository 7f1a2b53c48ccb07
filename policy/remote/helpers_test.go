package remote

import "github.com/legorl/legorl/policy/engine"

// engine1 is a one-token prompt with the training sampling.
func engine1() engine.Request {
	return engine.Request{Prompt: []int32{1}, MaxTokens: 2, Sampling: engine.DefaultSampling(1)}
}
