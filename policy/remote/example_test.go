package remote_test

import (
	"context"
	"fmt"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/remote"
	"github.com/legorl/legorl/policy/remote/remotetest"
)

// A vLLM server started with
//
//	vllm serve MODEL --logprobs-mode processed_logprobs --max-model-len 4096
//
// answers token ids with token ids and logprobs. Here a fake stands in for it.
func ExampleNewVLLM() {
	fake := remotetest.NewVLLM(nil, remotetest.Fixed(remotetest.Reply{
		Tokens: []int32{17, 2}, Logprobs: []float64{-0.25, -0.5}, Finish: "stop",
	}))
	defer fake.Close()

	e, err := remote.NewVLLM(fake.URL, remote.Options{VocabSize: 151936, ContextLength: 4096, Version: 7})
	if err != nil {
		panic(err)
	}
	req := infer.Request{Prompt: []int32{1, 5, 9}, StopTokens: []int32{2}, Sampling: infer.DefaultSampling(1)}
	g, err := e.Generate(context.Background(), req, func(t infer.Token) {
		fmt.Println("token", t.ID, t.Logprob)
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Tokens, g.Finish, g.Versions)
	// Output:
	// token 17 -0.25
	// token 2 -0.5
	// [17 2] stop [7 7]
}

// An SGLang server started with --enable-return-routed-experts also returns
// the experts every token was routed to.
func ExampleNewSGLang() {
	const layers, k = 2, 2
	fake := remotetest.NewSGLang(nil, remotetest.Fixed(remotetest.Reply{
		Tokens: []int32{17, 2}, Finish: "stop",
		Routes: remotetest.Routes(3+2-1, layers, k, func(tok, layer, slot int) int32 { return int32(tok + slot) }),
	}))
	defer fake.Close()

	e, err := remote.NewSGLang(fake.URL, remote.Options{VocabSize: 151936, Routing: true, ExpertsPerToken: k, Experts: 8})
	if err != nil {
		panic(err)
	}
	req := infer.Request{Prompt: []int32{1, 5, 9}, MaxTokens: 8, StopTokens: []int32{2}, Sampling: infer.DefaultSampling(1)}
	g, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(g.PromptRouting)
	fmt.Println(g.Routing)
	// Output:
	// [[[0 1] [0 1]] [[1 2] [1 2]] [[2 3] [2 3]]]
	// [[[3 4] [3 4]] []]
}
