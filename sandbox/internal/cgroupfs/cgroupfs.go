// Package cgroupfs reads the host's control-group files for both sandbox
// backends: which groups a process is in (/proc/PID/cgroup) and the event
// counters the kernel keeps in a group's flat-keyed files (memory.events,
// pids.events, memory.oom_control). The backends differ in what they do
// with the groups (the local backend makes them, the Docker backend finds
// the engine's), not in how the files read.
package cgroupfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Root is where the host's cgroup file systems are mounted.
const Root = "/sys/fs/cgroup"

// Of maps each cgroup v1 controller of process pid (0: this process) to
// the process's group path in that controller's hierarchy, and "" to its
// path in the unified v2 hierarchy, read from /proc/PID/cgroup (lines of
// hierarchy-ID:controller-list:path).
func Of(pid int) (map[string]string, error) {
	file := "/proc/self/cgroup"
	if pid != 0 {
		file = fmt.Sprintf("/proc/%d/cgroup", pid)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cgroupfs: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			out[""] = f[2]
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			out[ctl] = f[2]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroupfs: %s: %w", file, err)
	}
	return out, nil
}

// ReadKey reads the number after key in the flat-keyed cgroup file at path
// (lines of "key value"); 0 when the file or the key is missing.
func ReadKey(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
