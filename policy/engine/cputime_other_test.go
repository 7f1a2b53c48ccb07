//go:build !unix

package engine

import "time"

// processCPUTime is not measured on this platform; the per-CPU-second
// metric is then left out.
func processCPUTime() time.Duration { return 0 }
