package handoff_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/handoff"
	"github.com/legorl/legorl/storage/synthstore"
)

// smallRun writes a synthetic MoE run (two iterations, 3 tasks x 2
// rollouts, with masked rollouts among them) to a file store and returns
// the store and its rows.
func smallRun(t *testing.T) (storage.Store, []synth.Iteration) {
	t.Helper()
	ctx := context.Background()
	cfg := synth.Config{RunID: "r", Seed: 7, Iterations: 2, Tasks: 3, GroupSize: 2, Turns: 2,
		PromptTokens: 5, TurnTokens: 4, ObsTokens: 3, VocabSize: 1000, MoELayers: 2, TopK: 3, Experts: 16}
	its := synth.Run(cfg)
	// At least one masked rollout, whatever the seed gives.
	r := &its[1].Rollouts[0]
	r.Termination, r.Status, r.Reward = schemas.TerminationTimeout, schemas.StatusMasked, 0
	st, err := storage.Open(ctx, "file://"+filepath.Join(t.TempDir(), "store"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range its {
		if _, err := synthstore.WriteIteration(ctx, st, "r", i, it, synthstore.Options{VocabSize: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	return st, its
}

// python is Debian's python3, where make torch-ref installs PyTorch, if
// present; python3 on PATH otherwise.
func python() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// expected indexes the run's segments and rollouts by rollout id.
func expected(its []synth.Iteration) (map[string]schemas.Segment, map[string]schemas.Rollout) {
	segs, rolls := map[string]schemas.Segment{}, map[string]schemas.Rollout{}
	for _, it := range its {
		for _, s := range it.Segments {
			segs[s.RolloutID] = s
		}
		for _, r := range it.Rollouts {
			rolls[r.RolloutID] = r
		}
	}
	return segs, rolls
}

// TestExportSlime exports a run for slime and reads each file back in
// Python as slime does (torch.load where PyTorch is installed, which CI
// requires; zipfile and pickle otherwise), checking slime's invariants
// there and the values against the store here.
func TestExportSlime(t *testing.T) {
	st, its := smallRun(t)
	dir := filepath.Join(t.TempDir(), "slime")
	sum, err := handoff.Export(context.Background(), st, "r", handoff.Slime, dir)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 2 || sum.Samples != 12 || sum.Masked < 1 {
		t.Fatalf("summary %+v, want 2 files, 12 samples, some masked", sum)
	}
	segs, rolls := expected(its)
	seen := map[string]bool{}
	for it, path := range sum.Paths {
		if filepath.Base(path) != []string{"0.pt", "1.pt"}[it] {
			t.Errorf("file %s", path)
		}
		out, err := exec.Command(python(), "testdata/check_slime.py", path).CombinedOutput()
		if err != nil {
			t.Fatalf("check_slime.py %s: %v\n%s", path, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if os.Getenv("CI") == "true" && lines[0] != "torch" {
			t.Fatalf("read with %s: CI needs PyTorch (make torch-ref) to read the file as slime does", lines[0])
		}
		t.Logf("%s read with %s", path, lines[0])
		lastGroup := -1
		for i, l := range lines[1:] {
			var got struct {
				RolloutID, Index, GroupIndex, SampleRolloutID int `json:"-"`
				Tokens, ResponseLength, MaskSum               int
				FirstToken, LastToken                         int32
				LogprobSum, Reward                            float64
				RemoveSample                                  bool
				Status                                        string
				RoutingShape                                  []int
				FirstExpert                                   int16
				LegorlRolloutID                               string
			}
			var raw map[string]any
			if err := json.Unmarshal([]byte(l), &raw); err != nil {
				t.Fatal(err)
			}
			got.RolloutID, got.Index, got.GroupIndex = int(raw["rollout_id"].(float64)), int(raw["index"].(float64)), int(raw["group_index"].(float64))
			got.Tokens, got.ResponseLength, got.MaskSum = int(raw["tokens"].(float64)), int(raw["response_length"].(float64)), int(raw["mask_sum"].(float64))
			got.FirstToken, got.LastToken = int32(raw["first_token"].(float64)), int32(raw["last_token"].(float64))
			got.LogprobSum, got.Reward = raw["logprob_sum"].(float64), raw["reward"].(float64)
			got.RemoveSample, got.Status = raw["remove_sample"].(bool), raw["status"].(string)
			got.LegorlRolloutID = raw["legorl_rollout_id"].(string)
			for _, v := range raw["routing_shape"].([]any) {
				got.RoutingShape = append(got.RoutingShape, int(v.(float64)))
			}
			got.FirstExpert = int16(raw["first_expert"].(float64))

			s, r := segs[got.LegorlRolloutID], rolls[got.LegorlRolloutID]
			seen[got.LegorlRolloutID] = true
			n := len(s.CompletionTokenIDs)
			tokens := len(s.PromptTokenIDs) + n
			var mask int
			var lps float64
			for j := range s.LossMask {
				mask += int(s.LossMask[j])
				lps += float64(s.Logprobs[j])
			}
			masked := r.Status == schemas.StatusMasked
			if got.RolloutID != it || got.Index != i || got.Tokens != tokens || got.ResponseLength != n ||
				got.FirstToken != s.PromptTokenIDs[0] || got.LastToken != s.CompletionTokenIDs[n-1] ||
				got.MaskSum != mask || math.Abs(got.LogprobSum-lps) > 1e-4 || got.Reward != r.Reward ||
				got.RemoveSample != masked || (masked && got.Status != "aborted") ||
				len(got.RoutingShape) != 3 || got.RoutingShape[0] != tokens-1 || got.RoutingShape[1] != 2 || got.RoutingShape[2] != 3 ||
				got.FirstExpert != s.RoutingExperts[0] {
				t.Errorf("%s sample %d: %+v; store: %d tokens, %d response, mask %d, logprobs %.4f, reward %v, status %s",
					path, i, got, tokens, n, mask, lps, r.Reward, r.Status)
			}
			if got.GroupIndex < lastGroup {
				t.Errorf("%s sample %d: group %d after group %d: a group's samples must be adjacent", path, i, got.GroupIndex, lastGroup)
			}
			lastGroup = got.GroupIndex
		}
	}
	if len(seen) != len(segs) {
		t.Errorf("%d of %d rollouts exported", len(seen), len(segs))
	}
}

// TestExportVerl exports a run for verl and decodes each line as an
// AgentLoopOutput, checking each field against the store.
func TestExportVerl(t *testing.T) {
	st, its := smallRun(t)
	dir := filepath.Join(t.TempDir(), "verl")
	sum, err := handoff.Export(context.Background(), st, "r", handoff.Verl, dir)
	if err != nil {
		t.Fatal(err)
	}
	segs, rolls := expected(its)
	n := 0
	for _, path := range sum.Paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			n++
			var o struct {
				PromptIDs        []int32          `json:"prompt_ids"`
				ResponseIDs      []int32          `json:"response_ids"`
				ResponseMask     []int8           `json:"response_mask"`
				ResponseLogprobs []float32        `json:"response_logprobs"`
				RoutedExperts    [][][]int16      `json:"routed_experts"`
				RewardScore      *float64         `json:"reward_score"`
				NumTurns         int32            `json:"num_turns"`
				Metrics          *json.RawMessage `json:"metrics"`
				ExtraFields      map[string]any   `json:"extra_fields"`
			}
			if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
				t.Fatal(err)
			}
			id, _ := o.ExtraFields["legorl_rollout_id"].(string)
			s, r := segs[id], rolls[id]
			masked := r.Status == schemas.StatusMasked
			wantMask := s.LossMask
			if masked {
				wantMask = make([]int8, len(s.LossMask))
			}
			var routes schemas.Segment
			routes.PromptTokenIDs, routes.CompletionTokenIDs = o.PromptIDs, o.ResponseIDs
			if err := routes.SetRoutes(o.RoutedExperts); err != nil {
				t.Fatal(err)
			}
			if !equal(o.PromptIDs, s.PromptTokenIDs) || !equal(o.ResponseIDs, s.CompletionTokenIDs) ||
				!equal(o.ResponseMask, wantMask) || !equal(o.ResponseLogprobs, s.Logprobs) ||
				!equal(routes.RoutingExperts, s.RoutingExperts) || len(o.RoutedExperts) != len(s.PromptTokenIDs)+len(s.CompletionTokenIDs) ||
				o.RewardScore == nil || *o.RewardScore != r.Reward || o.NumTurns != r.NumTurns || o.Metrics == nil ||
				o.ExtraFields["legorl_status"] != string(r.Status) {
				t.Errorf("%s line %d (rollout %q) differs from the store", path, n, id)
			}
		}
		f.Close()
	}
	if n != len(segs) {
		t.Errorf("%d lines, want %d", n, len(segs))
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestExportErrors(t *testing.T) {
	st, _ := smallRun(t)
	if _, err := handoff.Export(context.Background(), st, "nope", handoff.Verl, t.TempDir()); !errors.Is(err, storage.ErrNoData) {
		t.Errorf("missing run: %v", err)
	}
	if _, err := handoff.ParseFormat("megatron"); !errors.Is(err, handoff.ErrFormat) {
		t.Errorf("unknown format: %v", err)
	}
	_, err := handoff.Join(nil, []schemas.Segment{{RunID: "r", RolloutID: "x"}})
	if !errors.Is(err, handoff.ErrJoin) {
		t.Errorf("segment without rollout: %v", err)
	}
}
