//go:build unix

package rollout

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time, user plus system, of this process (the engine,
// the proxy) and of its waited-for descendants (the sandboxed harnesses);
// zeros when it cannot be read.
func cpuTime() (self, children time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		children = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return self, children
}
