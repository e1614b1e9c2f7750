#!/usr/bin/env bash
# Install the shells whose completion `envgen completion` is tested in (tests/unit/
# test_completion.py): Debian's zsh and fish (bash is there). Idempotent; needs root (apt).
set -euo pipefail
need=()
for pair in /usr/bin/zsh:zsh /usr/bin/fish:fish; do
    [ -x "${pair%%:*}" ] || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    printf 'shells-up: apt-get install %s\n' "${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
