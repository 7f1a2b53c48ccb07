//go:build unix

package engine

import (
	"syscall"
	"time"
)

// processCPUTime is the CPU time this process has used (user + system), so
// benchmarks can report throughput per CPU-second, which other load on the
// machine does not dilute the way it dilutes wall-clock throughput.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
