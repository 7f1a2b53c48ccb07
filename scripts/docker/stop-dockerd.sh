#!/bin/sh
# stop-dockerd.sh: stop the private Docker Engine that start-dockerd.sh
# started (and the containerd it manages), after removing any container
# left on it. Safe to run when no daemon is running. The data root (images,
# including the cached base image) stays in $LEGORL_DOCKER_DIR.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${LEGORL_DOCKER_DIR:-$root/.cache/docker}
sock=$dir/docker.sock
pidfile=$dir/dockerd.pid

log() { echo "stop-dockerd: $*" >&2; }

if [ ! -f "$pidfile" ]; then
	log "no daemon running (no $pidfile)"
	exit 0
fi
pid=$(cat "$pidfile")
if ! kill -0 "$pid" 2>/dev/null; then
	log "daemon $pid is gone; cleaning up"
	rm -f "$pidfile" "$sock"
	exit 0
fi

# Containers the tests left behind would be a bug; remove them so the
# daemon stops cleanly, and say so.
if command -v curl >/dev/null; then
	ids=$(curl -fsS --max-time 5 --unix-socket "$sock" 'http://d/containers/json?all=1' 2>/dev/null |
		grep -o '"Id":"[0-9a-f]*"' | cut -d'"' -f4 || true)
	for id in $ids; do
		log "removing leftover container $id"
		curl -fsS --max-time 20 -X DELETE --unix-socket "$sock" "http://d/containers/$id?force=1" >/dev/null 2>&1 || true
	done
fi

log "stopping dockerd (pid $pid)"
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 60 ]; then
		log "dockerd did not stop within 30 s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		break
	fi
	sleep 0.5
done
rm -f "$pidfile" "$sock"
# Mounts dockerd may leave under the exec root on a hard kill.
if command -v findmnt >/dev/null; then
	findmnt -rn -o TARGET | grep "^$dir/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
fi
# The parent cgroups dockerd made (cgroupfs driver), if empty now.
for d in /sys/fs/cgroup/*/docker /sys/fs/cgroup/docker; do
	[ -d "$d" ] && rmdir "$d" 2>/dev/null || true
done
log "stopped"
