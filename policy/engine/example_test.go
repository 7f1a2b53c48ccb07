package engine_test

import (
	"context"
	"fmt"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
)

// A session of two requests: the second prompt extends the first prompt
// and its completion, so only its new tokens are prefilled.
func Example() {
	cfg, err := model.LoadConfig("../model/testdata/tiny.json")
	if err != nil {
		panic(err)
	}
	m, err := model.New(cfg, 1)
	if err != nil {
		panic(err)
	}
	e := engine.New(m, 1, engine.Options{})
	defer e.Close()

	prompt := []int32{1, 2, 3, 4}
	req := engine.Request{Session: "rollout-1", Prompt: prompt, MaxTokens: 5, Sampling: engine.DefaultSampling(42)}
	g, err := e.Generate(context.Background(), req, func(t engine.Token) { _ = t.ID /* stream it */ })
	if err != nil {
		panic(err)
	}
	fmt.Println(len(g.Tokens), g.Finish, g.Versions[0])

	req.Prompt = append(append(prompt, g.Tokens...), 5, 6)
	g, err = e.Generate(context.Background(), req, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(g.PromptTokens, g.CachedTokens)
	// Output:
	// 5 length 1
	// 11 9
}
