#!/bin/sh
# bench-sft-prefix.sh: SFT with and without the shared prefix
# (`legorl sft --shared-prefix`, docs/PERFORMANCE.md, issue 17 deliverable
# 8) on real demonstrations, side by side.
#
#   scripts/bench-sft-prefix.sh DEMOS POLICY [N] [ROUNDS]
#
# Takes the first N (default 240) demonstrations of DEMOS (a file `legorl
# run` or `legorl sft demos` wrote) and runs one epoch of `legorl sft` from
# POLICY (a checkpoint with the demonstrations' tokenizer, e.g. a run's
# checkpoints/init) ROUNDS times (default 3) each way, alternating, at the
# defaults of a loop config (batch 8, lr 3e-3). Both ways do the same
# steps on the same tokens, so the ratio of CPU seconds is the ratio of
# tokens per CPU-second. Prints each run's CPU and wall seconds and the
# medians' ratio. Needs bin/legorl (make build) and python3.
set -eu
demos=${1:?usage: bench-sft-prefix.sh DEMOS POLICY [N] [ROUNDS]}
policy=${2:?usage: bench-sft-prefix.sh DEMOS POLICY [N] [ROUNDS]}
n=${3:-240}
rounds=${4:-3}
root=$(git rev-parse --show-toplevel)
legorl=$root/bin/legorl
[ -x "$legorl" ] || { echo "bench-sft-prefix: $legorl not found (make build)" >&2; exit 2; }
[ -r "$demos" ] || { echo "bench-sft-prefix: $demos: no such file" >&2; exit 2; }
[ -d "$policy" ] || { echo "bench-sft-prefix: $policy: no such checkpoint" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n "$n" "$demos" >"$work/demos.jsonl"
i=1
while [ "$i" -le "$rounds" ]; do
	for way in default shared; do
		flag=
		[ "$way" = shared ] && flag=--shared-prefix
		python3 - "$legorl" "$work/demos.jsonl" "$policy" "$work/out-$way-$i" "$way" $flag <<'PY'
import resource, subprocess, sys, time
legorl, demos, policy, out, way = sys.argv[1:6]
t = time.monotonic()
subprocess.run([legorl, "sft", "--demos", demos, "--policy", policy, "--out", out,
                "--epochs", "1", "--lr", "0.003", "--batch", "8"] + sys.argv[6:],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.monotonic() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%s cpu-s %.2f wall-s %.2f" % (way, ru.ru_utime + ru.ru_stime, wall), flush=True)
PY
		rm -rf "$work/out-$way-$i"
	done
	i=$((i + 1))
done | tee "$work/runs.txt"
python3 - "$work/runs.txt" <<'PY'
import statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    way, _, cpu, _, wall = line.split()
    runs.setdefault(way, []).append((float(cpu), float(wall)))
d, s = (st.median(c for c, _ in runs[w]) for w in ("default", "shared"))
dw, sw = (st.median(w for _, w in runs[x]) for x in ("default", "shared"))
print("medians: default %.2f cpu-s (%.2f wall), shared prefix %.2f cpu-s (%.2f wall): %.2fx tokens per CPU-second, %.2fx per wall second" % (d, dw, s, sw, d / s, dw / sw))
PY
