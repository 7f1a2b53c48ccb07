//go:build !unix

package cputime

import "time"

// Process is not measured on this platform: it is 0, and benchmarks then
// leave their per-CPU-second metric out.
func Process() time.Duration { return 0 }
