#!/usr/bin/env bash
# device-check.sh: the CUDA backend's checks on a real GPU, in three steps,
# so the GPU machine needs no Go toolchain:
#
#   1. here (make device-bundle):
#        scripts/cuda/device-check.sh bundle
#      builds the stripped test binary of policy/backend/cuda (-tags cuda,
#      against the CUDA 12.x headers of scripts/cuda/headers.sh) into
#      .cache/device/cuda.test, next to a copy of this script.
#
#   2. on the GPU machine, from a copy of the repository root that holds
#      .cache/device (about 8 minutes):
#        bash scripts/cuda/device-check.sh run
#      finds libcublas (CUDA 13 or 12: /usr/local/cuda*, Python's
#      site-packages/nvidia/*), records the GPU, driver and peak bf16 matmul
#      rate (PyTorch, when present), runs the CUDA-vs-CPU equivalence tests
#      (ops, tiny dense and MoE models, routing replay; -test.v) and the
#      benchmarks (training and recompute tokens/s, MFU, Gemm), and writes
#      tests.txt, bench.txt, machine.txt and performance.md to $OUT, or to
#      .cache/device/out when OUT is unset. It exits non-zero when a test
#      failed (the benchmarks run anyway).
#
#   3. here again:
#        scripts/cuda/device-check.sh record DIR
#      writes DIR's machine, test counts and benchmarks to
#      docs/perf/cuda.txt and remakes docs/PERFORMANCE.md's CUDA table.
#
# `make device-check` runs step 1 and, when nvidia-smi works on this
# machine, steps 2 and 3 with DIR = .cache/device/out.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dev=$root/.cache/device

bundle() {
	set -e
	"$root/scripts/cuda/headers.sh"
	mkdir -p "$dev"
	local inc=$root/.cache/cuda-12/include lib=$root/.cache/cuda-12/lib
	(cd "$root" && CGO_CFLAGS="-I$inc" CGO_LDFLAGS="-L$lib" \
		go test -c -tags cuda -ldflags='-s -w' -o "$dev/cuda.test" ./policy/backend/cuda)
	cp "$root/scripts/cuda/device-check.sh" "$dev/device-check.sh"
	local size
	size=$(stat -c %s "$dev/cuda.test")
	if [ "$size" -ge $((64 << 20)) ]; then
		echo "device-check: $dev/cuda.test is $size bytes, over the 64 MiB a device call can carry" >&2
		exit 1
	fi
	echo "device-check: bundled $dev/cuda.test ($((size >> 20)) MiB); on the GPU machine run: bash scripts/cuda/device-check.sh run (carry .cache/device)"
}

# cublas_dirs prints the directories that hold a libcublas.so.13 or .so.12,
# CUDA 13 first.
cublas_dirs() {
	local roots=(/usr/local /usr/lib/x86_64-linux-gnu /opt)
	local sp
	for sp in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
		[ -d "$sp/nvidia" ] && roots+=("$sp/nvidia")
		[ -d "$sp/torch/lib" ] && roots+=("$sp/torch/lib")
	done
	for v in 13 12; do
		find "${roots[@]}" -maxdepth 6 -name "libcublas.so.$v*" 2>/dev/null | xargs -r -n1 dirname
	done | awk '!seen[$0]++'
}

