from __future__ import annotations

from pathlib import Path

import pytest
from results_data import RECORDS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder: the fixture records stored under matrix/results/, a docs/ folder and
    a README with the table markers."""
    from envgen.results import add

    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    add(root / "matrix" / "results", RECORDS)
    (root / "README.md").write_text(
        "# demo\n\nIntro.\n\n<!-- envgen:table:start -->\nold table\n<!-- envgen:table:end -->\n"
        "\nMore text.\n", encoding="utf-8")
    return root

