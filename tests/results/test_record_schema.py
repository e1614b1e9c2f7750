"""The verify record's JSON Schema (envgen/schemas/result-record.schema.json): both validating
libraries agree on it, the rules a schema cannot say are checked in Python, and every committed
record still loads and round-trips."""

from __future__ import annotations

import copy
import json
import math

import pytest
from results_data import REPO, VERIFY, load_json

from envgen.results.record import ResultRecord, validate
from envgen.results.store import parse_any
from envgen.schemas.check import SCHEMA_DIR, check, validator

COMMITTED = sorted((REPO / "matrix" / "results").glob("*/*.json"))
DAMAGE = [None, 5, -1, 1.5, 2.0, True, "", "x", "a\n", [], ["x"], {}, {"a": 1}, math.nan,
          math.inf]
DELETE = object()


def _nodes(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:2]):
            yield from _nodes(item, (*path, i))


def _mutations(doc):
    """``doc`` with each value (two items per list) replaced by each DAMAGE value or removed."""
    for path in list(_nodes(doc))[1:]:
        for value in [DELETE, *DAMAGE]:
            damaged = copy.deepcopy(doc)
            node = damaged
            for part in path[:-1]:
                node = node[part]
            if value is DELETE:
                del node[path[-1]]
            else:
                node[path[-1]] = value
            yield damaged


def test_committed_records_exist():
    assert COMMITTED


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_every_committed_record_loads_and_round_trips(path):
    data = load_json(path)
    record, problems = parse_any(data)
    assert problems == []
    assert record.to_dict() == data
    assert type(record).from_dict(record.to_dict()) == record


def test_the_schema_is_draft_2020_12():
    import jsonschema

    schema = json.loads((SCHEMA_DIR / "result-record.schema.json").read_text("utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", VERIFY[:2], ids=lambda p: p.stem)
def test_both_libraries_agree_on_every_kind_of_damage(path):
    import jsonschema

    reference = jsonschema.Draft202012Validator(
        json.loads((SCHEMA_DIR / "result-record.schema.json").read_text("utf-8")))
    fast = validator("result-record")
    seen = 0
    for damaged in _mutations(load_json(path)):
        theirs = sorted({tuple(e.absolute_path) for e in reference.iter_errors(damaged)}, key=str)
        ours = sorted({e.path for e in check(damaged, "result-record")}, key=str)
        assert ours == theirs, damaged
        assert fast.is_valid(damaged) == (not theirs), damaged
        seen += bool(theirs)
    assert seen > 200


@pytest.mark.parametrize(("field", "value", "message"), [
    ("gpu", {"model": "NVIDIA H200", "count": 8.0, "driver": None, "cuda_driver": None},
     "$.gpu.count: 8.0 is not written as an integer"),
    ("durations", {"ops": 1, "smoke": math.nan, "total": 3},
     "$.durations.smoke: must be a finite number, got nan"),
    ("durations", {"ops": 1, "smoke": 2, "total": math.inf},
     "$.durations.total: must be a finite number, got inf"),
    ("lock_hash", "sha256:" + "a" * 64 + "\n",
     "$.lock_hash: 'sha256:" + "a" * 64 + "\\n' is not sha256:<64 hex digits>"),
    ("tools", {"": "1.0"}, "$.tools: key '' is not a tool name (not empty)"),
])
def test_what_the_schema_cannot_say_is_checked_too(field, value, message):
    data = load_json(VERIFY[0]) | {field: value}
    assert [str(p) for p in validate(data)] == [message]


def test_a_missing_schema_key_is_one_problem_among_the_others():
    data = {k: v for k, v in load_json(VERIFY[0]).items() if k not in ("schema", "status")}
    assert [str(p) for p in validate(data)] == ["$: missing key 'schema'",
                                                "$: missing key 'status'"]


def test_numbers_are_normalised_so_the_id_does_not_depend_on_their_spelling():
    data = load_json(VERIFY[0])
    data["durations"] = {k: int(v) for k, v in data["durations"].items()}
    record = ResultRecord.from_dict(data)
    assert all(isinstance(v, float) for v in record.to_dict()["durations"].values())
    assert record.to_dict() == data
