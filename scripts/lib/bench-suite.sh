# bench-suite.sh, sourced by the benchmarks that roll out a fixed slice of
# the built-in suite (bench/loop.sh, bench/train.sh).
#
# bench_suite LEGORL DIR N generates the 400-instance built-in Python suite
# (seed 1) into DIR with the binary LEGORL and writes its first N training
# tasks to DIR/bench.jsonl.
bench_suite() {
	local legorl=$1 dir=$2 n=$3
	"$legorl" tasks generate --n 400 --seed 1 --languages python --out "$dir" >/dev/null
	python3 - "$dir" "$n" <<'PY'
import json, sys
suite, n = sys.argv[1], int(sys.argv[2])
train = [l for l in open(f"{suite}/tasks.jsonl") if json.loads(l).get("split") == "train"][:n]
assert len(train) == n, f"{len(train)} training tasks"
open(f"{suite}/bench.jsonl", "w").writelines(train)
PY
}
