package trainer

import (
	"math"
	"sort"
)

// GroupStats counts the groups an update saw.
type GroupStats struct {
	Groups int `json:"groups"`
	// ZeroVariance groups have every reward equal (a lone rollout
	// included): their advantages are 0 and they give no gradient.
	ZeroVariance int `json:"zero_variance"`
	Rollouts     int `json:"rollouts"`
}

// stdEps keeps the division of ScaleByStd finite for nearly equal rewards.
const stdEps = 1e-6

// Advantages returns the GRPO advantage of every completed rollout, by
// rollout id: its reward minus the mean reward of its group (the G
// rollouts of one task in one iteration), divided by the group's sample
// standard deviation (n-1 in the denominator, as torch.std) plus 1e-6 when
// scaleByStd is set. A group whose rewards are all equal gets advantage 0
// for every rollout and is counted in ZeroVariance. Masked rollouts must
// not be passed: they are not rewards of 0.
func Advantages(rollouts []RolloutReward, scaleByStd bool) (map[string]float64, GroupStats) {
	groups := map[string][]RolloutReward{}
	for _, r := range rollouts {
		groups[r.GroupID] = append(groups[r.GroupID], r)
	}
	ids := make([]string, 0, len(groups))
	for id := range groups {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a fixed summation order: the same input gives the same bits
	adv := make(map[string]float64, len(rollouts))
	st := GroupStats{Groups: len(groups), Rollouts: len(rollouts)}
	for _, id := range ids {
		g := groups[id]
		var sum float64
		equal := true
		for _, r := range g {
			sum += r.Reward
			equal = equal && r.Reward == g[0].Reward
		}
		if equal {
			st.ZeroVariance++
			for _, r := range g {
				adv[r.RolloutID] = 0
			}
			continue
		}
		mean := sum / float64(len(g))
		scale := 1.0
		if scaleByStd {
			var ss float64
			for _, r := range g {
				ss += (r.Reward - mean) * (r.Reward - mean)
			}
			scale = 1 / (math.Sqrt(ss/float64(len(g)-1)) + stdEps)
		}
		for _, r := range g {
			adv[r.RolloutID] = (r.Reward - mean) * scale
		}
	}
	return adv, st
}

// Rewards returns every completed rollout's reward as its advantage, by
// rollout id: the advantages of Config.Baseline "none". Masked rollouts
// must not be passed.
func Rewards(rollouts []RolloutReward) map[string]float64 {
	adv := make(map[string]float64, len(rollouts))
	for _, r := range rollouts {
		adv[r.RolloutID] = r.Reward
	}
	return adv
}

// SetAdvantages gives every sample its rollout's advantage.
func SetAdvantages(samples []Sample, adv map[string]float64) {
	for i := range samples {
		samples[i].Advantage = adv[samples[i].RolloutID]
	}
}
