from __future__ import annotations

import pytest

from envgen.errors import UsageError
from envgen.versions import dotted_key, python_key, spec_contains, version_matcher


@pytest.mark.parametrize(
    ("value", "yes", "no"),
    [
        ("2.5", ["2.5.0", "2.5.1"], ["2.4.1", "2.6.0", "2.50.0"]),
        ("2.5.1", ["2.5.1"], ["2.5.0", "2.5.10"]),
        (">=2.4,<2.6", ["2.4.0", "2.5.1"], ["2.6.0", "2.3.1"]),
        ("2", ["2.0.0", "2.9.1"], ["1.13.1", "3.0.0"]),
    ],
)
def test_version_matcher(value, yes, no):
    match = version_matcher("--torch", value)
    assert all(match(v) for v in yes)
    assert not any(match(v) for v in no)


@pytest.mark.parametrize("bad", ["", "two", ">=x", "=>2"])
def test_version_matcher_rejects_with_option_named(bad):
    with pytest.raises(UsageError, match="--torch"):
        version_matcher("--torch", bad)


def test_spec_contains_empty_means_any():
    assert spec_contains("", "0.0.1")
    assert not spec_contains("<2.12", "2.12.0")


def test_keys():
    assert dotted_key("535.104.05") > dotted_key("525.60.13")
    assert python_key("3.13t") == (3, 13, True)
    with pytest.raises(ValueError):
        python_key("py3")


def test_plain_release_fast_path_agrees_with_packaging():
    """spec_contains answers plain releases itself (packaging's import costs as much as a
    resolve); every answer must be packaging's: the matrix's own specifiers and a seeded fuzz."""
    import json
    import random
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    from envgen.versions import spec_contains

    matrix = Path(__file__).resolve().parents[2] / "matrix" / "harvested" / "frameworks.json"
    specs = set()

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and any(op in value for op in ("<", ">", "==", "~=")):
            specs.add(value)

    walk(json.loads(matrix.read_text()))
    rng = random.Random(15)
    ops = ["==", "!=", "<=", ">=", "<", ">", "~="]
    for _ in range(400):
        clauses = []
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(ops)
            number = ".".join(str(rng.randint(0, 12)) for _ in range(rng.randint(1, 3)))
            if op in ("==", "!=") and rng.random() < 0.3:
                number += ".*"
            if op == "~=" and "." not in number:
                number += ".0"
            clauses.append(f"{op}{number}")
        specs.add(",".join(clauses))
    versions = [".".join(str(rng.randint(0, 12)) for _ in range(rng.randint(1, 4)))
                for _ in range(60)] + ["2.5.1", "12.1", "3.10", "0.19.8", "2.0", "2"]
    checked = 0
    for spec in sorted(specs):
        try:
            reference = SpecifierSet(spec)
        except Exception:
            continue
        for version in versions:
            assert spec_contains(spec, version) == reference.contains(version), (spec, version)
            checked += 1
    assert checked > 10_000


@pytest.mark.parametrize("text", ["2.5.1", "2.05.0", "0.19.8", "12", "2.5.1+cu121",
                                  "2.5.1+CU121.post.1", "2.6.0rc1", "1!2.0", "2.5.1.dev3+g1",
                                  "3.13", "v2.4", "2.4.0.post1"])
def test_version_normalizing_fast_paths_agree_with_packaging(text):
    from packaging.version import Version

    from envgen.versions import normalized_version, public_version, release

    assert normalized_version(text) == str(Version(text))
    assert public_version(text) == Version(text).public
    assert release(text) == Version(text).release


@pytest.mark.parametrize("bad", ["two", "2.5.1+", "2..5", "2.5.1+cu 121", "-1"])
def test_version_normalizing_refuses_what_packaging_refuses(bad):
    from packaging.version import InvalidVersion, Version

    from envgen.versions import normalized_version, public_version, release

    with pytest.raises(InvalidVersion):
        Version(bad)
    for helper in (normalized_version, public_version, release):
        with pytest.raises(ValueError):
            helper(bad)


@pytest.mark.parametrize("spec", [">=0.14,<0.17", "==12.*", "~=3.10", ">= 2.1 , < 2.6",
                                  "!=2.5.0", ">=2.6.0rc1", "==2.5.1+cu121", "", "<1.*",
                                  ">=x", "=>2", "~=3", ">=0.14,", "==1.0 ; python"])
def test_check_spec_agrees_with_packaging(spec):
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from envgen.versions import check_spec

    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        with pytest.raises(ValueError):
            check_spec(spec)
    else:
        check_spec(spec)
