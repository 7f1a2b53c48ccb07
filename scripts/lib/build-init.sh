#!/bin/sh
# build-init.sh TREE OUT: build the local sandbox backend's init, the C
# program sandbox/local/initproc/c/init.c of the checkout TREE, to OUT,
# static, as make build does. Its version, which the host checks when it
# starts it, is the SHA-256 of init.c followed by tables.h (the first 16
# hex digits), as initproc.Version computes it from the same files. The
# tests build it with this script too (sandbox/local/localtest).
#
# With SANITIZE=1, clang builds it with AddressSanitizer and
# UndefinedBehaviorSanitizer instead (dynamic: the sanitizers' runtimes do
# not link statically), for make test-init-asan.
set -eu
[ $# -eq 2 ] || { echo "usage: build-init.sh TREE OUT" >&2; exit 2; }
src=$1/sandbox/local/initproc/c
out=$2
[ -f "$src/init.c" ] || { echo "build-init: no $src/init.c" >&2; exit 2; }
v=$(cat "$src/init.c" "$src/tables.h" | sha256sum | cut -c1-16)
warn="-Wall -Wextra -Werror"
if [ "${SANITIZE:-}" = 1 ]; then
	command -v clang >/dev/null || { echo "build-init: no clang (scripts/setup deb clang libclang-rt-dev)" >&2; exit 2; }
	exec clang -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all $warn \
		-DLEGORL_INIT_VERSION="\"$v\"" -o "$out" "$src/init.c"
fi
command -v cc >/dev/null || { echo "build-init: no C compiler (scripts/setup deb gcc libc6-dev)" >&2; exit 2; }
exec cc -static -O2 $warn -DLEGORL_INIT_VERSION="\"$v\"" -o "$out" "$src/init.c"
