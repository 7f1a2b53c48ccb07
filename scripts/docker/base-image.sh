#!/bin/sh
# base-image.sh: make the sandbox base image legorl/base:$VERSION on the
# private daemon when it is missing. No registry is reachable, so nothing is
# pulled: debootstrap builds a minbase Debian (bookworm) from Debian's mirror,
# adds what the tasks need (python3, pytest, git, bash, coreutils), a
# non-root user "sandbox" (uid 1000) and `docker import`s it. The root file
# system tarball is cached under .cache/docker-base, so a fresh data root
# re-imports in seconds.
#
# Usage: DOCKER_HOST=unix:///.../docker.sock scripts/docker/base-image.sh
# (the socket start-dockerd.sh prints; as root). Prints the image reference.
#
# The tag must match docker.DefaultImage in sandbox/docker; bump both when
# the package list changes.
set -eu

VERSION=bookworm-1
IMAGE=legorl/base:$VERSION
SUITE=bookworm
MIRROR=${LEGORL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES="python3,python3-pytest,git,ca-certificates,procps"

root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${LEGORL_DOCKER_BASE_CACHE:-$root/.cache/docker-base}
tarball=$cache/legorl-base-$VERSION.tar

log() { echo "base-image: $*" >&2; }

if [ -z "${DOCKER_HOST:-}" ]; then
	log "DOCKER_HOST is not set (use the socket start-dockerd.sh prints)"
	exit 1
fi
export DOCKER_HOST

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
	log "$IMAGE is present"
	echo "$IMAGE"
	exit 0
fi

if [ ! -f "$tarball" ]; then
	if ! command -v debootstrap >/dev/null; then
		log "installing debootstrap from Debian"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >&2
		apt-get install -y -qq --no-install-recommends debootstrap >&2
	fi
	mkdir -p "$cache"
	work=$(mktemp -d "$cache/rootfs.XXXXXX")
	# Unmount what debootstrap mounted inside if it fails halfway, then
	# remove the half-built tree.
	cleanup() {
		for m in proc sys dev/pts dev; do umount -l "$work/rootfs/$m" 2>/dev/null || true; done
		rm -rf "$work"
	}
	trap cleanup EXIT INT TERM
	log "debootstrap $SUITE (minbase + $PACKAGES) from $MIRROR (a few minutes the first time)"
	debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$MIRROR" >&2
	r=$work/rootfs
	# The non-root user every sandbox command runs as.
	chroot "$r" groupadd -g 1000 sandbox
	chroot "$r" useradd -u 1000 -g 1000 -d /tmp -s /bin/bash -M sandbox
	# Smaller image: no package caches, lists, docs or locales.
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* \
		"$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/var/log/*
	find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} + 2>/dev/null || true
	for m in proc sys dev/pts dev; do umount -l "$r/$m" 2>/dev/null || true; done
	tar --numeric-owner -C "$r" -cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
	cleanup
	trap - EXIT INT TERM
	log "cached $tarball ($(du -h "$tarball" | cut -f1))"
fi

log "importing $tarball as $IMAGE"
docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'USER 1000:1000' \
	--change 'CMD ["sleep", "infinity"]' \
	"$tarball" "$IMAGE" >/dev/null
echo "$IMAGE"
