package model

import (
	"errors"
	"math"
	"testing"
)

func TestUpcycle(t *testing.T) {
	dense, err := New(tinyDense(true), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range dense.p.layers { // weights as large as a trained model's, so the noise shows
		for _, w := range []*tensor[float32]{l.mlp.gate, l.mlp.up, l.mlp.down} {
			for i := range w.data {
				w.data[i] *= 20
			}
		}
	}
	seqs := []Sequence{{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, 6, 7, 8}}, {Prompt: []int32{9}, Completion: []int32{10, 0, 3}}}
	want, err := dense.Logprobs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	maxDiff := func(m *Model) (float64, [][][]int16) {
		got, err := m.Logprobs(seqs)
		if err != nil {
			t.Fatal(err)
		}
		d := 0.0
		for i := range got {
			for j := range got[i].Logprobs {
				d = max(d, math.Abs(float64(got[i].Logprobs[j]-want[i].Logprobs[j])))
			}
		}
		return d, got[0].Routing
	}

	same, err := Upcycle(dense, UpcycleOptions{Experts: 4, TopK: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := same.Config()
	if c.ModelType != "qwen3_moe" || c.MoELayers() != 2 || c.MoEIntermediateSize != 6 || !c.NormTopKProb || same.Support() != dense.Support() {
		t.Errorf("config %+v, support %d", c, same.Support())
	}
	d, routing := maxDiff(same)
	if d > 1e-5 {
		t.Errorf("identical experts: logprobs differ from the dense model's by %g", d)
	}
	if len(routing) != 8 || len(routing[0]) != 2 || len(routing[0][0]) != 2 {
		t.Errorf("routing shape: %d tokens", len(routing))
	}

	noisy, err := Upcycle(dense, UpcycleOptions{Experts: 4, TopK: 2, Noise: 0.1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := maxDiff(noisy); d < 1e-4 || d > 0.5 {
		t.Errorf("experts with 10%% noise: logprobs differ from the dense model's by %g, want a small but visible change", d)
	}

	for _, o := range []UpcycleOptions{{Experts: 2, TopK: 3}, {Experts: 0, TopK: 0}, {Experts: 4, TopK: 2, Noise: -1}} {
		if _, err := Upcycle(dense, o); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v, want ErrConfig", o, err)
		}
	}
	if _, err := Upcycle(same, UpcycleOptions{Experts: 4, TopK: 2}); !errors.Is(err, ErrConfig) {
		t.Errorf("upcycling a MoE: err %v", err)
	}
}
