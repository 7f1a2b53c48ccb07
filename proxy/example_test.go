package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
)

// fixed is a Generator that always answers the same text.
type fixed struct {
	tok  *tokenizer.Tokenizer
	text string
}

func (f fixed) Generate(_ context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	g := infer.Generation{Finish: infer.FinishStop, PromptTokens: len(req.Prompt)}
	for _, id := range f.tok.EncodeSpecial(f.text) {
		emit(infer.Token{ID: id, Logprob: -0.5, Version: 1})
		g.Tokens, g.Logprobs, g.Versions = append(g.Tokens, id), append(g.Logprobs, -0.5), append(g.Versions, 1)
	}
	return g, nil
}

// A rollout's life: open it, let the harness call its base URL, finish it
// and take the recorded segments.
func Example() {
	tok, err := tokenizer.Load("../policy/tokenizer/testdata/small/tokenizer.json")
	if err != nil {
		panic(err)
	}
	p, err := proxy.New(proxy.Options{Generator: fixed{tok, "<think>\n\n</think>\n\nHello!<|im_end|>"}, Tokenizer: tok, Template: chat.Qwen3{}, ModelName: "tiny"})
	if err != nil {
		panic(err)
	}
	if err := p.Open("r1", proxy.RolloutOptions{RunID: "run", Seed: 1}); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	// The harness's base URL is srv.URL + "/rollout/r1/v1".
	resp, err := http.Post(srv.URL+"/rollout/r1/v1/chat/completions", "application/json",
		strings.NewReader(`{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var reply struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		panic(err)
	}
	fmt.Println(reply.Choices[0].Message.Content)

	rec, err := p.Finish("r1")
	if err != nil {
		panic(err)
	}
	seg := rec.Segments[0]
	sampled := 0
	for _, m := range seg.LossMask {
		sampled += int(m)
	}
	fmt.Printf("%d segment, %d call, %d sampled tokens of %d\n", len(rec.Segments), rec.Metrics.Calls, sampled, len(seg.CompletionTokenIDs))
	// Output:
	// Hello!
	// 1 segment, 1 call, 8 sampled tokens of 8
}
