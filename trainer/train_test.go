package trainer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/safetensors"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
)

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// e2e is a store with iteration 0 of a run sampled by a saved tiny MoE
// checkpoint (version 0, no lineage).
type e2e struct {
	st     *storage.FileStore
	root   string
	policy string
	work   string
	it     *iteration
	specs  []rolloutSpec
}

func newE2E(t *testing.T, edit func(*iteration)) *e2e {
	e := &e2e{work: t.TempDir()}
	e.st, e.root = fileStore(t)
	m := tinyModel(t, true, 21)
	e.policy = filepath.Join(e.work, "v0")
	if err := m.Save(e.policy, model.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	e.specs = append(groups([]float64{1, 0, 0, 1}, []float64{0, 1, 1, 1}, []float64{1, 1}),
		rolloutSpec{group: "g1", term: schemas.TerminationTimeout, segments: 2})
	e.it = makeIteration(t, m, "e2e", 0, 0, smallShape, e.specs, 13)
	if edit != nil {
		edit(e.it)
	}
	e.it.commit(t, e.st)
	return e
}

func (e *e2e) options(out string) trainer.Options {
	return trainer.Options{Store: e.st, RunID: "e2e", Iteration: 0, PolicyDir: e.policy, OutDir: out,
		Config: trainer.Config{LR: 1e-3, Seed: 1, Steps: 2}, CodeVersion: "test"}
}

func TestTrainPublishesCheckpointWithLineage(t *testing.T) {
	e := newE2E(t, nil)
	ctx := context.Background()
	out := filepath.Join(e.work, "v1")
	opts := e.options(out)
	var phases []string
	opts.Progress = func(p trainer.Progress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	}
	res, err := trainer.Train(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(phases, ","); got != "load,recompute,step,publish" {
		t.Errorf("progress phases %s", got)
	}
	lin, err := trainer.ReadLineage(out)
	if err != nil || lin == nil {
		t.Fatalf("lineage: %v", err)
	}

	// Parent, version, config.
	absPolicy, _ := filepath.Abs(e.policy)
	if lin.Version != 1 || lin.Parent.Version != 0 || lin.Parent.Path != absPolicy ||
		lin.Parent.WeightsSHA256 != sha(t, filepath.Join(e.policy, "model.safetensors")) {
		t.Errorf("version %d, parent %+v", lin.Version, lin.Parent)
	}
	cj, _ := json.Marshal(opts.Config.WithDefaults())
	ch := sha256.Sum256(cj)
	if lin.ConfigHash != hex.EncodeToString(ch[:]) || lin.Config != opts.Config.WithDefaults() || lin.RunID != "e2e" || lin.Iteration != 0 {
		t.Errorf("config hash %s, config %+v", lin.ConfigHash, lin.Config)
	}

	// The data: the manifest read, with its sha256 and its files'.
	ref := storage.ManifestRef{RunID: "e2e", Iteration: 0, Stage: "rollout"}
	man, err := storage.Latest(ctx, e.st, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Data.Manifests) != 1 {
		t.Fatalf("manifests %+v", lin.Data.Manifests)
	}
	mu := lin.Data.Manifests[0]
	if mu.Key != ref.Key(man.Version) || mu.SHA256 != sha(t, filepath.Join(e.root, mu.Key)) || len(mu.Files) != 2 {
		t.Errorf("manifest %+v", mu)
	}
	for i, f := range mu.Files {
		if f != man.Files[i] || f.SHA256 != sha(t, filepath.Join(e.root, f.Key)) {
			t.Errorf("file %d: %+v, manifest has %+v", i, f, man.Files[i])
		}
	}
	if lin.Data.Rollouts != 10 || lin.Data.Masked["timeout"] != 1 || lin.Data.MaskedSegments != 2 ||
		lin.Data.Segments != 10 || lin.Data.Trained != 8 || lin.Data.Groups.ZeroVariance != 1 {
		t.Errorf("data %+v", lin.Data)
	}

	// Metrics: one row per step, in the lineage and in the store.
	if len(lin.Steps) != 2 || !lin.Gate.Passed || !(lin.Gate.Overall.Pearson >= 0.99) {
		t.Fatalf("steps %v, gate %s", lin.Steps, lin.Gate.Summary())
	}
	for _, k := range []string{"loss", "grad_norm", "lr", "clip_fraction", "entropy", "kl", "logprob_pearson", "is_ratio_mean", "ess", "tokens_per_second"} {
		if _, ok := lin.Steps[0][k]; !ok {
			t.Errorf("lineage step has no %s", k)
		}
	}
	files, err := storage.TableFiles(ctx, e.st, "e2e", "train_steps")
	if err != nil || len(files) != 1 || files[0].Key != lin.TrainStepsKey {
		t.Fatalf("train_steps files %+v, %v", files, err)
	}
	f, err := storage.OpenFile(ctx, e.st, files[0], memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.NumRows() != 2 || f.Footer.ConfigHash != lin.ConfigHash {
		t.Errorf("%d rows, footer %+v", f.NumRows(), f.Footer)
	}
	for rec, err := range f.Batches(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		loss := rec.Column(rec.Schema().FieldIndices("loss")[0]).(*array.Float64)
		pearson := rec.Column(rec.Schema().FieldIndices("logprob_pearson")[0]).(*array.Float64)
		if loss.Value(1) != lin.Steps[1]["loss"].(float64) || loss.Value(0) != res.Update.Steps[0].Stats.Loss || pearson.Value(0) != lin.Gate.Overall.Pearson {
			t.Errorf("stored loss %v / pearson %v, lineage %v / %v", loss.Value(1), pearson.Value(0), lin.Steps[1]["loss"], lin.Gate.Overall.Pearson)
		}
	}

	// Every file's sha256 is recorded.
	ents, _ := os.ReadDir(out)
	for _, ent := range ents {
		if ent.Name() == trainer.LineageFile {
			continue
		}
		if lin.Files[ent.Name()] != sha(t, filepath.Join(out, ent.Name())) {
			t.Errorf("%s: sha256 %q in the lineage", ent.Name(), lin.Files[ent.Name()])
		}
	}
	for _, want := range []string{"config.json", "model.safetensors", trainer.OptimizerFile, trainer.RecomputedFile} {
		if lin.Files[want] == "" {
			t.Errorf("checkpoint lacks %s", want)
		}
	}

	// The recomputed logprobs are stored, and match the rollout's.
	s := res.Data.Samples[3]
	rec, err := trainer.ReadRecomputed(out, s.RolloutID, s.SegmentIndex)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range s.Mask {
		if m == 1 && math.Abs(float64(rec[i]-s.Logprobs[i])) > 1e-6 {
			t.Errorf("token %d: stored recomputed %v, rollout %v", i, rec[i], s.Logprobs[i])
		}
	}

	// The engine's reload sees exactly the trained weights: the same
	// update run in memory gives the same bytes.
	parent, err := model.Load(e.policy)
	if err != nil {
		t.Fatal(err)
	}
	d, err := trainer.Load(ctx, e.st, "e2e", 0, trainer.LoadOptions{Model: parent.Config()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newTrainer(t, parent, opts.Config).Iteration(d, 0, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(weights(t, parent), mustRead(t, filepath.Join(out, "model.safetensors"))) {
		t.Error("published weights differ from the update's")
	}
	if _, err := model.Load(out); err != nil {
		t.Errorf("the checkpoint does not load: %v", err)
	}

	// The next iteration starts from v1: version 2, optimizer continued.
	m1, _ := model.Load(out)
	it1 := makeIteration(t, m1, "e2e", 1, 1, smallShape, e.specs, 14)
	it1.commit(t, e.st)
	o2 := e.options(filepath.Join(e.work, "v2"))
	o2.Iteration, o2.PolicyDir = 1, out
	res2, err := trainer.Train(ctx, o2)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Lineage.Version != 2 || res2.Lineage.Parent.Version != 1 {
		t.Errorf("second update: version %d parent %d", res2.Lineage.Version, res2.Lineage.Parent.Version)
	}
	set, err := safetensors.ReadFile(filepath.Join(o2.OutDir, trainer.OptimizerFile))
	if err != nil || set.Metadata()["step"] != "4" {
		t.Errorf("optimizer state after two iterations of two steps: %v %v", set.Metadata(), err)
	}
	if files, _ := storage.TableFiles(ctx, e.st, "e2e", "train_steps"); len(files) != 2 {
		t.Errorf("%d train_steps files after two iterations", len(files))
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nothingWritten checks that a failed Train left no checkpoint, no
// temporary folder and no train manifest.
func nothingWritten(t *testing.T, e *e2e, out string) {
	t.Helper()
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after a failure", out)
	}
	ents, _ := os.ReadDir(filepath.Dir(out))
	for _, ent := range ents {
		if strings.HasPrefix(ent.Name(), ".legorl-ckpt") {
			t.Errorf("temporary folder %s left behind", ent.Name())
		}
	}
	_, err := storage.Latest(context.Background(), e.st, storage.ManifestRef{RunID: "e2e", Iteration: 0, Stage: "train"})
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a train manifest exists after a failure: %v", err)
	}
}

func TestTrainWritesNothingOnError(t *testing.T) {
	segKey := storage.ManifestRef{RunID: "e2e", Stage: "rollout"}.DataKey("segments", "0")
	tests := []struct {
		name  string
		setup func(t *testing.T, e *e2e, o *trainer.Options)
		is    error
		want  string
	}{
		{"missing file", func(t *testing.T, e *e2e, o *trainer.Options) {
			os.Remove(filepath.Join(e.root, segKey))
		}, storage.ErrNotFound, segKey},
		{"corrupt file", func(t *testing.T, e *e2e, o *trainer.Options) {
			p := filepath.Join(e.root, segKey)
			b := mustRead(t, p)
			copy(b[100:], "garbage")
			os.Chmod(p, 0o644)
			os.WriteFile(p, b, 0o644)
		}, storage.ErrChecksum, segKey},
		{"failed gate", func(t *testing.T, e *e2e, o *trainer.Options) {}, trainer.ErrGate, "FAILED: pearson"},
		{"output exists", func(t *testing.T, e *e2e, o *trainer.Options) {
			os.Mkdir(o.OutDir, 0o755)
		}, trainer.ErrCheckpoint, "already exists"},
		{"no such parent", func(t *testing.T, e *e2e, o *trainer.Options) {
			o.PolicyDir = filepath.Join(e.work, "nope")
		}, trainer.ErrCheckpoint, "nope"},
		{"no such iteration", func(t *testing.T, e *e2e, o *trainer.Options) {
			o.Iteration = 4
		}, storage.ErrNotFound, "iteration 4"},
		{"bad config", func(t *testing.T, e *e2e, o *trainer.Options) {
			o.Config.Loss = "dpo"
		}, trainer.ErrConfig, `"dpo"`},
		{"damaged parent", func(t *testing.T, e *e2e, o *trainer.Options) {
			ents, err := os.ReadDir(e.policy)
			if err != nil {
				t.Fatal(err)
			}
			h := checkpoint.Header{Format: checkpoint.Format, Version: 0, Files: map[string]string{}}
			for _, ent := range ents {
				h.Files[ent.Name()] = sha(t, filepath.Join(e.policy, ent.Name()))
			}
			b, _ := json.Marshal(h)
			if err := os.WriteFile(filepath.Join(e.policy, checkpoint.File), b, 0o644); err != nil {
				t.Fatal(err)
			}
			w := filepath.Join(e.policy, "model.safetensors")
			b = mustRead(t, w)
			b[len(b)-1] ^= 1
			os.WriteFile(w, b, 0o644)
		}, checkpoint.ErrDamaged, "model.safetensors has sha256"},
		// The checkpoint's folder on a disk too small for it: the write
		// fails wrapping ENOSPC and leaves no folder, no temporary one, no
		// train manifest.
		{"disk full while writing the checkpoint", func(t *testing.T, e *e2e, o *trainer.Options) {
			o.OutDir = filepath.Join(smallDisk(t, 64<<10), "v1")
		}, syscall.ENOSPC, "no space left on device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edit func(*iteration)
			if tt.is == trainer.ErrGate {
				edit = func(it *iteration) { // rollout logprobs the parent did not produce
					for i := range it.segments {
						for j, m := range it.segments[i].LossMask {
							if m == 1 {
								it.segments[i].Logprobs[j] -= float32(j%3) * 0.4
							}
						}
					}
				}
			}
			e := newE2E(t, edit)
			o := e.options(filepath.Join(e.work, "v1"))
			tt.setup(t, e, &o)
			_, err := trainer.Train(context.Background(), o)
			t.Log(err)
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %v naming %q", err, tt.is, tt.want)
			}
			if tt.name != "output exists" {
				nothingWritten(t, e, o.OutDir)
			}
		})
	}
}

// smallDisk mounts a tmpfs of size bytes on a new folder and unmounts it
// when the test ends. It needs root (CAP_SYS_ADMIN); without it the test
// fails, it does not skip.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("mount a %d-byte tmpfs on %s: %v (the disk-full test needs root)", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
