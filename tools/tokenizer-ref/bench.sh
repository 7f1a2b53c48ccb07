#!/bin/sh
# bench.sh: Go's encode throughput against the JavaScript reference, side by
# side in one `go test -bench` run, and their ratios, by wall-clock time and
# by CPU time (the latter is steadier on a busy machine). Run from the
# repository root after `make tools`:  sh tools/tokenizer-ref/bench.sh [COUNT]
set -eu
count=${1:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench '^BenchmarkEncode$' -count "$count" ./policy/tokenizer | tee "$out"
awk '
	function metric(name,   i) { for (i = 1; i < NF; i++) if ($(i+1) == name) return $i; return 0 }
	/^BenchmarkEncode\/go-[0-9]/ { gw += metric("MB/s"); gc += metric("cpu-MB/s"); ng++ }
	/^BenchmarkEncode\/go-cold/  { cw += metric("MB/s"); cc += metric("cpu-MB/s"); nc++ }
	/^BenchmarkEncode\/node/     { nw += metric("ref-MB/s"); ncpu += metric("ref-cpu-MB/s"); nn++ }
	END {
		if (!ng || !nc || !nn) { print "bench.sh: missing results" > "/dev/stderr"; exit 1 }
		printf "wall: go %.2f MB/s (cold cache %.2f), node %.3f MB/s: go/node = %.0fx (cold %.0fx)\n", gw/ng, cw/nc, nw/nn, (gw/ng)/(nw/nn), (cw/nc)/(nw/nn)
		printf "cpu:  go %.2f MB/s (cold cache %.2f), node %.3f MB/s: go/node = %.0fx (cold %.0fx)\n", gc/ng, cc/nc, ncpu/nn, (gc/ng)/(ncpu/nn), (cc/nc)/(ncpu/nn)
	}' "$out"
