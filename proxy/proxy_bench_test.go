package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/tokenizer"
)

// benchBody turns policy/chat's 20-turn agent conversation (42 messages,
// two tools, about 47 kB) into a Chat Completions request body, with tool
// arguments as JSON strings as clients send them. It also returns the body
// without the last assistant turn and what follows it.
func benchBody(b *testing.B) (full, prefix []byte) {
	b.Helper()
	msgs, tools := wireConversation(b)
	last := len(msgs) - 1
	for last >= 0 && msgs[last]["role"] != "assistant" {
		last--
	}
	return wireBody(b, msgs, tools), wireBody(b, msgs[:last], tools)
}

// appendTurn is the completion that makes the full body extend the prefix
// body: the last assistant turn as the template renders it, as token ids.
func appendTurn(b *testing.B, tok *tokenizer.Tokenizer, full, prefix []byte) []int32 {
	b.Helper()
	fullTurn, e1 := chatFormat{}.decode(full)
	prefixTurn, e2 := chatFormat{}.decode(prefix)
	if e1 != nil || e2 != nil {
		b.Fatal(e1, e2)
	}
	before, _ := chat.Qwen3{}.Render(prefixTurn.Messages, prefixTurn.Tools, chat.Options{AddGenerationPrompt: true})
	after, _ := chat.Qwen3{}.Render(fullTurn.Messages[:len(prefixTurn.Messages)+1], fullTurn.Tools, chat.Options{})
	return tok.EncodeSpecial(after[len(before) : len(after)-1])
}

// fixedGen returns the ids in next at once, as one generation.
type fixedGen struct{ next []int32 }

func (g *fixedGen) Generate(_ context.Context, req infer.Request, emit func(infer.Token)) (infer.Generation, error) {
	out := infer.Generation{Tokens: g.next, Finish: infer.FinishStop, PromptTokens: len(req.Prompt)}
	for _, id := range g.next {
		emit(infer.Token{ID: id, Logprob: -1, Version: 1})
		out.Logprobs = append(out.Logprobs, -1)
		out.Versions = append(out.Versions, 1)
	}
	return out, nil
}

// BenchmarkCall measures one non-streamed Chat Completions call through
// HTTP with the 20-turn body, generation excluded (the generator answers at
// once with 24 tokens), against an anchor: the same round trip to a handler
// that reads the body and writes a canned reply. p50 and p99 are per call.
//
//   - append: the call extends its segment (the steady state): the proxy
//     renders the whole conversation but tokenizes only the new suffix.
//   - fresh: the call starts a rollout (or a fork): the whole prompt is
//     tokenized.
func BenchmarkCall(b *testing.B) {
	full, prefix := benchBody(b)
	tok := testTokenizer(b)
	gen := &fixedGen{}
	p, err := New(Options{Generator: gen, Tokenizer: tok, Template: chat.Qwen3{}, ModelName: "tiny",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	answer := tok.EncodeSpecial("<think>\nThe tests pass now.\n</think>\n\nThe bug is fixed; all tests pass.<|im_end|>")

	lastTurn := appendTurn(b, tok, full, prefix)

	canned, err := json.Marshal(chatCompletion{ID: "chatcmpl-x", Object: "chat.completion", Model: "tiny",
		Choices: []chatChoice{{Message: &chatMessageOut{Role: "assistant", Content: ptr("The bug is fixed; all tests pass."), ReasoningContent: "The tests pass now."}, FinishReason: ptr("stop")}},
		Usage:   chatUsageOf(Usage{PromptTokens: 12000, CompletionTokens: 24})})
	if err != nil {
		b.Fatal(err)
	}
	anchor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(canned)
	}))
	defer anchor.Close()

	client := &http.Client{}
	post := func(b *testing.B, url string, body []byte) {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	run := func(name string, setup func(b *testing.B, i int) string, check func(b *testing.B, i int)) {
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(len(full)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				url := setup(b, i)
				b.StartTimer()
				t0 := time.Now()
				post(b, url, full)
				lat = append(lat, time.Since(t0))
				b.StopTimer()
				check(b, i)
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-us")
		})
	}
	rollout := func(i int) string { return fmt.Sprintf("bench-%d", i) }
	open := func(b *testing.B, i int) string {
		if err := p.Open(rollout(i), RolloutOptions{RunID: "bench"}); err != nil {
			b.Fatal(err)
		}
		return srv.URL + "/rollout/" + rollout(i) + "/v1/chat/completions"
	}
	wantSegments := func(n int) func(b *testing.B, i int) {
		return func(b *testing.B, i int) {
			rec, err := p.Finish(rollout(i))
			if err != nil {
				b.Fatal(err)
			}
			if len(rec.Segments) != 1 || rec.Metrics.Calls != n {
				b.Fatalf("%d segments (%+v), %d calls", len(rec.Segments), rec.Info, rec.Metrics.Calls)
			}
		}
	}
	run("anchor", func(*testing.B, int) string { return anchor.URL + "/v1/chat/completions" }, func(*testing.B, int) {})
	run("append", func(b *testing.B, i int) string {
		url := open(b, i)
		gen.next = lastTurn
		post(b, url, prefix)
		gen.next = answer
		return url
	}, wantSegments(2))
	run("fresh", func(b *testing.B, i int) string {
		gen.next = answer
		return open(b, i)
	}, wantSegments(1))
}
