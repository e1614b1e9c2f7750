from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURE_MATRIX = Path(__file__).parent / "fixtures" / "matrix"


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
