#!/bin/sh
# build-init.sh TREE OUT: build the local sandbox backend's init from the
# checkout TREE to OUT, static, as make build does: the C init
# (cmd/legorl-sandbox-init/init.c), with the init version of package
# sandbox/local/initproc, which the host checks when it starts it; for a
# commit from before the C init, the Go one. The tests build it with this
# script too (sandbox/local/internal/cinit).
set -eu
[ $# -eq 2 ] || { echo "usage: build-init.sh TREE OUT" >&2; exit 2; }
tree=$1
out=$2
if [ -f "$tree/cmd/legorl-sandbox-init/init.c" ]; then
	command -v cc >/dev/null || { echo "build-init: no C compiler (scripts/setup deb gcc libc6-dev)" >&2; exit 2; }
	v=$(sed -n 's/^const Version = "\([0-9a-f]*\)"$/\1/p' "$tree/sandbox/local/initproc/version_linux.go")
	[ -n "$v" ] || { echo "build-init: no Version in $tree/sandbox/local/initproc/version_linux.go" >&2; exit 2; }
	cc -static -O2 -Wall -Wextra -Werror -DLEGORL_INIT_VERSION="\"$v\"" -o "$out" "$tree/cmd/legorl-sandbox-init/init.c"
else
	(cd "$tree" && CGO_ENABLED=0 go build -o "$out" ./cmd/legorl-sandbox-init)
fi
