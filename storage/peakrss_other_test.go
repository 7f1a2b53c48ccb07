//go:build !linux

package storage_test

// selfPeakRSS is measured on Linux only: benchmarks report no peak RSS here.
func selfPeakRSS() (int64, bool) { return 0, false }
