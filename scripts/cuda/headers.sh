#!/usr/bin/env bash
# headers.sh: the CUDA 12.x headers and driver link stub that the cuda
# build tag compiles against, taken from Debian's non-free nvidia-cuda-dev
# and kept in .cache/cuda-12/ (include/, lib/libcuda.so). Idempotent: a
# stamp file skips the work on later runs.
#
# gorgonia.org/cu v0.9.6 compiles against CUDA 12.x headers but not CUDA 13
# ones, and CI has no CUDA toolkit, so `make test` takes the headers from
# Debian: nvidia-cuda-dev 12.5 from experimental, else the version in sid
# (12.4). apt runs with a private sources list, state and cache under
# .cache/cuda-apt/; /etc/apt is not touched. Only usr/include/ (16 MB) and
# the libcuda.so stub are extracted; the .deb (about 900 MB) is deleted.
#
# Usage: scripts/cuda/headers.sh [DEST]   (DEST defaults to .cache/cuda-12)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$root/.cache/cuda-12}
apt_dir=$root/.cache/cuda-apt
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# Package specs for apt-get download, best first.
candidates=("nvidia-cuda-dev=12.5.39~12.5.0-2+b1" "nvidia-cuda-dev/sid")

if [ -f "$dest/.stamp" ] && [ -f "$dest/include/cuda.h" ] && [ -f "$dest/lib/libcuda.so" ]; then
	exit 0
fi

aptq() {
	apt-get -q -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" "$@"
}

mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/dl"
cat >"$apt_dir/sources.list" <<EOF
deb [signed-by=$keyring] http://deb.debian.org/debian experimental non-free
deb [signed-by=$keyring] http://deb.debian.org/debian sid non-free
EOF

echo "cuda headers: extracting Debian's nvidia-cuda-dev (CUDA 12.x headers, libcuda stub) into ${dest#$root/}"
aptq update >/dev/null 2>&1 || { echo "cuda headers: apt-get update of $apt_dir/sources.list failed" >&2; exit 1; }

deb= why=
rm -f "$apt_dir"/dl/*.deb
for spec in "${candidates[@]}"; do
	# apt warns that _apt cannot write the directory and downloads as root.
	if why=$(cd "$apt_dir/dl" && aptq download "$spec" 2>&1); then
		deb=$(ls "$apt_dir"/dl/nvidia-cuda-dev_*.deb)
		break
	fi
done
if [ -z "$deb" ]; then
	echo "cuda headers: could not download any of ${candidates[*]}: $(echo "$why" | grep -E '^E:' | head -1)" >&2
	exit 1
fi

tmp=$(mktemp -d "$root/.cache/cuda-x.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The package keeps its headers in usr/include/ (cuda.h, cublas_api.h, ...)
# and the driver stub in usr/lib/x86_64-linux-gnu/stubs/. dpkg-deb -x would
# write the whole 3 GB package; its tar stream filtered by tar writes only
# those members.
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./usr/include ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
version=$(dpkg-deb -f "$deb" Version)
rm -f "$deb"
[ -f "$tmp/usr/include/cuda.h" ] || { echo "cuda headers: $deb has no usr/include/cuda.h" >&2; exit 1; }

rm -rf "$dest"
mkdir -p "$dest/lib"
mv "$tmp/usr/include" "$dest/include"
mv "$tmp/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$dest/lib/libcuda.so"
echo "nvidia-cuda-dev=$version" >"$dest/.stamp"
