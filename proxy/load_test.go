package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/tokenizer"
)

// TestLoad: 64 concurrent rollouts make 10,000 model calls through the
// proxy to the real engine (a random tiny model), each rollout 5 calls
// deep before it finishes and the next opens. Afterwards no rollout,
// engine session, goroutine or file descriptor is left over, and the heap
// after the last call is within bounds of the heap after the first
// quarter (no per-call growth). Every rollout's record is checked as it
// finishes (ownRecord): it holds exactly its own calls, its own system
// prompt and, for every sampled token, the logprob the model gives it in
// that rollout's context, so turns or tokens attributed to the wrong
// rollout fail the test. The figures are logged for docs/PERFORMANCE.md;
// nothing here is timed.
func TestLoad(t *testing.T) {
	const workers, calls, depth = 64, 10000, 5
	if testing.Short() {
		t.Skip("the load test makes 10,000 calls")
	}
	m, err := model.New(tinyConfig(t, false), 7)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	em := engine.NewMetrics(reg)
	ref, err := model.New(tinyConfig(t, false), 7) // the same weights, to recompute the recorded logprobs
	if err != nil {
		t.Fatal(err)
	}
	var refMu sync.Mutex
	tok := testTokenizer(t)
	e := engine.New(m, 1, engine.Options{Metrics: em})
	defer e.Close()
	p, srv := testProxy(t, e, func(o *Options) { o.ServerMetrics = NewServerMetrics(reg) })
	finish(t, p, "r1") // testProxy opens r1
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()

	p.mu.Lock()
	openBefore := len(p.rollouts) // the default rollout
	p.mu.Unlock()
	runtime.GC()
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	var (
		mu       sync.Mutex
		done     int
		heapQ    uint64 // heap in use after the first quarter of the calls
		failures []string
		records  = map[string]int{} // segments of each rollout's record, all checked
	)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; ; r++ {
				mu.Lock()
				if done >= calls || len(failures) > 0 {
					mu.Unlock()
					return
				}
				mu.Unlock()
				id := fmt.Sprintf("w%d-r%d", w, r)
				if err := p.Open(id, RolloutOptions{RunID: "load", Seed: uint64(w*1000 + r)}); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				msgs := []map[string]any{{"role": "system", "content": "You fix bugs in " + id + "."}, {"role": "user", "content": "Fix it."}}
				for range depth {
					reply, err := loadCall(client, srv.URL+"/rollout/"+id+"/v1/chat/completions", msgs)
					mu.Lock()
					if err != nil {
						failures = append(failures, err.Error())
					}
					done++
					quarter := done == calls/4
					mu.Unlock()
					if err != nil {
						return
					}
					if quarter {
						h := heap()
						mu.Lock()
						heapQ = h
						mu.Unlock()
					}
					msgs = append(msgs, map[string]any{"role": "assistant", "content": reply}, map[string]any{"role": "user", "content": "Go on."})
				}
				rec, err := p.Finish(id)
				if err == nil {
					err = ownRecord(&refMu, ref, tok, rec, id, depth)
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				} else if records[id] = len(rec.Segments); records[id] == 0 {
					failures = append(failures, id+": no segment")
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, the first: %s", len(failures), failures[0])
	}
	client.CloseIdleConnections()
	heapEnd := heap()

	p.mu.Lock()
	open := len(p.rollouts)
	p.mu.Unlock()
	if open != openBefore {
		t.Errorf("%d rollouts open after the load, %d before", open, openBefore)
	}
	// The engine's gauges are synced by its loop after a step; wait for it.
	settle(t, "engine sessions and sequences back to 0", func() bool {
		return gauge(t, reg, "legorl_engine_sessions") == 0 && gauge(t, reg, "legorl_engine_running_sequences") == 0
	})
	var g, f int
	settle(t, "goroutines and file descriptors back", func() bool {
		g, f = runtime.NumGoroutine(), openFDs(t)
		return g <= goroutines+2 && f <= fds+2
	})
	if heapEnd > heapQ+heapQ/2+8<<20 {
		t.Errorf("heap in use %d MiB after %d calls, %d MiB after %d: growing with the calls", heapEnd>>20, calls, heapQ>>20, calls/4)
	}
	if len(records) != done/depth {
		t.Errorf("%d records checked, want one per rollout (%d)", len(records), done/depth)
	}
	t.Logf("%d calls by %d concurrent rollouts (%d deep), %d records each its own: heap in use %.1f MiB after %d calls, %.1f MiB after all; goroutines %d -> %d, fds %d -> %d",
		done, workers, depth, len(records), float64(heapQ)/(1<<20), calls/4, float64(heapEnd)/(1<<20), goroutines, g, fds, f)
}

// ownRecord checks that rec is rollout id's own: every segment carries
// its id, the first prompt holds its own system prompt, its segments cover
// its calls 0 to calls-1, and every sampled token's recorded logprob is the
// one ref (the engine's weights) gives that token after that segment's
// tokens: a turn or token of another rollout, whose context differs, would
// not match.
func ownRecord(mu *sync.Mutex, ref *model.Model, tok *tokenizer.Tokenizer, rec Record, id string, calls int) error {
	if rec.RolloutID != id || len(rec.Segments) == 0 {
		return fmt.Errorf("%s: record of %q with %d segments", id, rec.RolloutID, len(rec.Segments))
	}
	prompt, err := tok.Decode(rec.Segments[0].PromptTokenIDs)
	if err != nil || !strings.Contains(string(prompt), "You fix bugs in "+id+".") {
		return fmt.Errorf("%s: first prompt %q (%v) is not its own", id, prompt, err)
	}
	last := int32(-1)
	for k, sg := range rec.Segments {
		if sg.RolloutID != id || sg.RunID != "load" {
			return fmt.Errorf("%s: segment %d of rollout %q, run %q", id, k, sg.RolloutID, sg.RunID)
		}
		last = max(last, sg.LastCall)
		mu.Lock()
		r, err := ref.Logprobs([]model.Sequence{{Prompt: sg.PromptTokenIDs, Completion: sg.CompletionTokenIDs}})
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("%s: segment %d: %v", id, k, err)
		}
		for j, m := range sg.LossMask {
			if m == 0 {
				continue
			}
			if d := float64(r[0].Logprobs[j] - sg.Logprobs[j]); d > 1e-3 || d < -1e-3 {
				return fmt.Errorf("%s: segment %d token %d (id %d): logprob %v recorded, %v in this rollout's context", id, k, j, sg.CompletionTokenIDs[j], sg.Logprobs[j], r[0].Logprobs[j])
			}
		}
	}
	if last != int32(calls-1) {
		return fmt.Errorf("%s: segments end at call %d, the rollout made %d calls", id, last, calls)
	}
	return nil
}

// loadCall posts one chat call and returns the reply's text.
func loadCall(c *http.Client, url string, msgs []map[string]any) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 4})
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
		return "", fmt.Errorf("reply %q: %v", b, err)
	}
	return strings.ToValidUTF8(r.Choices[0].Message.Content, ""), nil
}

// gauge reads a gauge without labels from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settle polls cond for up to 10 s.
func settle(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Errorf("not settled: %s", what)
			return
		}
	}
}
