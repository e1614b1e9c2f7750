from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

# conda-lock's poetry-core puts its _vendor folder first on sys.path, with an older
# fastjsonschema; tests that import conda-lock in this process must not make envgen's schema
# checks (which import fastjsonschema lazily) pick that copy up (envgen/lock/conda_lock_hash.py)
import fastjsonschema  # noqa: F401
import pytest

# the stand-ins: local conda channel, wheel index, lock matrix (support.lock_env) and a PyPI
# look-alike with its matrix (support.harvest_env), for tests/lock, tests/harvest, tests/faults
pytest_plugins = ["support.lock_env", "support.harvest_env"]

FIXTURE_MATRIX = Path(__file__).parent / "fixtures" / "matrix"

# A shell starts a background job (`cmd &` without job control) with SIGINT ignored, and an
# ignored signal stays ignored in every child: envgen run by the Ctrl-C tests would never see
# the KeyboardInterrupt they send. A handler (unlike "ignore") resets to the default at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Tests load many throw-away matrices: no compiled copies of them in the user's cache (the
# compiled cache has its own tests, which turn it on in a temporary cache directory). Set here,
# so subprocesses started by tests inherit it.
os.environ["ENVGEN_FACTS_CACHE"] = "0"
os.environ["ENVGEN_RECORDS_CACHE"] = "0"


@pytest.fixture
def fixture_matrix() -> Path:
    """The small hand-written matrix unit tests run against (never the live snapshot)."""
    return FIXTURE_MATRIX


@pytest.fixture
def matrix_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture matrix, for tests that break it."""
    dst = tmp_path / "matrix"
    shutil.copytree(FIXTURE_MATRIX, dst)
    return dst


@pytest.fixture
def facts(fixture_matrix):
    from envgen.facts import load_facts

    return load_facts(fixture_matrix)


class NetworkBlocked(OSError):
    """Raised (as an OSError, so sockets are closed cleanly) when a test leaves loopback."""


def _is_loopback(address) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if not isinstance(host, str):
        return True
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_internet(request, monkeypatch):
    """Tests reach loopback servers only; a test marked `network` may go further."""
    if request.node.get_closest_marker("network"):
        return
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
            raise NetworkBlocked(f"test tried to reach {address}; tests must not use the network "
                               "(serve the data on 127.0.0.1 instead)")

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(scope="session")
def docker_ready() -> dict[str, str]:
    """dockerd, the debootstrap base image and a registry on 127.0.0.1:5000, brought up by
    tests/support/docker-up.sh (installs Debian's packages if missing; needs root). Skips when
    that cannot be done, unless ENVGEN_REQUIRE_DOCKER=1 (CI), where it fails."""
    script = Path(__file__).parent / "support" / "docker-up.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        reason = f"docker-up.sh failed ({proc.returncode}): {proc.stderr[-1500:]}"
        if os.environ.get("ENVGEN_REQUIRE_DOCKER"):
            pytest.fail(reason)
        pytest.skip(reason)
    return {"base": os.environ.get("ENVGEN_TEST_BASE", "local/debian:bookworm"),
            "registry": os.environ.get("ENVGEN_TEST_REGISTRY", "127.0.0.1:5000")}
