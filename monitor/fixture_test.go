package monitor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/synthstore"
)

// The fixture store holds runs the project itself produced: schemas/synth
// rows, validated, written through storage writers and committed in
// manifests as the pipeline and the trainer do (rollout stage: rollouts,
// two segments shards, steps; train stage: train_steps).
//
//   - "fixture": iterations 0-2 of a 4-iteration run (the live test commits
//     iteration 3). The first rollout of every iteration has a second
//     segment whose prompt rewrites the first's history: a fork.
//   - "collapse": 3 iterations; in iteration 2 the agents stop calling tools
//     (num_tool_calls 0) and stop viewing or running anything after edits.
//   - "broken": 2 iterations without train_steps; iteration 1's second
//     segments shard is altered on disk after its commit, and a manifest of
//     stage "extra" is not JSON.
const (
	runFixture  = "fixture"
	runCollapse = "collapse"
	runBroken   = "broken"
	vocab       = 1000
)

func fixtureConfig(run string, iters int) synth.Config {
	return synth.Config{RunID: run, Seed: 7, Iterations: iters, Tasks: 6, GroupSize: 4, Turns: 4,
		PromptTokens: 24, TurnTokens: 12, ObsTokens: 6, VocabSize: vocab, MoELayers: 2, TopK: 2, Experts: 8}
}

// fixtureRun returns the rows of a fixture run, with its changes applied.
func fixtureRun(run string) []synth.Iteration {
	switch run {
	case runFixture:
		its := synth.Run(fixtureConfig(run, 4))
		for i := range its {
			addFork(&its[i])
		}
		return its
	case runCollapse:
		its := synth.Run(fixtureConfig(run, 3))
		for i := range its[2].Rollouts {
			its[2].Rollouts[i].NumToolCalls = 0
		}
		for i := range its[2].Steps {
			if k := ToolKind(its[2].Steps[i].ToolName, ""); k == KindVerify {
				its[2].Steps[i].ToolName = "think"
			}
		}
		return its
	case runBroken:
		its := synth.Run(fixtureConfig(run, 2))
		for i := range its {
			its[i].TrainSteps = nil
		}
		return its
	}
	panic("unknown fixture run " + run)
}

// addFork gives the first rollout of the iteration a second segment that
// keeps 10 prompt tokens of the first and rewrites the rest.
func addFork(it *synth.Iteration) {
	first := it.Segments[0]
	r := &it.Rollouts[0]
	s := schemas.Segment{RunID: first.RunID, Iteration: first.Iteration, RolloutID: first.RolloutID, SegmentIndex: 1,
		FirstCall: r.NumLLMCalls, LastCall: r.NumLLMCalls, PolicyVersion: first.PolicyVersion, FinishReason: "stop",
		Temperature: 1, TopP: 1}
	s.PromptTokenIDs = append(append([]int32{}, first.PromptTokenIDs[:10]...), 1, 2, 3, 4, 5)
	for i := 0; i < 8; i++ {
		s.CompletionTokenIDs = append(s.CompletionTokenIDs, int32(100+i))
		s.LossMask = append(s.LossMask, 1)
		s.Logprobs = append(s.Logprobs, -0.25*float32(i%3))
		s.PolicyVersions = append(s.PolicyVersions, s.PolicyVersion)
	}
	s.RoutingLayers, s.RoutingTopK = first.RoutingLayers, first.RoutingTopK
	s.RoutingExperts = make([]int16, (len(s.PromptTokenIDs)+len(s.CompletionTokenIDs))*int(s.RoutingLayers*s.RoutingTopK))
	r.NumLLMCalls++
	it.Segments = append([]schemas.Segment{first, s}, it.Segments[1:]...)
}

// newFixtureStore writes every fixture run into a new file store.
func newFixtureStore(t testing.TB) (*storage.FileStore, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, run := range []string{runFixture, runCollapse, runBroken} {
		its := fixtureRun(run)
		n := len(its)
		if run == runFixture {
			n = 3
		}
		for i := 0; i < n; i++ {
			writeIteration(t, st, run, i, its[i])
		}
	}
	// Break "broken": alter a committed file, commit a manifest that is not JSON.
	files, err := storage.TableFiles(ctx, st, runBroken, "segments")
	if err != nil {
		t.Fatal(err)
	}
	bad := files[len(files)-1]
	path := filepath.Join(dir, filepath.FromSlash(bad.Key))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := storage.ManifestRef{RunID: runBroken, Iteration: 1, Stage: "extra"}
	garbage := []byte("{not json")
	if err := st.Put(ctx, ref.Key(1), bytesReader(garbage), int64(len(garbage))); err != nil {
		t.Fatal(err)
	}
	return st, bad.Key
}

// writeIteration validates and writes one iteration as the pipeline and
// the trainer do (synthstore.WriteIteration).
func writeIteration(t testing.TB, st storage.Store, run string, iter int, it synth.Iteration) {
	t.Helper()
	if _, err := synthstore.WriteIteration(context.Background(), st, run, iter, it,
		synthstore.Options{ConfigHash: "fixture", CodeVersion: "test", VocabSize: vocab}); err != nil {
		t.Fatal(err)
	}
}

// allRollouts flattens the rollouts of the first n iterations.
func allRollouts(its []synth.Iteration, n int) []schemas.Rollout {
	var out []schemas.Rollout
	for _, it := range its[:n] {
		out = append(out, it.Rollouts...)
	}
	return out
}

// fakeRecomputed returns the rollout logprobs of every segment of the
// fixture, shifted by (t%3 - 1) / 100: the trainer's recomputation as a
// test can predict it.
type fakeRecomputed struct{ its []synth.Iteration }

func shift(t int) float32 { return float32(t%3-1) / 100 }

func (f fakeRecomputed) Recomputed(ctx context.Context, run string, iter int) (*Recomputed, error) {
	if run != runFixture || iter >= 2 {
		return nil, fmt.Errorf("%w: run %s iteration %d", ErrNoRecomputed, run, iter)
	}
	out := &Recomputed{Source: "fake/iter-" + fmt.Sprint(iter), Logprobs: map[SegmentRef][]float32{}}
	for _, s := range f.its[iter].Segments {
		r := make([]float32, len(s.Logprobs))
		for t := range r {
			r[t] = s.Logprobs[t] + shift(t)
		}
		out.Logprobs[SegmentRef{s.RolloutID, s.SegmentIndex}] = r
	}
	return out, nil
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
