//go:build linux

package storage_test

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// selfPeakRSS returns this process's peak resident set size in bytes, the
// VmHWM line of /proc/self/status. (A child's ru_maxrss is no use here: on
// Linux it starts at the parent's RSS, inherited through fork and exec.)
func selfPeakRSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "VmHWM:" && string(f[2]) == "kB" {
			kib, err := strconv.ParseInt(string(f[1]), 10, 64)
			return kib << 10, err == nil
		}
	}
	return 0, false
}
