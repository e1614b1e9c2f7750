#!/usr/bin/env bash
# Bring up what envgen's Docker integration tests build against, idempotently:
#   1. Debian's docker.io, containerd, runc, debootstrap, docker-registry and ccache (the
#      client of the classic engine's ccache store test) (apt, if missing)
#   2. dockerd on unix:///var/run/docker.sock (started in the background if not answering)
#   3. local/debian:bookworm, a minbase debootstrap imported as an image (Docker Hub is not
#      reachable from CI or the dev machines, so tests build FROM this); ENVGEN_TEST_BASE=
#      local/debian:trixie makes that suite's instead (the tag is the Debian suite)
#   4. a registry on 127.0.0.1:5000 (filesystem storage, no auth)
# Used by .ci/run and by the tests' session fixture (tests/support/docker_env.py).
# Needs root (apt, dockerd). Prints one line per step; exits non-zero with the reason.
set -euo pipefail

DOCKER=/usr/bin/docker            # Debian's client; PATH may hold a static one without BuildKit
BASE=${ENVGEN_TEST_BASE:-local/debian:bookworm}
REGISTRY=${ENVGEN_TEST_REGISTRY:-127.0.0.1:5000}
STATE=${ENVGEN_TEST_STATE:-/var/lib/envgen-test}
log() { printf 'docker-up: %s\n' "$*" >&2; }

bash "$(dirname "$0")/apt-need.sh" docker-up /usr/bin/docker:docker.io \
    /usr/bin/containerd:containerd /usr/sbin/runc:runc /usr/sbin/debootstrap:debootstrap \
    /usr/bin/docker-registry:docker-registry /usr/bin/ccache:ccache

mkdir -p "$STATE"
if ! $DOCKER version >/dev/null 2>&1; then
    log "starting dockerd (log: $STATE/dockerd.log)"
    setsid nohup dockerd --host=unix:///var/run/docker.sock >"$STATE/dockerd.log" 2>&1 &
    for _ in $(seq 1 100); do $DOCKER version >/dev/null 2>&1 && break; sleep 0.2; done
    $DOCKER version >/dev/null 2>&1 || { tail -20 "$STATE/dockerd.log" >&2; exit 1; }
fi
log "dockerd $($DOCKER version --format '{{.Server.Version}}')"

if ! $DOCKER image inspect "$BASE" >/dev/null 2>&1; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null \
             || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    suite=${BASE##*:}
    root="$STATE/$suite"
    rm -rf "$root"
    log "debootstrap $suite from $mirror (about a minute)"
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$STATE/debootstrap.log" 2>&1 \
        || { tail -20 "$STATE/debootstrap.log" >&2; exit 1; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | $DOCKER import - "$BASE" >/dev/null
    rm -rf "$root"
fi
log "base image $BASE"

if ! (exec 3<>"/dev/tcp/${REGISTRY%:*}/${REGISTRY#*:}") 2>/dev/null; then
    mkdir -p "$STATE/registry"
    cat >"$STATE/registry.yml" <<EOF
version: 0.1
storage:
  filesystem:
    rootdirectory: $STATE/registry
  delete:
    enabled: true
http:
  addr: $REGISTRY
log:
  level: warn
EOF
    log "starting registry on $REGISTRY"
    setsid nohup docker-registry serve "$STATE/registry.yml" >"$STATE/registry.log" 2>&1 &
    for _ in $(seq 1 50); do
        (exec 3<>"/dev/tcp/${REGISTRY%:*}/${REGISTRY#*:}") 2>/dev/null && break; sleep 0.2
    done
    (exec 3<>"/dev/tcp/${REGISTRY%:*}/${REGISTRY#*:}") 2>/dev/null \
        || { tail -20 "$STATE/registry.log" >&2; exit 1; }
fi
log "registry $REGISTRY"
