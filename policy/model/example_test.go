package model_test

import (
	"fmt"
	"log"

	"github.com/legorl/legorl/policy/model"
)

// Example scores a completion with a randomly initialised MoE model, then
// replays the routing it reported, which gives the same logprobs.
func Example() {
	cfg, err := model.ParseConfig([]byte(`{"model_type":"qwen3_moe","vocab_size":32,"hidden_size":16,
		"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":8,
		"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":8,"norm_topk_prob":true}`))
	if err != nil {
		log.Fatal(err)
	}
	m, err := model.New(cfg, 1)
	if err != nil {
		log.Fatal(err)
	}
	seq := model.Sequence{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5}}
	res, err := m.Logprobs([]model.Sequence{seq})
	if err != nil {
		log.Fatal(err)
	}
	seq.Routing = res[0].Routing // [tokens][MoE layers][k]
	again, err := m.Logprobs([]model.Sequence{seq})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(res[0].Logprobs), len(res[0].Routing), len(res[0].Routing[0]), len(res[0].Routing[0][0]))
	fmt.Println(fmt.Sprint(res[0].Logprobs) == fmt.Sprint(again[0].Logprobs))
	// Output:
	// 2 5 2 2
	// true
}
