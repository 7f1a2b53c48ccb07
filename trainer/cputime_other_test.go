//go:build !unix

package trainer_test

import "time"

// processCPU is not available on this platform: benchmarks report no CPU
// time.
func processCPU() (time.Duration, bool) { return 0, false }
