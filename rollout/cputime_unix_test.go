//go:build unix

package rollout

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time, user plus system, this process (the engine, the
// proxy) has used; 0 when it cannot be read. The sandboxed harnesses are
// not its waited-for children, so their time is not in it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
