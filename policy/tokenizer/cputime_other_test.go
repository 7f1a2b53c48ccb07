//go:build !unix

package tokenizer

import "time"

// cpuTime is unavailable here; benchmarks then omit their cpu-MB/s metric.
func cpuTime() time.Duration { return 0 }
