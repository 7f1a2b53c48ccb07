//go:build linux

package initproc

// SeccompFilter is the filter the Go holder installs.
var SeccompFilter = seccompFilter
