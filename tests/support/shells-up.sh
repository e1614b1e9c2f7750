#!/usr/bin/env bash
# Install the shells whose completion `envgen completion` is tested in (tests/unit/
# test_completion.py): Debian's zsh and fish (bash is there). Idempotent; needs root (apt).
set -euo pipefail
bash "$(dirname "$0")/apt-need.sh" shells-up /usr/bin/zsh:zsh /usr/bin/fish:fish
