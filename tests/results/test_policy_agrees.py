"""One policy, four answers: for the same request, `envgen resolve --json`, envgen.api.resolve,
the table's rows and the selector's data put the same combination first (the fixture matrix,
its records in the matrix's results/ and the user's data dir)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from results_data import RECORDS
from support.run import in_process

from envgen.facts.matrix import Matrix
from envgen.resolve import Request
from envgen.results.selector import COLUMNS, selector_data
from envgen.results.store import add, load_many
from envgen.results.table import load_table

VERIFIED = "deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"  # T4, known-good
NEWEST_BAD = "deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"  # T2 failed last


@pytest.fixture
def matrix(fixture_matrix, tmp_path, monkeypatch) -> Matrix:
    """The fixture matrix with half the records shipped, half in the user's data dir."""
    root = tmp_path / "matrix"
    shutil.copytree(fixture_matrix, root)
    data = tmp_path / "data"
    shipped = [p for p in RECORDS if "older" not in p.name]
    add(root / "results", shipped)
    add(data / "results", [p for p in RECORDS if p not in shipped])
    monkeypatch.setenv("ENVGEN_DATA", str(data))
    return Matrix(matrix_dir=root, data_dir=data)


def _first_selector_row(doc: dict, framework: str) -> str:
    col = {c: i for i, c in enumerate(COLUMNS)}
    ax = doc["axes"]
    for row in doc["rows"]:
        f = {n: ax[n][row[col[n]]] for n in ("framework", "torch", "cuda", "python", "os")}
        if f["framework"] == framework:
            v = ax["framework_version"][row[col["framework_version"]]][1]
            return (f"{framework}-{v}-torch{f['torch']}-cu{f['cuda'].replace('.', '')}"
                    f"-py{f['python']}-{f['os'].replace('-', '')}-x86_64")
    raise AssertionError(f"no {framework} row")


def test_cli_api_table_and_selector_agree(matrix, capsys, monkeypatch, tmp_path: Path):
    from envgen.api import resolve

    run = in_process(matrix.matrix_dir, capsys, monkeypatch, tmp_path)
    code, out, err = run("resolve", "--framework", "deepspeed", "--limit", "3", "--json")
    assert code == 0, err
    doc = json.loads(out)
    cli = doc["combinations"][0]
    assert cli["tier"]["tier"] == "T4" and cli["tier"]["status"] == "known-good"
    assert cli["tier"]["records"][0]["date"] and cli["tier"]["records"][0]["machine"]
    assert doc["policy"] == {"prefer": "verified", "min_tier": None}
    api = resolve(Request(framework="deepspeed"), matrix=matrix, limit=None)
    ids = [c.id for c in api.combinations]
    table = load_table(matrix)
    first_row = next(r.combination for r in table.rows if r.framework == "deepspeed")
    sel = selector_data(matrix.facts, table, load_many(matrix.results_dirs()), explain=False,
                        upstream=matrix.upstream)
    assert cli["id"] == api.best.id == first_row == _first_selector_row(sel, "deepspeed") \
        == VERIFIED
    assert ids[-1] == NEWEST_BAD  # known-bad: last, though the resolver ranks it first
    # --prefer newest: the newest that is not known-bad
    code, out, _ = run("resolve", "--framework", "deepspeed", "--prefer", "newest", "--json")
    assert json.loads(out)["combinations"][0]["id"] != NEWEST_BAD


def test_text_shows_the_evidence_and_min_tier_explains(matrix, capsys, monkeypatch, tmp_path):
    run = in_process(matrix.matrix_dir, capsys, monkeypatch, tmp_path)
    code, out, _ = run("resolve", "--framework", "deepspeed", "--limit", "2")
    assert code == 0
    assert "  evidence   T4 multi-GPU, known-good: " in out and f"id: {VERIFIED}" in out
    assert "#  tier" in out
    code, out, err = run("resolve", "--framework", "megatron-core", "--min-tier", "T3")
    assert code == 3 and "Nearest to verified" in err and "T2 built" in err
    code, out, _ = run("resolve", "--framework", "megatron-core", "--min-tier", "T3", "--json")
    assert code == 3
    error = json.loads(out)["error"]
    assert error["explanation"]["min_tier"] == "T3" and error["explanation"]["nearest"]
