package trainer

import "sort"

// Pack groups items of the given token counts into micro-batches of at
// most budget tokens, first-fit decreasing: the longest item goes first
// into the first micro-batch with room (ties by index), and an item longer
// than the budget gets a micro-batch of its own. Each micro-batch lists
// item indices in increasing order, and the result depends only on the
// counts and the budget. The model runs the sequences of a micro-batch in
// parallel, so similar lengths in one micro-batch also balance its workers.
func Pack(tokens []int, budget int) [][]int {
	order := make([]int, len(tokens))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tokens[order[a]] > tokens[order[b]] })
	var bins [][]int
	var used []int
	for _, i := range order {
		placed := false
		for b := range bins {
			if used[b]+tokens[i] <= budget {
				bins[b] = append(bins[b], i)
				used[b] += tokens[i]
				placed = true
				break
			}
		}
		if !placed {
			bins = append(bins, []int{i})
			used = append(used, tokens[i])
		}
	}
	for _, b := range bins {
		sort.Ints(b)
	}
	return bins
}
