# pair.sh, sourced by the scripts that run a commit's binaries beside the
# working tree's (scripts/identical.sh, bench/loop.sh).
#
# build_pair NAME BASE WORK builds bin/legorl, bin/legorl-agent and, where
# the tree has it, bin/legorl-sandbox-init of commit BASE (from a temporary
# worktree, removed on exit) into WORK/base/bin and of the working tree into
# WORK/new/bin, as `make build` lays them out. WORK is emptied first.
build_pair() {
	local name=$1 base=$2 work=$3 root go=${GO:-go}
	root=$(git rev-parse --show-toplevel)
	rm -rf "$work"
	mkdir -p "$work/base/bin" "$work/new/bin"
	trap "git -C '$root' worktree remove --force '$work/base-src' 2>/dev/null || true" EXIT
	git -C "$root" worktree add --detach --force "$work/base-src" "$base" >/dev/null
	echo "$name: building $base and the working tree" >&2
	local side src cmd
	for side in base new; do
		src=$work/base-src
		[ "$side" = new ] && src=$root
		for cmd in legorl legorl-agent; do
			(cd "$src" && CGO_ENABLED=$([ "$cmd" = legorl ] && echo 1 || echo 0) $go build -o "$work/$side/bin/$cmd" "./cmd/$cmd")
		done
		# The tree's own build-init.sh: the init's source moved once.
		if [ -d "$src/cmd/legorl-sandbox-init" ] || [ -d "$src/sandbox/local/initproc/c" ]; then
			"$src/scripts/lib/build-init.sh" "$src" "$work/$side/bin/legorl-sandbox-init"
		fi
	done
}
