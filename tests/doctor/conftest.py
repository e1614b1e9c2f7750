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


@pytest.fixture(scope="session")
def shipped():
    """The shipped matrix's facts and catalog (rules that need its builds and driver figures)."""
    from envgen.facts import load_facts

    return load_facts(ROOT / "matrix"), load_catalog(ROOT / "matrix")


@pytest.fixture
def judge_shipped(shipped):
    """Judge a pasted report's text (and the frameworks named) against the shipped matrix."""
    facts, catalog = shipped

    def run(text: str, frameworks=()):
        return judge(parse_report(text).snapshot, facts, catalog, origin="report",
                     frameworks=frameworks)

    return run
