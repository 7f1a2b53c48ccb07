#!/bin/sh
# profile-sandbox.sh: where a local sandbox's CPU goes, back to back
# (docs/PERFORMANCE.md, "Sandbox, local: where the CPU goes").
#
#   scripts/profile-sandbox.sh [N]
#
# Builds sandbox/local's test binary and the static legorl-sandbox-init
# beside it, records BenchmarkLocalBackToBack (N sandboxes, default 100)
# with `perf record -g`, and prints the share of all CPU samples by process
# (the benchmark, the spawner, the sandboxes' inits and their commands) and
# by what the stack shows them doing. Needs root, perf and awk.
set -eu
n=${1:-100}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

command -v perf >/dev/null || { echo "profile-sandbox: perf not found (apt-get install linux-perf)" >&2; exit 2; }
(cd "$root" && go test -c -o "$work/local.test" ./sandbox/local)
"$root/scripts/lib/build-init.sh" "$root" "$work/legorl-sandbox-init"
cd "$work"
perf record -q -o perf.data -g -F 2000 -- ./local.test -test.run '^$' \
	-test.bench '^BenchmarkLocalBackToBack$' -test.benchtime "${n}x" | grep '^Benchmark'
perf script -i perf.data -F comm,pid,ip,sym 2>/dev/null | awk '
# A sample is a header line (comm pid) and then one line per stack frame.
/^[^ \t]/ { if (stack != "") keep(); comm = $1; pid = $2; stack = ""; next }
{ stack = stack " " $2 }
function keep() { n++; c[n] = comm; p[n] = pid; s[n] = stack; cnt[comm " " pid]++ }
END {
	if (stack != "") keep()
	# The benchmark and the spawner are the busiest processes of their names.
	for (k in cnt) {
		split(k, a, " ")
		if (a[1] == "local.test" && cnt[k] > best1) { best1 = cnt[k]; bench = a[2] }
		if (a[1] ~ /^legorl-sandbox/ && cnt[k] > best2) { best2 = cnt[k]; spawner = a[2] }
	}
	for (i = 1; i <= n; i++) {
		st = s[i]
		who = "init+command"
		if (p[i] == bench) who = "benchmark"
		if (p[i] == spawner) who = "spawner"
		what = "other"
		if (st ~ /runtime\./) what = "Go runtime, other"
		if (st ~ /rt0_go|runtime\.schedinit/) what = "Go runtime start (rt0_go, schedinit)"
		if (st ~ /doInit1/ && st !~ /initproc\.Init/) what = "Go package init"
		if (st ~ /runtime\.mstart/) what = "Go runtime, other threads"
		if (st ~ /initproc\.Init|local\.\(\*Backend\)|local\.\(\*localSandbox\)/) what = "sandbox code, other"
		if (st ~ /prepareRoot|setupSandbox|dropPrivileges|seccompFilter/) what = "init: root, privileges, seccomp"
		if (st ~ /_dl_|do_execveat|load_elf/) what = "exec, dynamic loader"
		if (st ~ /do_exit|exit_mmap|do_group_exit/) what = "process exit"
		if (st ~ /forkExec|copy_process/) what = "fork (page tables, copy-on-write)"
		if (st ~ /newCgroup|cgroup\)\.add|cgroup\)\.remove|setLimits/) what = "cgroups"
		if (st ~ /copyTree|newFolder|removeFolder/) what = "workspace"
		share[who "\t" what]++
	}
	for (k in share) printf "%5.1f%%\t%s\n", 100 * share[k] / n, k
}' | sort -t "$(printf '\t')" -k2,2 -k1,1rn
