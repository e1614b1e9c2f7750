"""The table's typed rows: Row / Evidence / Citation round-trip through to_dict / from_dict,
the JSON the table renders validates against envgen/schemas/compatibility-table.schema.json
(with jsonschema and with envgen's own check), and the resolver's T0 rows are cached under the
key of the compiled facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from results_data import GOLDEN, REPO

from envgen.errors import DataError
from envgen.results import load
from envgen.results.table import (
    SCHEMA_NAME,
    Candidates,
    Citation,
    Evidence,
    Row,
    Table,
    make_table,
    matrix_candidates,
)
from envgen.results.table_render import (
    render_json,
)
from envgen.schemas.check import check

SCHEMA = REPO / "envgen" / "schemas" / f"{SCHEMA_NAME}.schema.json"


@pytest.fixture
def table(facts, project) -> Table:
    return make_table(facts, load(project / "matrix" / "results"))


def _jsonschema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", [GOLDEN / "compatibility.json",
                                  REPO / "docs" / "compatibility.json"],
                         ids=["golden", "committed"])
def test_the_rendered_json_validates_against_the_schema(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert [e.message for e in _jsonschema().iter_errors(doc)] == []
    assert check(doc, SCHEMA_NAME) == []


def test_render_json_output_validates(table, project):
    doc = json.loads(render_json(table, project))
    assert [e.message for e in _jsonschema().iter_errors(doc)] == []
    assert check(doc, SCHEMA_NAME) == []


def test_rows_round_trip(table):
    assert any(r.evidence for r in table.rows)
    for row in table.rows:
        assert Row.from_dict(row.to_dict()) == row
        assert all(Evidence.from_dict(e.to_dict()) == e for e in row.evidence)
    assert Table.from_dict(table.to_dict()) == table


def test_the_json_document_reads_back_to_the_same_bytes(table, project):
    text = render_json(table, project)
    again = Table.from_dict(json.loads(text))
    assert json.dumps(again.to_dict(), indent=2, ensure_ascii=False) + "\n" == text
    assert again.summary == table.summary


def test_a_document_that_is_not_a_table_names_its_problems():
    with pytest.raises(DataError) as exc:
        Table.from_dict({"generated": "x", "schema": 3, "summary": {}, "rows": [{"tier": "T9"}]})
    assert "schema" in exc.value.message and "rows[0]" in exc.value.message
    assert "envgen table --write" in exc.value.hint


def test_citations_keep_a_note_only_when_there_is_one():
    plain = Citation(kind="ci", what="w", source="https://x", observed="2026-01-01")
    assert "note" not in plain.to_dict()
    noted = Citation.from_dict({**plain.to_dict(), "note": "n"})
    assert noted.note == "n" and Citation.from_dict(noted.to_dict()) == noted


class FakeMatrix:
    """What load_table / matrix_candidates read of envgen.facts.matrix.Matrix."""

    def __init__(self, facts, key: str | None) -> None:
        self._facts, self.facts_key, self.reads = facts, key, 0

    @property
    def facts(self):
        self.reads += 1
        return self._facts


def test_the_t0_rows_are_cached_under_the_facts_key(facts, tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "1")
    want = Candidates.of(facts)
    assert want.ids and want.frameworks == tuple(facts.framework_names)
    matrix = FakeMatrix(facts, "k1")
    assert matrix_candidates(matrix) == want and matrix.reads == 1
    assert matrix_candidates(matrix) == want and matrix.reads == 1  # from the cache
    assert matrix_candidates(FakeMatrix(facts, "k2")).ids == want.ids  # another key: computed
    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "0")
    off = FakeMatrix(facts, "k1")
    assert matrix_candidates(off) == want and off.reads == 1
    none = FakeMatrix(facts, None)
    assert matrix_candidates(none) == want and none.reads == 1


def test_evidence_paths_are_relative_to_the_root_given(table, project):
    row = next(r for r in table.rows if r.evidence)
    e = row.evidence[0]
    assert e.to_dict()["path"] == e.path.as_posix()
    rel = e.to_dict(project)["path"]
    assert rel.startswith("matrix/results/") and (project / Path(rel)) == e.path
