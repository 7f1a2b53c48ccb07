package trainer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
)

// tinyConfig is policy/model's tiny (or tiny MoE) config shrunk for fast
// tests: vocabulary 64, width 32, 2 layers (the MoE one keeps layer 0
// dense, so one MoE layer of 4 experts, 2 per token).
func tinyConfig(t testing.TB, moe bool) model.Config {
	t.Helper()
	file := "tiny.json"
	if moe {
		file = "tiny_moe.json"
	}
	c, err := model.LoadConfig("../policy/model/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 64, 32, 64, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 2, 1, 16, 256
	if moe {
		c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize = 4, 2, 16
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func tinyModel(t testing.TB, moe bool, seed uint64) *model.Model {
	t.Helper()
	m, err := model.New(tinyConfig(t, moe), seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rolloutSpec describes one rollout of a test iteration.
type rolloutSpec struct {
	group    string
	reward   float64
	term     schemas.Termination // "" means agent_completed
	segments int                 // 0 means 1
}

// iteration is the rows of a test iteration.
type iteration struct {
	run      string
	iter     int
	rollouts []schemas.Rollout
	segments []schemas.Segment
}

// shape sizes the segments of a test iteration.
type shape struct {
	prompt, turns, sampled, obs int
	temperature                 float64
}

var smallShape = shape{prompt: 6, turns: 3, sampled: 5, obs: 3, temperature: 0.7}

// makeIteration builds valid rows whose rollout logprobs and routes are the
// model's own: each segment is a random prompt, then turns of sampled
// tokens (mask 1, logprob from m at the temperature, version `version`)
// with observation tokens (mask 0) between them.
func makeIteration(t testing.TB, m *model.Model, run string, iter int, version int64, sh shape, specs []rolloutSpec, seed uint64) *iteration {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	vocab := m.Config().VocabSize
	it := &iteration{run: run, iter: iter}
	var seqs []model.Sequence
	for i, sp := range specs {
		term := sp.term
		if term == "" {
			term = schemas.TerminationAgentCompleted
		}
		id := fmt.Sprintf("%s-i%d-r%03d", run, iter, i)
		r := schemas.Rollout{RunID: run, Iteration: int32(iter), TaskID: "task-" + sp.group, GroupID: sp.group,
			RolloutID: id, Harness: "bash", PolicyVersion: version, Status: term.Status(), Termination: term,
			F2PPassed: []string{}, F2PFailed: []string{}, P2PPassed: []string{}, P2PFailed: []string{}, Flags: []string{}}
		if r.Status == schemas.StatusCompleted {
			r.Reward = sp.reward
		}
		it.rollouts = append(it.rollouts, r)
		for k := 0; k < max(sp.segments, 1); k++ {
			s := schemas.Segment{RunID: run, Iteration: int32(iter), RolloutID: id, SegmentIndex: int32(k),
				PolicyVersion: version, FinishReason: "stop", Temperature: float32(sh.temperature), TopP: 1}
			for range sh.prompt {
				s.PromptTokenIDs = append(s.PromptTokenIDs, int32(rng.IntN(vocab)))
			}
			for turn := range sh.turns {
				n, mask, v := sh.sampled, int8(1), version
				if turn%2 == 1 {
					n, mask, v = sh.obs, 0, 0
				}
				for range n {
					s.CompletionTokenIDs = append(s.CompletionTokenIDs, int32(rng.IntN(vocab)))
					s.LossMask = append(s.LossMask, mask)
					s.PolicyVersions = append(s.PolicyVersions, v)
				}
			}
			it.segments = append(it.segments, s)
			seqs = append(seqs, model.Sequence{Prompt: s.PromptTokenIDs, Completion: s.CompletionTokenIDs, Temperature: sh.temperature})
		}
	}
	res, err := m.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range it.segments {
		s := &it.segments[i]
		s.Logprobs = make([]float32, len(s.CompletionTokenIDs))
		for j, mk := range s.LossMask {
			if mk == 1 {
				s.Logprobs[j] = res[i].Logprobs[j]
			}
		}
		if err := s.SetRoutes(res[i].Routing); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(vocab); err != nil {
			t.Fatal(err)
		}
	}
	return it
}

// commit writes the iteration's rollouts and segments as one file each
// and commits them in the rollout stage.
func (it *iteration) commit(t testing.TB, st storage.Store) storage.Manifest {
	t.Helper()
	ctx := context.Background()
	ref := storage.ManifestRef{RunID: it.run, Iteration: it.iter, Stage: "rollout"}
	foot := func(tab schemas.Table) schemas.Footer {
		return schemas.Footer{SchemaVersion: schemas.Version, Table: tab, RunID: it.run, CodeVersion: "test"}
	}
	fr, err := storage.WriteFile(ctx, st, ref.DataKey("rollouts", "0"), foot(schemas.TableRollouts), it.rollouts)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := storage.WriteFile(ctx, st, ref.DataKey("segments", "0"), foot(schemas.TableSegments), it.segments)
	if err != nil {
		t.Fatal(err)
	}
	man, err := storage.Commit(ctx, st, ref, []storage.FileEntry{fr, fs})
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// samples converts the iteration's segments of completed rollouts to
// samples the way Load does, without a store.
func (it *iteration) samples() []trainer.Sample {
	status := map[string]schemas.Rollout{}
	for _, r := range it.rollouts {
		status[r.RolloutID] = r
	}
	var out []trainer.Sample
	for i, s := range it.segments {
		r := status[s.RolloutID]
		if r.Status != schemas.StatusCompleted {
			continue
		}
		routes, _ := s.Routes()
		out = append(out, trainer.Sample{RolloutID: s.RolloutID, GroupID: r.GroupID, SegmentIndex: s.SegmentIndex,
			Prompt: s.PromptTokenIDs, Completion: s.CompletionTokenIDs, Mask: s.LossMask, Logprobs: s.Logprobs,
			Versions: s.PolicyVersions, Routes: routes, Temperature: float64(s.Temperature), Source: fmt.Sprintf("test row %d", i)})
	}
	return out
}

// groups returns rollout specs: for each reward list, one group.
func groups(rewards ...[]float64) []rolloutSpec {
	var out []rolloutSpec
	for g, rs := range rewards {
		for _, r := range rs {
			out = append(out, rolloutSpec{group: fmt.Sprintf("g%d", g), reward: r})
		}
	}
	return out
}

// data returns the iteration as Load would: samples of completed
// rollouts, their rewards, masked rollouts counted.
func (it *iteration) data() *trainer.Data {
	d := &trainer.Data{RunID: it.run, Iteration: it.iter, Samples: it.samples(), Masked: map[string]int{}}
	for _, r := range it.rollouts {
		if r.Status == schemas.StatusCompleted {
			d.Rollouts = append(d.Rollouts, trainer.RolloutReward{RolloutID: r.RolloutID, GroupID: r.GroupID, Reward: r.Reward})
		} else {
			d.Masked[string(r.Termination)]++
		}
	}
	return d
}
