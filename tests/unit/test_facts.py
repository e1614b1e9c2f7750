from __future__ import annotations

import json
import os
import re
import shutil
import sys
from functools import cache
from pathlib import Path

import pytest

from envgen.errors import DataError
from envgen.facts import find_matrix_dir, load_facts
from envgen.schemas.check import check, validator, where

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"


def test_loads_harvested_and_curated(facts):
    assert {o for o in facts.oses} == {"ubuntu-22.04", "ubuntu-24.04", "debian-12", "centos-7"}
    assert facts.toolkits["12.1"].max_gcc == 12
    assert facts.toolkits["12.1"].min_driver == "525.60.13"  # curated, attached to harvested
    assert facts.framework_names == ("deepspeed", "megatron-core", "colossalai")


def test_curated_variants_become_builds_with_python_from_pypi(facts):
    curated = {(b.version, b.cuda): b for b in facts.torch_builds if b.curated}
    # 2.5.1 cu124 is harvested from PyPI, so only cu118 and cu121 are synthesized
    assert set(curated) == {("2.5.1", "11.8"), ("2.5.1", "12.1")}
    b = curated[("2.5.1", "12.1")]
    assert b.pin == "torch==2.5.1+cu121"
    assert b.index == "pytorch-cu121"
    assert b.glibc == "2.17"  # from [[index_glibc]] torch <2.6
    assert set(b.python) == {"3.9", "3.10", "3.11", "3.12", "3.13"}
    assert b.nccl is None


def test_variant_of_unharvested_release_is_skipped(facts):
    assert not [b for b in facts.torch_builds if b.version == "3.0.0"]


def test_curated_record_without_source_is_rejected(matrix_copy):
    path = matrix_copy / "curated" / "os.toml"
    path.write_text(path.read_text().replace('source = "https://example.invalid/debian-12"', ""))
    with pytest.raises(DataError, match=r"curated/os.toml os\[2\] \(debian-12\): missing "
                                        r"'source'"):
        load_facts(matrix_copy)


def test_all_problems_reported_at_once(matrix_copy):
    torch = matrix_copy / "harvested" / "torch.json"
    doc = json.loads(torch.read_text())
    doc["builds"][0]["version"] = "1.13.1.x"  # the right shape, but no PEP 440 version
    doc["builds"][1]["python"] = ["three"]
    torch.write_text(json.dumps(doc))
    (matrix_copy / "curated" / "cuda.toml").write_text("this is = = not toml")
    with pytest.raises(DataError) as exc:
        load_facts(matrix_copy)
    text = str(exc.value)
    assert "3 problem(s)" in text
    assert "harvested/torch.json builds[0].version (1.13.1.x 11.7 linux-x86_64): '1.13.1.x' " \
           "is not a PEP 440 version" in text
    assert "harvested/torch.json builds[1].python[0] (2.1.2 12.1 linux-x86_64): 'three' is " \
           "not a Python version" in text
    assert "curated/cuda.toml: not valid TOML" in text
    # the fix names each file and how to repair that kind of file
    assert "fix curated/cuda.toml" in exc.value.hint
    assert "regenerate harvested/torch.json with `envgen matrix update --write`" in text


def test_missing_harvested_file_says_how_to_create_it(matrix_copy):
    (matrix_copy / "harvested" / "cuda.json").unlink()
    with pytest.raises(DataError, match=r"cuda.json: file is missing \(create it with"):
        load_facts(matrix_copy)


def test_find_matrix_dir_explicit_and_env(tmp_path, fixture_matrix, monkeypatch):
    assert find_matrix_dir(fixture_matrix) == fixture_matrix
    monkeypatch.setenv("ENVGEN_MATRIX_DIR", str(fixture_matrix))
    assert find_matrix_dir() == fixture_matrix
    with pytest.raises(DataError, match="no matrix data at") as exc:
        find_matrix_dir(tmp_path)
    assert "--matrix-dir" in exc.value.hint


def test_default_matrix_dir_is_the_checkout(monkeypatch):
    monkeypatch.delenv("ENVGEN_MATRIX_DIR", raising=False)
    found = find_matrix_dir()
    assert (found / "curated" / "policy.toml").is_file()


def test_tests_cannot_reach_the_internet():
    import socket

    with pytest.raises(OSError, match="tests must not use the network"):
        socket.create_connection(("203.0.113.7", 443), timeout=1)


