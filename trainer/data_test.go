package trainer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
)

func fileStore(t *testing.T) (*storage.FileStore, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

func TestLoad(t *testing.T) {
	m := tinyModel(t, true, 1)
	specs := []rolloutSpec{
		{group: "a", reward: 1, segments: 2}, {group: "a", reward: 0},
		{group: "a", term: schemas.TerminationTimeout, segments: 2},
		{group: "b", reward: 1}, {group: "b", term: schemas.TerminationSandboxCrash},
		{group: "b", term: schemas.TerminationTimeout}, {group: "b", reward: 0, term: schemas.TerminationMaxTurns},
	}
	it := makeIteration(t, m, "load", 3, 2, smallShape, specs, 5)
	st, root := fileStore(t)
	it.commit(t, st)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	d, err := trainer.Load(context.Background(), st, "load", 3, trainer.LoadOptions{Model: m.Config(), Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"timeout": 2, "sandbox_crash": 1}; !reflect.DeepEqual(d.Masked, want) {
		t.Errorf("masked by reason %v, want %v", d.Masked, want)
	}
	if d.MaskedSegments != 4 || len(d.Rollouts) != 4 || len(d.Samples) != 5 {
		t.Errorf("%d masked segments, %d rollouts, %d samples; want 4, 4, 5", d.MaskedSegments, len(d.Rollouts), len(d.Samples))
	}
	want := it.samples()
	for i := range want {
		want[i].Source = d.Samples[i].Source
	}
	if !reflect.DeepEqual(d.Samples, want) {
		t.Errorf("samples differ from the rows written:\n got %+v\nwant %+v", d.Samples[0], want[0])
	}
	if !strings.HasSuffix(d.Samples[1].Source, "segments/iter-000003/rollout-0.parquet row 1") {
		t.Errorf("source %q", d.Samples[1].Source)
	}
	ref := storage.ManifestRef{RunID: "load", Iteration: 3, Stage: "rollout"}
	b, err := os.ReadFile(filepath.Join(root, ref.Key(1)))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if d.Manifest.Key != ref.Key(1) || d.Manifest.SHA256 != hex.EncodeToString(sum[:]) || len(d.Manifest.Files) != 2 {
		t.Errorf("manifest use %+v", d.Manifest)
	}
}

func TestLoadBadInput(t *testing.T) {
	m := tinyModel(t, true, 1)
	segKey := storage.ManifestRef{RunID: "bad", Stage: "rollout"}.DataKey("segments", "0")
	rolKey := storage.ManifestRef{RunID: "bad", Stage: "rollout"}.DataKey("rollouts", "0")
	tests := []struct {
		name  string
		rows  func(*iteration)                // edits the rows before writing
		files func(t *testing.T, root string) // edits the store after the commit
		is    error
		want  []string // fragments of the message
	}{
		{name: "missing file", files: func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, segKey)); err != nil {
				t.Fatal(err)
			}
		}, is: storage.ErrNotFound, want: []string{segKey}},
		{name: "corrupt file", files: func(t *testing.T, root string) {
			p := filepath.Join(root, segKey)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			os.Chmod(p, 0o644)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, is: storage.ErrChecksum, want: []string{segKey}},
		{name: "logprobs shorter than the completion", rows: func(it *iteration) {
			it.segments[3].Logprobs = it.segments[3].Logprobs[1:]
		}, is: schemas.ErrLogprobLength, want: []string{segKey + " row 3", "12 logprobs, 13 completion tokens"}},
		{name: "loss mask longer than the completion", rows: func(it *iteration) {
			it.segments[1].LossMask = append(it.segments[1].LossMask, 1)
		}, is: schemas.ErrLossMaskLength, want: []string{segKey + " row 1"}},
		{name: "routing of other tokens", rows: func(it *iteration) {
			it.segments[2].RoutingExperts = it.segments[2].RoutingExperts[2:]
		}, is: schemas.ErrRoutingShape, want: []string{segKey + " row 2"}},
		{name: "routing of another model", rows: func(it *iteration) {
			it.segments[0].RoutingExperts[0] = 9
		}, is: trainer.ErrData, want: []string{segKey + " row 0", "expert 9 of 4"}},
		{name: "token outside the vocabulary", rows: func(it *iteration) {
			it.segments[2].CompletionTokenIDs[0] = 64
		}, is: schemas.ErrTokenRange, want: []string{segKey + " row 2"}},
		{name: "NaN reward", rows: func(it *iteration) {
			it.rollouts[2].Reward = math.NaN()
		}, is: schemas.ErrReward, want: []string{rolKey + " row 2", "NaN"}},
		{name: "status disagrees with termination", rows: func(it *iteration) {
			it.rollouts[1].Termination = schemas.TerminationTimeout
		}, is: schemas.ErrStatusMismatch, want: []string{rolKey + " row 1"}},
		{name: "segment of an unknown rollout", rows: func(it *iteration) {
			it.segments[4].RolloutID = "stranger"
		}, is: trainer.ErrData, want: []string{segKey + " row 4", "stranger"}},
		{name: "row of another iteration", rows: func(it *iteration) {
			it.segments[1].Iteration = 7
		}, is: trainer.ErrData, want: []string{segKey + " row 1", "iteration 7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := makeIteration(t, m, "bad", 0, 0, smallShape, groups([]float64{1, 0, 1}, []float64{0, 1}), 8)
			if tt.rows != nil {
				tt.rows(it)
			}
			st, root := fileStore(t)
			it.commit(t, st)
			if tt.files != nil {
				tt.files(t, root)
			}
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			_, err := trainer.Load(context.Background(), st, "bad", 0, trainer.LoadOptions{Model: m.Config(), Mem: mem})
			t.Log(err)
			if !errors.Is(err, tt.is) {
				t.Fatalf("err %v, want %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
