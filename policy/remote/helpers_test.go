package remote

import "github.com/legorl/legorl/policy/infer"

// engine1 is a one-token prompt with the training sampling.
func engine1() infer.Request {
	return infer.Request{Prompt: []int32{1}, MaxTokens: 2, Sampling: infer.DefaultSampling(1)}
}
