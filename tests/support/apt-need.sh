#!/usr/bin/env bash
# apt-need.sh PREFIX PATH:PACKAGE...  — install with Debian's apt the packages whose file is
# missing (one `apt-get update` first, only when something is missing). Shared by
# docker-up.sh, browser-up.sh and shells-up.sh; needs root. PREFIX names the caller in the log.
set -euo pipefail
who=$1; shift
need=()
for pair in "$@"; do
    [ -x "${pair%%:*}" ] || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    printf '%s: apt-get install %s\n' "$who" "${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
