package proxy

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
)

// The local engine is a Generator, and frees a finished rollout's cache.
var (
	_ Generator    = (*engine.Engine)(nil)
	_ sessionEnder = (*engine.Engine)(nil)
)

// tinyConfig is a random-weight Qwen3 small enough for a unit test, over
// the test tokenizer's 1000 ids; moe adds 8 experts (top 2) to layers 1-2.
func tinyConfig(t testing.TB, moe bool) model.Config {
	t.Helper()
	cfg := map[string]any{
		"architectures": []string{"Qwen3ForCausalLM"}, "model_type": "qwen3",
		"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
		"rms_norm_eps": 1e-6, "rope_theta": 1000000, "max_position_embeddings": 2048,
		"tie_word_embeddings": true, "attention_bias": false, "rope_scaling": nil, "torch_dtype": "float32",
	}
	if moe {
		cfg["architectures"], cfg["model_type"] = []string{"Qwen3MoeForCausalLM"}, "qwen3_moe"
		cfg["num_experts"], cfg["num_experts_per_tok"], cfg["norm_topk_prob"] = 8, 2, true
		cfg["moe_intermediate_size"], cfg["decoder_sparse_step"], cfg["mlp_only_layers"] = 32, 1, []int{0}
		cfg["tie_word_embeddings"] = false
	}
	b, _ := json.Marshal(cfg)
	c, err := model.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRealEngine drives the proxy, backed by the engine over a
// random-weight model, with the OpenAI SDK for three turns (streamed and
// not), and checks that the recorded completion ids decode to exactly what
// the client received, with the engine's logprobs, versions and routing.
func TestRealEngine(t *testing.T) {
	for _, moe := range []bool{false, true} {
		t.Run(map[bool]string{false: "dense", true: "moe"}[moe], func(t *testing.T) {
			tok := testTokenizer(t)
			m, err := model.New(tinyConfig(t, moe), 7)
			if err != nil {
				t.Fatal(err)
			}
			e := engine.New(m, 5, engine.Options{})
			t.Cleanup(e.Close)
			p, srv := testProxy(t, e)
			client := openaiClient(srv.URL, "r1")
			params := openai.ChatCompletionNewParams{
				Model:               "tiny",
				MaxCompletionTokens: openai.Int(12),
				Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("You are a coding agent."),
					openai.UserMessage("Fix the bug."),
				},
				Tools: []openai.ChatCompletionToolUnionParam{bashTool},
			}
			var got []received
			for turn := 0; turn < 3; turn++ {
				r, asst := chatCall(t, client, params, turn == 1)
				got = append(got, r)
				params.Messages = append(params.Messages, asst, openai.UserMessage("Go on."))
			}
			rec := finish(t, p, "r1")
			var runs [][]int32
			for i, s := range rec.Segments {
				runs = append(runs, sampledRuns(s.CompletionTokenIDs, s.LossMask)...)
				if s.PolicyVersion != 5 {
					t.Errorf("segment %d: policy version %d", i, s.PolicyVersion)
				}
				negative := false
				for j, lp := range s.Logprobs {
					negative = negative || lp < 0
					if s.LossMask[j] == 1 && s.PolicyVersions[j] != 5 {
						t.Fatalf("segment %d token %d: version %d", i, j, s.PolicyVersions[j])
					}
				}
				if !negative {
					t.Errorf("segment %d: no negative logprob: not sampled at temperature 1?", i)
				}
				routes, err := s.Routes()
				if err != nil {
					t.Fatal(err)
				}
				if moe && (routes.Layers != 2 || routes.K != 2) || !moe && !routes.Empty() {
					t.Errorf("segment %d: routing %d layers x %d", i, routes.Layers, routes.K)
				}
			}
			if len(runs) != len(got) {
				t.Fatalf("%d sampled runs for %d calls (%+v)", len(runs), len(got), rec.Info)
			}
			tools := []chat.Tool{{Name: "bash"}}
			for i, r := range got {
				if r.usage.CompletionTokens != len(runs[i]) {
					t.Errorf("call %d: usage says %d tokens, %d recorded", i, r.usage.CompletionTokens, len(runs[i]))
				}
				parsed := chat.Qwen3{}.Parse(decode(t, tok, runs[i]), tools)
				if i == 1 && rec.Metrics.StreamMismatches > 0 {
					continue // malformed markup: the stream could not know
				}
				// Bytes that are not UTF-8 (a random model writes them)
				// reach a JSON client as U+FFFD, one per byte.
				wantC, wantR := jsonString(t, parsed.Content), jsonString(t, parsed.Reasoning)
				if r.msg.Content != wantC || r.msg.ReasoningContent != wantR || len(r.msg.ToolCalls) != len(parsed.ToolCalls) {
					t.Errorf("call %d: the client got content %q reasoning %q, the recorded ids parse to %q %q",
						i, r.msg.Content, r.msg.ReasoningContent, wantC, wantR)
				}
			}
			if m := rec.Metrics; m.Calls != 3 || m.Failed != 0 || m.BadOutput {
				t.Errorf("metrics %+v", m)
			}
		})
	}
}

// jsonString is s as a JSON client receives it.
func jsonString(t testing.TB, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
