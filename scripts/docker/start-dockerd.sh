#!/bin/sh
# start-dockerd.sh: start a private Docker Engine for the sandbox/docker tests.
#
# Installs Debian's docker.io (--no-install-recommends) when dockerd is
# missing, then starts dockerd on a private socket, data root and exec root
# under $LEGORL_DOCKER_DIR (default: .cache/docker in the repository), with
# no bridge, no iptables and no IP forwarding or masquerading, so it changes
# nothing on the host's network. Idempotent: a daemon already answering on
# the socket is reused. Prints the socket as a DOCKER_HOST value
# (unix:///.../docker.sock) on stdout; progress goes to stderr.
#
# Usage: scripts/docker/start-dockerd.sh   (as root)
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${LEGORL_DOCKER_DIR:-$root/.cache/docker}
sock=$dir/docker.sock
host=unix://$sock

log() { echo "start-dockerd: $*" >&2; }

answers() {
	# The engine's /_ping answers "OK" once it serves the API.
	curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1
}

if [ "$(id -u)" != 0 ]; then
	log "must run as root (dockerd needs it)"
	exit 1
fi

if [ -S "$sock" ] && command -v curl >/dev/null && answers; then
	log "reusing the daemon on $sock"
	echo "$host"
	exit 0
fi

need=""
command -v dockerd >/dev/null || need="$need docker.io"
command -v curl >/dev/null || need="$need curl"
command -v containerd >/dev/null || need="$need containerd"
if [ -n "$need" ]; then
	log "installing$need from Debian (a minute or two the first time)"
	# Keep the package's init script from starting a default daemon (which
	# would create docker0 and iptables rules): policy-rc.d says "no".
	made_policy=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		made_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $need >&2
	[ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
fi

mkdir -p "$dir/data" "$dir/exec"
if [ -f "$dir/dockerd.pid" ] && kill -0 "$(cat "$dir/dockerd.pid")" 2>/dev/null; then
	log "a dockerd (pid $(cat "$dir/dockerd.pid")) is starting or stuck; waiting for it"
else
	rm -f "$sock" "$dir/dockerd.pid"
	log "starting dockerd on $sock (log: $dir/dockerd.log)"
	# setsid: the daemon outlives this script and its terminal.
	setsid dockerd \
		--host "$host" \
		--data-root "$dir/data" \
		--exec-root "$dir/exec" \
		--pidfile "$dir/dockerd.pid" \
		--iptables=false --ip6tables=false --bridge=none --ip-forward=false --ip-masq=false \
		--userland-proxy=false \
		--log-level warn \
		</dev/null >"$dir/dockerd.log" 2>&1 &
fi

i=0
until answers; do
	i=$((i + 1))
	if [ $i -gt 120 ]; then
		log "dockerd did not answer on $sock within 60 s; its log:"
		tail -n 30 "$dir/dockerd.log" >&2 || true
		exit 1
	fi
	sleep 0.5
done
log "dockerd answers on $sock"
echo "$host"
