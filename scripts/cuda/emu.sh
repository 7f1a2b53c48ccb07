#!/usr/bin/env bash
# emu.sh: run the CUDA backend's tests (policy/backend/cuda, -tags cuda) on
# the CPU, with no GPU and no driver: the real kernels.cu and the real Go
# code, with only the hardware replaced.
#
#   - emu/gen.py turns kernels.cu into host C++ plus a dispatcher that
#     unpacks the 8-byte launch arguments by parameter type;
#   - emu/emu_rt.cpp runs a launch block by block, each block's threads as
#     fibers switched at __syncthreads (a divergent barrier aborts), and is
#     built as a fake libcuda.so.1;
#   - emu/fakecu is a fake gorgonia.org/cu (device memory is poisoned host
#     memory with bounds-checked copies, launches go to the emulator),
#     swapped in by a go.work replace;
#   - emu/cublas.c is a fake libcublas.so.13 (a naive column-major bf16
#     GemmEx), so the bf16 path's operand swap and leading dimensions are
#     checked too.
#
# What it checks: index math, launch geometry, argument packing, barrier
# placement, shared-memory use within a block, host/device copies, and the
# results against the CPU backend (the package's own tests). What it cannot:
# the PTX the driver JIT-compiles (clang's code generation), real cuBLAS,
# concurrency between blocks, speed. Those need `make device-check` on a GPU.
#
# Usage: scripts/cuda/emu.sh [test binary flags, e.g. -test.run TestAttention -test.v]
# Needs clang++-14 (installed by scripts/cuda/ptx.sh) and the CUDA headers
# of scripts/cuda/headers.sh (.cache/cuda-12) for the backend's cgo shim.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
emu=$here/emu
out=$root/.cache/cuda-emu
mkdir -p "$out"
if ! command -v clang++-14 >/dev/null; then
	echo "installing clang-14 from Debian (the emulator's C++ compiler)"
	"$(dirname "$0")/../setup" deb clang-14
fi
python3 "$emu/gen.py" "$root/policy/backend/cuda/kernels/kernels.cu" "$out/kemu.cpp"
clang++-14 -std=c++20 -O2 -fPIC -shared -Wno-unknown-attributes -I"$emu" -o "$out/libcuda.so.1" "$emu/emu_rt.cpp" "$out/kemu.cpp"
ln -sf libcuda.so.1 "$out/libcuda.so"
gcc -O2 -fPIC -shared -o "$out/libcublas.so.13" "$emu/cublas.c"
cat >"$out/go.work" <<WORK
go 1.26.0

use $root

replace gorgonia.org/cu v0.9.6 => $emu/fakecu
WORK
(cd "$root" && GOWORK=$out/go.work CGO_CFLAGS="-I$root/.cache/cuda-12/include" CGO_LDFLAGS="-L$out" \
	go test -c -tags cuda -o "$out/cuda.test" ./policy/backend/cuda)
cd "$root/policy/backend/cuda" && LD_LIBRARY_PATH=$out "$out/cuda.test" "$@"