# ------------------------------------------------------------------------------ schemas

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "envgen" / "schemas"
FILES = {  # matrix file → schema
    "harvested/torch.json": "harvested-torch",
    "harvested/frameworks.json": "harvested-frameworks",
    "harvested/cuda.json": "harvested-cuda",
    "harvested/os_toolkits.json": "harvested-os-toolkits",
    **{f"curated/{n}.toml": f"curated-{n}" for n in (
        "os", "cuda", "torch", "frameworks", "policy", "toolchain", "images", "gpus",
        "compilers", "upstream", "doctor", "preflight", "ngc")},
    "sources.toml": "sources",
    "cells.toml": "cells",
}


def _read(path: Path):
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    return tomllib.loads(path.read_text(encoding="utf-8"))


@cache
def _jsonschema(name: str):
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(
        (SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8")))


def test_every_matrix_file_has_a_schema_and_every_schema_is_draft_2020_12():
    import jsonschema

    assert {f"{n}.schema.json" for n in FILES.values()} | {
        "lock-manifest.schema.json", "attempt-record.schema.json",
        "result-record.schema.json"} <= {p.name for p in SCHEMAS.glob("*.schema.json")}
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text(encoding="utf-8"))
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(schema)
    for path in SCHEMAS.glob("*.schema.json"):  # and both libraries read every one alike
        validator(path.name.removesuffix(".schema.json"))


@pytest.mark.parametrize(("matrix", "rel"), [
    (m, rel) for m in ("matrix", "tests/fixtures/matrix") for rel in FILES
    if (ROOT / m / rel).exists()])  # the fixture has no sources.toml, cells.toml
def test_matrix_files_validate_against_their_schemas(matrix, rel):
    doc = _read(ROOT / matrix / rel)
    assert [e.message() for e in check(doc, FILES[rel])] == []
    assert [e.message for e in _jsonschema(FILES[rel]).iter_errors(doc)] == []


def test_both_matrices_load():
    assert load_facts(ROOT / "matrix").torch_builds
    assert load_facts(ROOT / "tests" / "fixtures" / "matrix").torch_builds


@pytest.mark.integration
def test_what_the_harvester_writes_validates(committed):
    """The schemas describe what `envgen matrix update --write` really writes."""
    for name in ("torch", "frameworks", "cuda"):
        doc = _read(committed / "harvested" / f"{name}.json")
        assert next(iter(doc.values())) is not None
        assert [e.message() for e in check(doc, f"harvested-{name}")] == []


DAMAGE = [5, 1.5, True, None, "x", "", "12.1\n", "x\ty", [], ["x"], [5], {}, {"a": 1}]


def _mutations(doc):
    """``doc`` with one value of its first records replaced by each DAMAGE value or removed."""
    tables = [((), doc)]
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            tables.append(((key, 0), value[0]))
        elif isinstance(value, dict):
            tables.append(((key,), value))
            tables += [((key, k), v) for k, v in value.items() if isinstance(v, dict)][:1]
    for path, table in tables:
        for field in list(table):
            for value in [DELETE, *DAMAGE]:
                copy = json.loads(json.dumps(doc))
                node = copy
                for part in path:
                    node = node[part]
                if value is DELETE:
                    del node[field]
                else:
                    node[field] = value
                yield copy


DELETE = object()


@pytest.mark.parametrize("rel", list(FILES))
def test_the_fast_validator_agrees_with_jsonschema(rel):
    """fastjsonschema decides whether a document is valid, jsonschema lists the problems of an
    invalid one: on every kind of damage to every field they must agree, and the problems are
    jsonschema's own."""
    path = FIXTURE / rel if (FIXTURE / rel).exists() else ROOT / "matrix" / rel
    doc = json.loads(json.dumps(_read(path)))
    for key, value in doc.items():  # two records per table keep this quick
        if isinstance(value, list):
            doc[key] = value[:2]
    seen = 0
    for damaged in _mutations(doc):
        mine = sorted(map(repr, (e.path for e in check(damaged, FILES[rel]))))
        theirs = sorted(map(repr, (tuple(e.absolute_path)
                                   for e in _jsonschema(FILES[rel]).iter_errors(damaged))))
        assert mine == theirs, damaged
        assert validator(FILES[rel]).is_valid(damaged) == (not theirs), damaged
        seen += bool(mine)
    assert seen > 50


def test_a_trailing_newline_does_not_pass_a_pattern():
    """Python's ``$`` also matches before a final newline; the schemas' patterns must not."""
    doc = _read(FIXTURE / "harvested" / "cuda.json")
    doc["toolkits"][0]["cuda"] = "11.7\n"
    assert [where(e.path) for e in check(doc, "harvested-cuda")] == ["toolkits[0].cuda"]
    assert len(list(_jsonschema("harvested-cuda").iter_errors(doc))) == 1


@pytest.mark.parametrize(("schema", "refused"), [
    ({"prefixItems": [{"type": "string"}]}, "prefixItems"),  # 2020-12 only
    ({"type": "string", "format": "date"}, "format"),  # an assertion in one, not the other
    ({"properties": {"a": {"dependentRequired": {"a": ["b"]}}}}, "#/properties/a"),
    ({"items": [{"type": "string"}]}, "one schema for every item"),
    ({"$ref": "#/$defs/a", "type": "string", "$defs": {"a": {}}}, "other keywords"),
    ({"$ref": "https://example.invalid/a.json"}, "only local"),
])
def test_keywords_the_two_libraries_read_differently_are_refused(schema, refused):
    from envgen.schemas.check import supported

    with pytest.raises(ValueError, match=re.escape(refused)):
        supported(schema)
    supported({"oneOf": [{"type": "string"}, {"$ref": "#/$defs/a"}], "$defs": {"a": True}})


def test_deep_nesting_is_reported_not_raised():
    doc = _read(FIXTURE / "harvested" / "torch.json")
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    doc["builds"][0]["python"] = [deep, deep]
    assert [e.message() for e in check(doc, "harvested-torch")] == ["is nested too deeply"]


def _count_checks(monkeypatch) -> list[str]:
    """The schema names load_facts checks from now on (in-process cache emptied first)."""
    from envgen.facts import load as load_module

    calls: list[str] = []
    real = load_module.check
    monkeypatch.setattr(load_module, "check", lambda doc, name: calls.append(name) or real(
        doc, name))
    load_module._CACHE.clear()
    return calls


def test_files_are_validated_once_per_modification(matrix_copy, monkeypatch):

    calls = _count_checks(monkeypatch)
    first = load_facts(matrix_copy)
    assert sorted(calls) == sorted(FILES[r] for r in FILES
                                   if r.startswith(("harvested/", "curated/"))
                                   and not r.endswith(("images.toml", "upstream.toml",
                                                          "doctor.toml", "preflight.toml",
                                                          "ngc.toml")))
    assert load_facts(matrix_copy) is first and len(calls) == 12  # cached: not read again
    path = matrix_copy / "curated" / "os.toml"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert load_facts(matrix_copy) is not first and len(calls) == 24  # read again: checked


def test_problems_in_a_refreshed_snapshot_name_its_path(matrix_copy, tmp_path):
    """Harvested facts read from the data directory are reported with their full path."""
    data = tmp_path / "data"
    shutil.copytree(matrix_copy / "harvested", data / "harvested")
    torch = data / "harvested" / "torch.json"
    doc = json.loads(torch.read_text())
    doc["generated"]["date"] = "2099-01-01"
    doc["builds"][0]["platform"] = "linux-riscv64"
    torch.write_text(json.dumps(doc))
    with pytest.raises(DataError) as exc:
        load_facts(matrix_copy, data)
    assert f"{torch} builds[0].platform" in exc.value.message
    assert "is not a platform" in exc.value.message


def test_compiled_copy_skips_parsing_until_a_file_changes(matrix_copy, tmp_path, monkeypatch):
    """A later process reads the compiled copy instead of parsing and validating again; any
    edit of a file's content misses it (a touch does not); a corrupt copy is ignored and
    replaced; only the newest KEEP stay."""
    from envgen.facts import compiled
    from envgen.facts import load as load_module

    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    calls = _count_checks(monkeypatch)
    first = load_facts(matrix_copy)
    assert calls and len(list((tmp_path / "cache" / "facts").glob("*.pickle"))) == 1
    calls.clear()
    load_module._CACHE.clear()  # as in a new process
    assert load_facts(matrix_copy) == first and calls == []  # nothing parsed or checked
    path = matrix_copy / "curated" / "os.toml"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    load_module._CACHE.clear()
    assert load_facts(matrix_copy) == first and calls == []  # same bytes: still the copy
    path.write_text(path.read_text() + "\n# an edit\n")
    load_module._CACHE.clear()
    load_facts(matrix_copy)
    assert calls  # the edit missed the copy: read and checked again
    for copy in (tmp_path / "cache" / "facts").glob("*.pickle"):
        copy.write_bytes(b"not a pickle")
    calls.clear()
    load_module._CACHE.clear()
    assert load_facts(matrix_copy) == first and calls  # corrupt: ignored, read again
    for n in range(compiled.KEEP + 3):
        compiled.write(f"extra{n}", first)
    assert len(list((tmp_path / "cache" / "facts").glob("*.pickle"))) == compiled.KEEP
