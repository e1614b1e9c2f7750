#!/usr/bin/env bash
# Install what the docs site's browser tests (tests/docs/test_site_browser.py) drive, idempotently:
# Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver; Selenium
# talks to the driver, nothing is downloaded by Selenium itself). Needs root (apt). Used by
# .ci/run; prints one line per step; exits non-zero with the reason.
set -euo pipefail
log() { printf 'browser-up: %s\n' "$*" >&2; }

if [ -n "${ENVGEN_CHROMIUM:-}" ]; then  # another Chromium named (e.g. a CI image's Chrome)
    log "using ENVGEN_CHROMIUM=$ENVGEN_CHROMIUM and ENVGEN_CHROMEDRIVER=${ENVGEN_CHROMEDRIVER:-}"
    exit 0
fi
bash "$(dirname "$0")/apt-need.sh" browser-up /usr/bin/chromium:chromium \
    /usr/bin/chromedriver:chromium-driver
log "$(/usr/bin/chromium --version 2>/dev/null | head -1); $(/usr/bin/chromedriver --version 2>/dev/null | head -1)"
