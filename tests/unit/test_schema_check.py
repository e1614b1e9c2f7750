"""envgen.schemas.check: fastjsonschema decides, jsonschema explains; the generated validators
are cached in the user's cache directory and the cache only ever saves time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from envgen.schemas import check as mod
from envgen.schemas.check import SchemaError, Validator, check, validator, where

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://envgen.invalid/schemas/test.json",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "size"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$(?!\\n)", "description": "a word"},
        "size": {"$ref": "#/$defs/size"},
        "tags": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$(?!\\n)",
                                                     "description": "a lower-case name"}},
    },
    "$defs": {"size": {"type": "integer", "minimum": 1, "description": "a whole number ≥ 1"}},
}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "schemas"


def test_every_problem_with_its_path_and_the_type_first(cache_dir):
    v = Validator(SCHEMA)
    assert v.is_valid({"name": "abc", "size": 2})
    doc = {"name": "ABC\n", "size": 0, "tags": {"Bad": 1, "ok": 2}, "extra": 1, "more": 2}
    assert not v.is_valid(doc)
    found = [(where(e.path), e.keyword, e.message()) for e in v.check(doc)]
    assert found == [
        ("", "additionalProperties", "unknown key(s) extra, more"),
        ("name", "pattern", "'ABC\\n' is not a word"),
        ("size", "minimum", "0 is not a whole number ≥ 1"),
        ("tags", "propertyNames", "key 'Bad' is not a lower-case name"),
    ]
    missing = v.check({"name": 5})
    assert [(e.keyword, e.detail, e.message()) for e in missing] == [
        ("required", "size", "missing 'size'"), ("type", None, "5 is not a word")]
    assert isinstance(missing[0], SchemaError) and missing[0].path == ()


def test_a_definition_is_checked_on_its_own():
    """``definition``: one of a schema's ``$defs``, its own ``$ref``s resolved in the schema."""
    errors = check({"x": 1}, "curated-policy", "manylinux_aliases")
    assert [e.message() for e in errors if e.keyword == "required"] == ["missing 'source'"]
    assert validator("curated-policy", "manylinux_aliases") is validator(
        "curated-policy", "manylinux_aliases")  # compiled once per process
    with pytest.raises(KeyError):
        validator("curated-policy", "no-such-definition")


def test_the_generated_code_is_cached_and_reused(cache_dir, monkeypatch):
    Validator(SCHEMA)
    (cached,) = cache_dir.glob("*.marshal")
    import fastjsonschema

    def refuse(*args, **kwargs):
        raise AssertionError("generated again")

    monkeypatch.setattr(fastjsonschema, "compile_to_code", refuse)
    assert not Validator(SCHEMA).is_valid({"name": "x"})
    assert list(cache_dir.glob("*.marshal")) == [cached]


def test_a_damaged_cache_file_is_generated_again(cache_dir):
    Validator(SCHEMA)
    (cached,) = cache_dir.glob("*.marshal")
    cached.write_bytes(b"not marshal data")
    assert Validator(SCHEMA).is_valid({"name": "x", "size": 1})
    assert cached.read_bytes() != b"not marshal data"


def test_without_a_usable_cache_directory_it_still_validates(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(blocker))  # a file, not a folder
    assert Validator(SCHEMA).check({"name": "x"})[0].message() == "missing 'size'"


def test_deep_nesting_is_reported_not_raised():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    schema = {"$schema": SCHEMA["$schema"], "type": "array", "uniqueItems": True}
    assert [e.message() for e in Validator(schema).check([deep, deep])] == [
        "is nested too deeply"]


def test_the_cache_keeps_only_the_newest(cache_dir, monkeypatch):
    monkeypatch.setattr(mod, "KEEP", 2)
    for n in range(3):
        Validator({**SCHEMA, "title": f"version {n}"})
    assert len(list(cache_dir.glob("*.marshal"))) == 2


def test_conda_locks_vendored_fastjsonschema_does_not_replace_the_installed_one(tmp_path):
    """conda-lock's poetry-core puts an older fastjsonschema first on sys.path (its enum of
    [1] accepts True): after envgen's conda-lock hash, a schema check still refuses a bool
    where the schema wants the number 1. A fresh interpreter: this process imported it long
    ago."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        from envgen.lock.conda_lock_hash import content_hash
        from envgen.schemas.check import check
        print(content_hash("channels: [conda-forge]\\ndependencies: [python=3.11]\\n",
                           "subdirs:\\n  linux-64:\\n    packages:\\n      __glibc: '2.17'\\n",
                           "linux-64")[:8])
        import fastjsonschema
        print("vendored" if "_vendor" in fastjsonschema.__file__ else "installed")
        doc = {"schema": True, "builds": [],
               "generated": {"command": "x", "date": "2026-11-01", "envgen": "0.1.0"}}
        print([e.path for e in check(doc, "harvested-torch")])
    """)
    env = {**os.environ, "ENVGEN_CACHE_DIR": str(tmp_path / "cache")}  # so conda-lock runs
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, which, errors = proc.stdout.splitlines()
    assert which == "installed"
    assert errors == "[('schema',)]"


def test_a_cached_validator_runs_without_importing_fastjsonschema(tmp_path):
    """Once its code is cached, a check neither generates nor imports fastjsonschema (~20 ms
    of start-up), and still tells valid from invalid documents."""
    code = ("import sys\n"
            "from envgen.schemas.check import check\n"
            "bad = check({'cell': [{'combination': 7}]}, 'cells')\n"
            "good = check({'cell': []}, 'cells')\n"
            "print(bool(bad), good, 'fastjsonschema' in sys.modules)\n")
    env = {**os.environ, "ENVGEN_CACHE_DIR": str(tmp_path)}
    first, second = (subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True, env=env).stdout.split()
                     for _ in range(2))
    assert first == ["True", "[]", "True"]  # generated (and cached) with fastjsonschema
    # an invalid document loads jsonschema for the details, never fastjsonschema
    assert second == ["True", "[]", "False"]
