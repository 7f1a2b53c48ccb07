//go:build unix

package tokenizer

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) this process has used, so
// that benchmarks can report throughput per CPU second, which a busy
// machine disturbs less than wall-clock time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
