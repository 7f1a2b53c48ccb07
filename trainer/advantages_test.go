package trainer_test

import (
	"math"
	"strings"
	"testing"

	"github.com/legorl/legorl/trainer"
)

func TestAdvantages(t *testing.T) {
	// Group b: rewards 1, 0, 0, 1: mean 0.5, sample std sqrt(1/3).
	// Group c: 1, 0, 0: mean 1/3, sample std sqrt(1/3).
	// Groups z1 (all 1) and z2 (one rollout) have zero variance.
	in := []trainer.RolloutReward{
		{"b0", "b", 1}, {"b1", "b", 0}, {"b2", "b", 0}, {"b3", "b", 1},
		{"c0", "c", 1}, {"c1", "c", 0}, {"c2", "c", 0},
		{"z0", "z1", 1}, {"z1", "z1", 1},
		{"s0", "z2", 0},
	}
	sqrt3 := math.Sqrt(1.0 / 3)
	tests := []struct {
		name  string
		scale bool
		want  map[string]float64
	}{
		{"centred", false, map[string]float64{
			"b0": 0.5, "b1": -0.5, "b2": -0.5, "b3": 0.5,
			"c0": 2.0 / 3, "c1": -1.0 / 3, "c2": -1.0 / 3,
			"z0": 0, "z1": 0, "s0": 0}},
		{"std-normalised", true, map[string]float64{
			"b0": 0.5 / (sqrt3 + 1e-6), "b1": -0.5 / (sqrt3 + 1e-6), "b2": -0.5 / (sqrt3 + 1e-6), "b3": 0.5 / (sqrt3 + 1e-6),
			"c0": (2.0 / 3) / (sqrt3 + 1e-6), "c1": (-1.0 / 3) / (sqrt3 + 1e-6), "c2": (-1.0 / 3) / (sqrt3 + 1e-6),
			"z0": 0, "z1": 0, "s0": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adv, st := trainer.Advantages(in, tt.scale)
			if st != (trainer.GroupStats{Groups: 4, ZeroVariance: 2, Rollouts: 10}) {
				t.Errorf("stats %+v, want 4 groups, 2 of zero variance, 10 rollouts", st)
			}
			if len(adv) != len(tt.want) {
				t.Errorf("%d advantages, want %d", len(adv), len(tt.want))
			}
			for id, w := range tt.want {
				if got, ok := adv[id]; !ok || math.Abs(got-w) > 1e-12 {
					t.Errorf("advantage of %s = %v, want %v", id, got, w)
				}
			}
		})
	}
	// The std-normalised advantage of b0 by hand: 0.5 / 0.57735 = 0.866.
	adv, _ := trainer.Advantages(in, true)
	if math.Abs(adv["b0"]-0.8660239) > 1e-6 {
		t.Errorf("b0 = %v, want 0.866024", adv["b0"])
	}
}

func TestRewardsAreTheAdvantagesWithoutBaseline(t *testing.T) {
	in := []trainer.RolloutReward{{"a", "g", 1}, {"b", "g", 0}, {"c", "h", 1}, {"d", "h", 1}}
	adv := trainer.Rewards(in)
	want := map[string]float64{"a": 1, "b": 0, "c": 1, "d": 1}
	if len(adv) != len(want) {
		t.Errorf("%d advantages, want %d", len(adv), len(want))
	}
	for id, w := range want {
		if adv[id] != w {
			t.Errorf("advantage of %s = %v, want %v", id, adv[id], w)
		}
	}
}

func TestBaselineConfig(t *testing.T) {
	base := trainer.Config{LR: 1e-3}
	group := base
	group.Baseline = trainer.BaselineGroup
	if base.Hash() != group.Hash() {
		t.Error(`baseline "group" changes the config hash of a config without it`)
	}
	none := base
	none.Baseline = trainer.BaselineNone
	if none.Hash() == base.Hash() {
		t.Error(`baseline "none" has the default's config hash`)
	}
	for _, tt := range []struct {
		cfg  trainer.Config
		want string // "" is valid
	}{
		{group, ""},
		{none, ""},
		{trainer.Config{LR: 1e-3, Baseline: "mean"}, `baseline "mean": want group or none`},
		{trainer.Config{LR: 1e-3, Baseline: trainer.BaselineNone, ScaleByStd: true}, "baseline none with scale_by_std"},
	} {
		err := tt.cfg.WithDefaults().Validate()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: error %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestSetAdvantagesGivesEverySegmentItsRollouts(t *testing.T) {
	s := []trainer.Sample{{RolloutID: "a", SegmentIndex: 0}, {RolloutID: "a", SegmentIndex: 1}, {RolloutID: "b"}}
	trainer.SetAdvantages(s, map[string]float64{"a": 0.25, "b": -0.25})
	for i, want := range []float64{0.25, 0.25, -0.25} {
		if s[i].Advantage != want {
			t.Errorf("sample %d: advantage %v, want %v", i, s[i].Advantage, want)
		}
	}
}
