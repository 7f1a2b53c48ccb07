package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/chat"
)

// BenchmarkAppendHandler serves BenchmarkCall's append call in-process
// (ServeHTTP on a recorder, no network): the proxy's own work for a call
// that extends its segment, generation excluded. The timed call runs under
// the pprof label call=append, so that a CPU profile can leave out the
// untimed first call of each rollout:
//
//	go test -run '^$' -bench AppendHandler -benchtime 4000x -cpuprofile /tmp/c.out ./proxy
//	go tool pprof -top -tagfocus=call=append /tmp/c.out
func BenchmarkAppendHandler(b *testing.B) {
	full, prefix := benchBody(b)
	tok := testTokenizer(b)
	gen := &fixedGen{}
	p, err := New(Options{Generator: gen, Tokenizer: tok, Template: chat.Qwen3{}, ModelName: "tiny",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	answer := tok.EncodeSpecial("<think>\nThe tests pass now.\n</think>\n\nThe bug is fixed; all tests pass.<|im_end|>")
	lastTurn := appendTurn(b, tok, full, prefix)
	post := func(url string, body []byte) {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("POST", url, bytes.NewReader(body)))
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	labels := pprof.Labels("call", "append")
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		id := fmt.Sprintf("bench-%d", i)
		if err := p.Open(id, RolloutOptions{RunID: "bench"}); err != nil {
			b.Fatal(err)
		}
		url := "/rollout/" + id + "/v1/chat/completions"
		gen.next = lastTurn
		post(url, prefix)
		gen.next = answer
		b.StartTimer()
		t0 := time.Now()
		pprof.Do(context.Background(), labels, func(context.Context) { post(url, full) })
		lat = append(lat, time.Since(t0))
		b.StopTimer()
		rec, err := p.Finish(id)
		if err != nil || len(rec.Segments) != 1 || rec.Metrics.Calls != 2 {
			b.Fatalf("%d segments (%+v), err %v", len(rec.Segments), rec.Info, err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
}
