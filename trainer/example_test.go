package trainer_test

import (
	"fmt"

	"github.com/legorl/legorl/trainer"
)

// ExampleAdvantages computes GRPO advantages of two groups: one with
// varying rewards, one where every rollout failed (no gradient).
func ExampleAdvantages() {
	adv, st := trainer.Advantages([]trainer.RolloutReward{
		{RolloutID: "a0", GroupID: "task-a", Reward: 1},
		{RolloutID: "a1", GroupID: "task-a", Reward: 0},
		{RolloutID: "a2", GroupID: "task-a", Reward: 0},
		{RolloutID: "a3", GroupID: "task-a", Reward: 1},
		{RolloutID: "b0", GroupID: "task-b", Reward: 0},
		{RolloutID: "b1", GroupID: "task-b", Reward: 0},
	}, false)
	fmt.Println(adv["a0"], adv["a1"], adv["b0"])
	fmt.Printf("%d groups, %d of zero variance\n", st.Groups, st.ZeroVariance)
	// Output:
	// 0.5 -0.5 0
	// 2 groups, 1 of zero variance
}

// ExamplePPOWeights turns one sequence's logprobs into the per-token loss
// weights that model.BackwardFunc takes: a token whose ratio left the clip
// range on the advantage's side gets no gradient.
func ExamplePPOWeights() {
	w, st := trainer.PPOWeights(trainer.LossInput{
		New:       []float32{-1.0, -0.5, -2.0},
		Old:       []float32{-1.0, -1.0, -2.0}, // token 1: ratio e^0.5 = 1.65 > 1.2
		Rollout:   []float32{-1.0, -1.0, -2.0},
		Mask:      []int8{1, 1, 0}, // token 2 is an observation
		Advantage: 1,
	}, trainer.LossParams{ClipLow: 0.2, ClipHigh: 0.2, TISCap: 2, Scale: 0.5})
	fmt.Println(w)
	fmt.Printf("loss %.2f, clip fraction %.2f\n", st.Loss, st.ClipFraction())
	// Output:
	// [-0.5 0 0]
	// loss -1.10, clip fraction 0.50
}
