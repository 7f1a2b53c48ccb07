package loop

import "github.com/legorl/legorl/policy/backend"

// computeOf names the compute backend b for the rollout pipelines' engines
// (transforms.Config.Compute and Precision), which open their own in each
// worker process: b's name, and its precision when it reports one. A nil
// b is the CPU backend's default ("").
func computeOf(b backend.Backend) (name, precision string) {
	if b == nil {
		return "", ""
	}
	if p, ok := b.(interface{ Precision() string }); ok {
		precision = p.Precision()
	}
	return b.Name(), precision
}
