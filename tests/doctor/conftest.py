"""Fixtures the doctor's rule tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge
from envgen.doctor.reports import parse_report

ROOT = Path(__file__).parents[2]


@pytest.fixture
def diagnose(facts):
    """Judge a pasted report's text against the fixture matrix and the shipped catalog."""
    catalog = load_catalog(ROOT / "matrix")

    def run(text: str):
        return judge(parse_report(text).snapshot, facts, catalog, origin="report")

    return run
