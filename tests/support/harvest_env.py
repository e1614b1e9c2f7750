"""Real local stand-ins for the harvester's tests (and the fault suite; registered for every
test by tests/conftest.py): a small PyPI look-alike on loopback (support.mini_pypi) and a
matrix whose sources.toml points at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.index_server import IndexServer
from support.mini_pypi import make_matrix, populate


@pytest.fixture
def index_server():
    with IndexServer() as server:
        populate(server)
        yield server


@pytest.fixture
def mini_matrix(tmp_path, index_server) -> Path:
    return make_matrix(tmp_path, index_server.url)


@pytest.fixture
def whole_matrix(tmp_path, index_server) -> Path:
    """Like mini_matrix, with the real whole-download limit: the (small) wheels are downloaded
    whole and checked against their sha256."""
    return make_matrix(tmp_path / "whole", index_server.url, max_whole_download_mb=64)


@pytest.fixture
def committed(mini_matrix, fast):
    """A matrix with a snapshot already written (the 'old' snapshot), seeded with its own
    cache so the test's run fetches everything again."""
    from envgen.harvest.update import UpdateOptions, update_matrix

    update_matrix(
        mini_matrix, UpdateOptions(write=True, **{**fast, "cache_dir": fast["cache_dir"] / "seed"})
    )
    return mini_matrix


@pytest.fixture
def fast(tmp_path):
    """UpdateOptions kwargs for quick tests: tiny timeouts/backoff, a private cache."""
    return {
        "cache_dir": tmp_path / "cache",
        "timeout": 2.0,
        "retries": 2,
        "backoff": 0.01,
        "today": "2026-11-21",
        "jobs": 4,
    }