run() {
	local out=${OUT:-$dev/out}
	mkdir -p "$out"
	local bin=$dev/cuda.test
	if [ ! -x "$bin" ]; then
		echo "device-check: $bin is missing: run scripts/cuda/device-check.sh bundle here and carry .cache/device" >&2
		exit 2
	fi
	local dirs
	dirs=$(cublas_dirs | paste -sd: -)
	export LD_LIBRARY_PATH=${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

	{
		echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
		echo "host: $(hostname)"
		echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
		echo "cuda (driver): $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1)"
		echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
		echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(ldd --version 2>&1 | head -1)"
		echo "libcublas dirs: ${dirs:-none found}"
	} >"$out/machine.txt"
	cat "$out/machine.txt"

	# The peak the MFU is quoted against: a bf16 matmul through PyTorch.
	python3 - >>"$out/machine.txt" 2>/dev/null <<'EOF' || echo "torch bf16 peak: not measured" >>"$out/machine.txt"
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
n, t = 20, time.perf_counter()
for _ in range(n):
    a @ b
torch.cuda.synchronize()
print("torch bf16 peak: %.0f TFLOP/s (8192^3 matmul)" % (2 * 8192**3 * n / (time.perf_counter() - t) / 1e12))
EOF
	tail -1 "$out/machine.txt"

	# The test binary reads ../../model/testdata: run it in its package.
	cd "$root/policy/backend/cuda" || exit 2
	local rc=0
	"$bin" -test.v -test.count 1 -test.timeout 150s >"$out/tests.txt" 2>&1 || rc=$?
	grep -E '^(--- |ok|FAIL|PASS|panic)' "$out/tests.txt" | tail -40
	if [ "$rc" -ne 0 ]; then
		echo "device-check: the tests exited with status $rc; the end of tests.txt:"
		tail -25 "$out/tests.txt"
	fi
	"$bin" -test.run '^$' -test.bench . -test.benchtime 3x -test.timeout 240s >"$out/bench.txt" 2>&1 || true
	grep -E '^Benchmark|FAIL|panic' "$out/bench.txt"

	report "$out" "$rc" >"$out/performance.md"
	echo "device-check: results in $out (tests exit status $rc)"
	return "$rc"
}

# report DIR RC prints a Markdown summary of the run in DIR (machine,
# equivalence tests, benchmarks), for reading on the GPU machine.
report() {
	local out=$1 rc=$2
	local date gpu
	date=$(sed -n 's/^date: //p' "$out/machine.txt")
	gpu=$(sed -n 's/^gpu: //p' "$out/machine.txt")
	echo
	echo "## CUDA backend on ${gpu%%,*} ($date)"
	echo
	echo "Recorded by \`make device-check\` (scripts/cuda/device-check.sh). Machine:"
	echo
	sed 's/^/    /' "$out/machine.txt"
	echo
	local pass fail
	pass=$(grep -c '^--- PASS' "$out/tests.txt")
	fail=$(grep -c '^--- FAIL' "$out/tests.txt")
	echo "Equivalence tests against the CPU backend: $pass passed, $fail failed (exit status $rc)."
	echo "The largest difference of each operation test, and the model-level comparisons"
	echo "(tolerances in policy/backend/cuda/*_test.go):"
	echo
	awk '
		/^=== (RUN|NAME|CONT) / {
			n = split($3, p, "/"); key = p[1]
			if (n > 1 && (p[2] == "fp32" || p[2] == "bf16")) key = key "/" p[2]
			if (key == "TestModel" && n > 2) key = key "/" p[2] "/" p[3]
		}
		/max relative difference/ && key !~ /^TestModel/ {
			for (i = 1; i < NF; i++) if ($i == "difference") { d = $(i+1) + 0; tol = $(i+3) }
			if (!(key in worst) || d > worst[key]) { worst[key] = d; tolv[key] = tol }
			if (!(key in seen)) { seen[key] = 1; order[++k] = key }
		}
		key ~ /^TestModel/ && /(logprobs|gradients|routing|logits)/ {
			sub(/^ *[a-z_]+\.go:[0-9]+: /, ""); lines[++m] = key ": " $0
		}
		END {
			for (i = 1; i <= k; i++) printf "    %-18s max relative difference %.3g (tolerance %s\n", order[i], worst[order[i]], tolv[order[i]]
			for (i = 1; i <= m; i++) printf "    %s\n", lines[i]
		}' "$out/tests.txt"
	echo
	echo "| benchmark | tokens/s | MFU % (of 790 TFLOP/s) | TFLOP/s | s/op |"
	echo "|---|---|---|---|---|"
	awk '/^Benchmark/ {
		name = $1; sub(/-[0-9]+$/, "", name)
		tok = "-"; mfu = "-"; tf = "-"; s = "-"
		for (i = 3; i < NF; i += 2) {
			if ($(i+1) == "ns/op") s = sprintf("%.3g", $i / 1e9)
			if ($(i+1) == "tokens/s") tok = sprintf("%.0f", $i)
			if ($(i+1) == "MFU%") mfu = sprintf("%.2f", $i)
			if ($(i+1) == "TFLOP/s") tf = sprintf("%.1f", $i)
		}
		printf "| %s | %s | %s | %s | %s |\n", name, tok, mfu, tf, s
	}' "$out/bench.txt"
}

record() {
	local dir=${1:?usage: device-check.sh record DIR}
	local f
	for f in machine.txt tests.txt bench.txt; do
		if [ ! -s "$dir/$f" ]; then
			echo "device-check: $dir/$f is missing or empty" >&2
			exit 1
		fi
	done
	local out=$root/docs/perf/cuda.txt
	mkdir -p "$root/docs/perf"
	{
		echo "command: make device-check"
		echo "machine: $(sed -n 's/^gpu: //p' "$dir/machine.txt"), $(sed -n 's/^torch bf16 peak: //p' "$dir/machine.txt" | sed 's/^/bf16 matmul peak /'); host $(sed -n 's/^cpu: //p' "$dir/machine.txt")"
		echo "tests: $(grep -c '^--- PASS' "$dir/tests.txt") passed, $(grep -c '^--- FAIL' "$dir/tests.txt") failed"
		cat "$dir/bench.txt"
	} >"$out.tmp"
	mv "$out.tmp" "$out"
	echo "device-check: wrote docs/perf/cuda.txt from $dir"
	(cd "$root" && go test -count=1 -run '^TestPerformanceTables$' ./internal/doccheck -update)
}

case ${1:-} in
bundle) bundle ;;
run) run ;;
record) record "${2:-}" ;;
*)
	sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
