from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mini_pypi import make_matrix, populate
from support.index_server import IndexServer


@pytest.fixture
def index_server():
    with IndexServer() as server:
        populate(server)
        yield server


@pytest.fixture
def mini_matrix(tmp_path, index_server) -> Path:
    return make_matrix(tmp_path, index_server.url)


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
