// Package cgroupfs reads the host's control-group files for both sandbox
// backends: which groups a process is in (/proc/PID/cgroup) and the event
// counters the kernel keeps in a group's flat-keyed files (memory.events,
// pids.events, memory.oom_control), once (ReadKey) or again and again
// from a file kept open (File). The backends differ in what they do
// with the groups (the local backend makes them, the Docker backend finds
// the engine's), not in how the files read.
package cgroupfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
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
	return parseKey(b, key)
}

// File is a flat-keyed cgroup file kept open: each read is one pread(2)
// from its start, which the kernel answers with the counters as they are
// then, instead of an open, a read and a close.
type File struct {
	f   *os.File
	buf []byte
}

// Open opens the flat-keyed cgroup file at path for reading.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroupfs: %w", err)
	}
	return &File{f: f, buf: make([]byte, 4096)}, nil
}

// ReadKey reads the number after key (see the function ReadKey); 0 when
// the file cannot be read or has no such key. Not safe for concurrent use.
func (f *File) ReadKey(key string) uint64 {
	n, err := f.f.ReadAt(f.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	return parseKey(f.buf[:n], key)
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// parseKey finds "key value" among the lines of b.
func parseKey(b []byte, key string) uint64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
