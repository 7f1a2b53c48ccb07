// Package cputime measures the CPU time this process has used, for the
// policy packages' benchmarks: throughput per CPU-second is diluted less
// than wall-clock throughput by other load on the machine.
package cputime
