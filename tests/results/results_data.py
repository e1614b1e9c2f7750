"""Paths of the result-record fixtures (tests/fixtures/results/), shared by tests/results/."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "fixtures" / "results"
GOLDEN = FIXTURES / "golden"
INVALID = FIXTURES / "invalid"
RECORDS = sorted(FIXTURES.glob("*.json"))  # the valid records, as verify runs write them
REPO = Path(__file__).parent.parent.parent
