"""Paths of the result-record fixtures (tests/fixtures/results/), shared by tests/results/."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "fixtures" / "results"
GOLDEN = FIXTURES / "golden"
INVALID = FIXTURES / "invalid"
RECORDS = sorted(FIXTURES.glob("*.json"))  # the valid records of both kinds, as written
VERIFY = [p for p in RECORDS if json.loads(p.read_text(encoding="utf-8"))["schema"] == 1]
ATTEMPTS = [p for p in RECORDS if p not in VERIFY]  # "schema": "attempt/1"
REPO = Path(__file__).parent.parent.parent


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
