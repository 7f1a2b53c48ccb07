//go:build !unix

package rollout

import "time"

// cpuTime is not measured on this platform.
func cpuTime() (self, children time.Duration) { return 0, 0 }
