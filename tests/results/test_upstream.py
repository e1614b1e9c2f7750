"""Upstream evidence (matrix/curated/upstream.toml): the committed file, its schema, loading,
and which statements match a table row."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from envgen.errors import DataError
from envgen.results.upstream import Upstream, load_upstream, parse, upstream_for
from envgen.schemas.check import check, validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "matrix"
FILE = MATRIX / "curated" / "upstream.toml"
SCHEMA_PATH = ROOT / "envgen" / "schemas" / "curated-upstream.schema.json"


def _jsonschema():
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _record(**over) -> dict:
    rec = {"framework": "deepspeed", "versions": ">=0.16.4,<0.18.5", "torch": "==2.6.*",
           "cuda": "==12.4", "kind": "ci", "what": "CI runs torch 2.6 on CUDA 12.4.",
           "source": "https://github.com/deepspeedai/DeepSpeed/blob/v0.16.4/x.yml#L1",
           "observed": "2026-11-23"}
    rec.update(over)
    return {k: v for k, v in rec.items() if v is not None}


def _one(**over) -> Upstream:
    (u,) = parse({"upstream": [_record(**over)]})
    return u


def _write(matrix: Path, text: str) -> Path:
    path = matrix / "curated" / "upstream.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ schema and committed file

def test_schema_is_a_valid_draft_2020_12_schema_the_fast_validator_compiles():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator("curated-upstream")  # only keywords both libraries read alike (check.supported)


def test_committed_file_is_valid_for_both_validators():
    doc = tomllib.loads(FILE.read_text(encoding="utf-8"))
    assert [e.message() for e in check(doc, "curated-upstream")] == []
    assert [e.message for e in _jsonschema().iter_errors(doc)] == []


def test_committed_file_loads_and_covers_every_framework():
    items = load_upstream(MATRIX)
    assert items
    assert {u.framework for u in items} == {"deepspeed", "megatron-core", "colossalai"}
    for u in items:
        assert u.observed == "2026-11-23"
        for url in u.source.split(" ; "):
            # GitHub citations are pinned to a tag or commit, never a moving branch
            if url.startswith("https://github.com/"):
                assert re.match(r"https://github\.com/[^/]+/[^/]+/blob/[^/]+/", url), url
                assert "/blob/main/" not in url and "/blob/master/" not in url, url


@pytest.mark.parametrize("damage", [
    {"framework": "pytorch"}, {"kind": "guess"}, {"cuda": "12.4"}, {"cuda": "==12.4.1"},
    {"cuda": ""}, {"torch": ""}, {"versions": ""}, {"observed": "23 Nov 2026"},
    {"source": "github.com/x"}, {"source": "https://a ; "}, {"what": "two\nlines"},
    {"python": 3.1}, {"note": 5}, {"extra": "key"},
])
def test_both_validators_agree_on_damaged_records(damage):
    doc = {"upstream": [_record(**damage)]}
    ours = [e.path for e in check(doc, "curated-upstream")]
    theirs = [tuple(e.absolute_path) for e in _jsonschema().iter_errors(doc)]
    assert ours, damage
    assert sorted(set(ours)) == sorted(set(theirs))


# ------------------------------------------------------------------ loading

def test_missing_file_is_no_evidence(tmp_path):
    assert load_upstream(tmp_path) == ()
    assert load_upstream(tmp_path / "nowhere") == ()


def test_empty_file_is_no_evidence(tmp_path):
    _write(tmp_path, "# nothing curated yet\n")
    assert load_upstream(tmp_path) == ()


def test_bad_file_lists_every_problem_with_its_path(tmp_path):
    path = _write(tmp_path, """
[[upstream]]
framework = "deepspeed"
versions = ">=0.16"
torch = "==2.6.*"
cuda = "12.4"
kind = "ci"
what = "x"
source = "https://example.org"
observed = 2026-11-23

