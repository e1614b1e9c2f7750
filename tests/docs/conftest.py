"""The built docs site, served on 127.0.0.1, and headless Chromium driven by Selenium.

Chromium and its driver are Debian's (`apt-get install chromium chromium-driver`;
`tests/support/browser-up.sh` installs them, and `.ci/run` runs it). Without them the browser
tests skip with the reason, unless ENVGEN_REQUIRE_BROWSER=1 (CI), where they fail.
Screenshots go to ``$ENVGEN_ARTIFACTS/screenshots`` (default: ``artifacts/`` in the checkout,
which CI uploads).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("ENVGEN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ENVGEN_CHROMEDRIVER", "/usr/bin/chromedriver")
# as the machine's own browser probe: no background requests to the closed network
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                  "--hide-scrollbars")


def _unavailable(reason: str):
    if os.environ.get("ENVGEN_REQUIRE_BROWSER"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The committed docs site, built strictly (mkdocs.yml as in the repository); or the site
    already built in ``ENVGEN_TEST_SITE`` (to iterate on the page's script without a build)."""
    if os.environ.get("ENVGEN_TEST_SITE"):
        return Path(os.environ["ENVGEN_TEST_SITE"])
    site = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(REPO / "mkdocs.yml"), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return site


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def site_url(built_site):
    """The site served on a loopback port (a real HTTP server: fetch() of the data works)."""
    handler = functools.partial(_Quiet, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        _unavailable(f"selenium is not installed ({exc}): pip install -e '.[test]'")
    found = {path: shutil.which(path) for path in (CHROMIUM, CHROMEDRIVER)}
    for path, where in found.items():
        if not where:
            _unavailable(f"{path} not found: run `bash tests/support/browser-up.sh` (as root: "
                         "Debian's chromium and chromium-driver), or name another Chromium and "
                         "its driver in ENVGEN_CHROMIUM / ENVGEN_CHROMEDRIVER")
    options = webdriver.ChromeOptions()
    options.binary_location = found[CHROMIUM]
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(found[CHROMEDRIVER]), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    out = Path(os.environ.get("ENVGEN_ARTIFACTS", REPO / "artifacts")) / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out