[[upstream]]
framework = "colossalai"
versions = "0.4.1"
torch = "=>2.3"
cuda = "==12.1"
kind = "ci"
what = "x"
source = "https://example.org"
observed = "2026-11-23"
obseved = "typo"
""")
    with pytest.raises(DataError) as info:
        load_upstream(tmp_path)
    message = info.value.message
    assert str(path) in message
    assert "5 problem(s)" in message
    assert "upstream[0].cuda: '12.4' is not a specifier over CUDA major.minor" in message
    assert "upstream[0].observed: 2026-11-23 (a TOML date) is not the date" in message
    assert "upstream[1]: unknown key(s) obseved" in message
    assert "upstream[1].versions: '0.4.1' is not a PEP 440 version specifier" in message
    assert "upstream[1].torch: '=>2.3' is not a PEP 440 version specifier" in message
    assert "curated-upstream.schema.json" in info.value.hint


def test_specifier_that_does_not_parse_is_reported():
    with pytest.raises(DataError, match=r"upstream\[0\]\.torch: '=>2\.3' is not a PEP 440"):
        parse({"upstream": [_record(torch="=>2.3")]})
    with pytest.raises(DataError, match=r"upstream\[0\]\.cuda: '~=12' is not a PEP 440"):
        parse({"upstream": [_record(cuda="~=12")]})


def test_not_toml_is_a_data_error_naming_the_file(tmp_path):
    path = _write(tmp_path, "[[upstream]\n")
    with pytest.raises(DataError, match=re.escape(str(path))):
        load_upstream(tmp_path)


def test_top_level_that_is_not_a_list_is_reported():
    with pytest.raises(DataError, match=r"upstream: .*is not a list of \[\[upstream\]\] tables"):
        parse({"upstream": {"framework": "deepspeed"}})


def test_parse_keeps_optional_fields_and_file_order():
    items = parse({"upstream": [_record(python="==3.10", note="checked every tag"),
                                _record(framework="colossalai")]})
    assert [u.framework for u in items] == ["deepspeed", "colossalai"]
    assert items[0].python == "==3.10" and items[0].note == "checked every tag"
    assert items[1].python is None and items[1].note is None


# ------------------------------------------------------------------ matching

def test_framework_must_match_by_normalized_name():
    u = _one(framework="megatron-core", versions=">=0.17.0")
    assert u.matches("megatron-core", "0.17.0", "2.6.0", "12.4")
    assert u.matches("Megatron_Core", "0.17.0", "2.6.0", "12.4")
    assert not u.matches("deepspeed", "0.17.0", "2.6.0", "12.4")


@pytest.mark.parametrize(("version", "expected"), [
    ("0.16.3", False), ("0.16.4", True), ("0.17.6", True), ("0.18.4", True),
    ("0.18.5", False), ("0.18.5rc1", False), ("not-a-version", False),
])
def test_framework_version_must_be_in_the_range(version, expected):
    assert _one().matches("deepspeed", version, "2.6.0", "12.4") is expected


@pytest.mark.parametrize(("torch", "expected"), [
    ("2.6.0", True), ("2.6.0+cu124", True), ("2.6.1", True), ("2.5.1", False),
    ("2.7.0+cu124", False), ("2.6.0a0+ecf3bae", True), ("garbage", False),
])
def test_torch_matches_by_its_public_version(torch, expected):
    assert _one().matches("deepspeed", "0.17.0", torch, "12.4") is expected


def test_exact_torch_pin_ignores_the_local_label_only():
    u = _one(torch="==2.5.1")
    assert u.matches("deepspeed", "0.17.0", "2.5.1+cu121", "12.4")
    assert not u.matches("deepspeed", "0.17.0", "2.5.0+cu121", "12.4")


@pytest.mark.parametrize(("cuda", "expected"), [
    ("12.4", True), ("12.4.1", True), ("12.1", False), ("11.8", False), ("cpu", False),
])
def test_cuda_matches_on_major_minor(cuda, expected):
    assert _one().matches("deepspeed", "0.17.0", "2.6.0", cuda) is expected


def test_cuda_major_only_statement_matches_any_minor_of_that_major():
    u = _one(cuda="==12.*")
    assert u.matches("deepspeed", "0.17.0", "2.6.0", "12.8")
    assert not u.matches("deepspeed", "0.17.0", "2.6.0", "13.0")


def test_python_is_checked_only_when_both_sides_name_one():
    u = _one(python="==3.10")
    assert u.matches("deepspeed", "0.17.0", "2.6.0", "12.4", "3.10")
    assert not u.matches("deepspeed", "0.17.0", "2.6.0", "12.4", "3.12")
    assert u.matches("deepspeed", "0.17.0", "2.6.0", "12.4")  # the row names no Python
    assert _one().matches("deepspeed", "0.17.0", "2.6.0", "12.4", "3.13")  # source names none
    assert _one(python="==3.13").matches("deepspeed", "0.17.0", "2.6.0", "12.4", "3.13t")


def test_upstream_for_filters_in_order():
    items = parse({"upstream": [
        _record(what="a"), _record(what="b", cuda="==12.1"), _record(what="c", torch="==2.6.0"),
        _record(what="d", framework="colossalai")]})
    found = upstream_for(items, "deepspeed", "0.17.0", "2.6.0+cu124", "12.4")
    assert [u.what for u in found] == ["a", "c"]
    assert upstream_for((), "deepspeed", "0.17.0", "2.6.0", "12.4") == []


def test_to_dict_has_the_evidence_and_the_note_only_when_set():
    assert _one().to_dict() == {
        "kind": "ci", "what": "CI runs torch 2.6 on CUDA 12.4.",
        "source": "https://github.com/deepspeedai/DeepSpeed/blob/v0.16.4/x.yml#L1",
        "observed": "2026-11-23"}
    assert _one(note="n").to_dict()["note"] == "n"


def test_committed_rows_match_the_combinations_they_cite():
    items = load_upstream(MATRIX)
    # DeepSpeed 0.17.6: V100 CI torch 2.6 / CUDA 12.4 and the Modal run on Python 3.10
    kinds = {u.kind for u in upstream_for(items, "deepspeed", "0.17.6", "2.6.0+cu124", "12.4",
                                          "3.10")}
    assert kinds == {"ci"}
    assert len(upstream_for(items, "deepspeed", "0.17.6", "2.6.0+cu124", "12.4", "3.10")) >= 2
    # Colossal-AI 0.4.9: .compatibility lists 2.5.1-12.4.1
    assert any(u.kind == "compatibility-list"
               for u in upstream_for(items, "colossalai", "0.4.9", "2.5.1", "12.4"))
    # Megatron-Core 0.18.0: NGC 25.12 (NVIDIA's torch 2.10 build, CUDA 13.1)
    assert upstream_for(items, "megatron-core", "0.18.0", "2.10.0a0+b4e4ee81d3", "13.1", "3.12")
    assert not upstream_for(items, "megatron-core", "0.16.0", "2.10.0", "13.1", "3.12")


def test_the_file_is_read_by_the_facts_loader(tmp_path):
    from envgen.facts import upstream as facts_upstream
    from envgen.results import upstream as results_upstream

    assert results_upstream.Upstream is facts_upstream.Upstream
    assert results_upstream.load_upstream is facts_upstream.load_upstream
    assert facts_upstream.read_upstream(FILE) == load_upstream(MATRIX)
    assert facts_upstream.read_upstream(tmp_path / "none.toml") == ()


@pytest.mark.parametrize("name", ["deepspeed", "Megatron_Core", "megatron.core", "ColossalAI",
                                  "a--b__c..d", "x"])
def test_canonical_name_is_pep_503s(name):
    from packaging.utils import canonicalize_name

    from envgen.facts.upstream import canonical_name

    assert canonical_name(name) == canonicalize_name(name)


def test_citations_are_read_back_compiled_until_the_file_changes(tmp_path, monkeypatch):
    """`envgen table` reads upstream.toml once per change: later loads take the compiled copy
    (no TOML, schema or specifier parsing); an edit is read and checked again."""
    from envgen.facts import upstream as mod

    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    text = (MATRIX / "curated" / "upstream.toml").read_text()
    path = _write(tmp_path, text)
    first = mod.load_upstream(tmp_path)
    assert first and first == load_upstream(MATRIX)
    reads = []
    monkeypatch.setattr(mod, "read_upstream", lambda p: reads.append(p) or ())
    assert mod.load_upstream(tmp_path) == first and reads == []  # the compiled copy
    path.write_text(text + "\n# edited\n")
    assert mod.load_upstream(tmp_path) == () and len(reads) == 1  # read again
