"""matrix/curated/doctor.toml is checked against envgen/schemas/curated-doctor.schema.json and
its cross references (a kind's pattern and root_cause) when the doctor loads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.errors import DataError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "matrix" / "curated" / "doctor.toml"


@pytest.mark.parametrize("matrix", [ROOT / "matrix", ROOT / "tests" / "fixtures" / "matrix"])
def test_the_shipped_and_the_fixture_catalog_load(matrix):
    catalog = load_catalog(matrix)
    assert {"cuda_major_mismatch", "libaio_missing", "ninja_missing"} <= set(catalog.kinds)
    assert all(k.severity in ("error", "warning", "info") for k in catalog.kinds.values())
    assert {k.root_cause for k in catalog.kinds.values()} <= {
        r["id"] for r in catalog.raw["root_cause"]}
    assert catalog.requirements["libaio"].install["debian"] == "apt-get install -y libaio-dev"


def _broken(tmp_path: Path, name: str, old: str, new: str, count: int = 1) -> Path:
    """A matrix dir (its own path: load_catalog is cached per path) whose doctor.toml is the
    shipped one with ``old`` replaced by ``new`` (``count`` times)."""
    text = SHIPPED.read_text(encoding="utf-8")
    assert old in text
    matrix = tmp_path / name
    (matrix / "curated").mkdir(parents=True)
    (matrix / "curated" / "doctor.toml").write_text(text.replace(old, new, count),
                                                    encoding="utf-8")
    return matrix


def _message(matrix: Path) -> str:
    with pytest.raises(DataError) as info:
        load_catalog(matrix)
    text = str(info.value)
    assert str(matrix / "curated" / "doctor.toml") in text
    return text


def test_an_unknown_key_names_the_file_and_the_key(tmp_path):
    matrix = _broken(tmp_path, "unknown", 'id = "cuda_major_mismatch"\n',
                     'id = "cuda_major_mismatch"\nseverty = "error"\n')
    text = _message(matrix)
    assert "curated/doctor.toml kind[0] (cuda_major_mismatch): unknown key(s) severty" in text


def test_an_unknown_table_is_refused(tmp_path):
    matrix = _broken(tmp_path, "table", "[host_compiler]\n", "[host_compilers]\n")
    assert "curated/doctor.toml: unknown key(s) host_compilers" in _message(matrix)


def test_a_bad_severity_names_the_field(tmp_path):
    matrix = _broken(tmp_path, "severity", 'severity = "warning"', 'severity = "fatal"')
    text = _message(matrix)
    assert re.search(r"kind\[\d+\]\.severity \(nvcc_missing\): 'fatal' is not a severity", text)


def test_a_kind_without_source_is_refused(tmp_path):
    text = SHIPPED.read_text(encoding="utf-8")
    line = re.search(r'(?m)^source = "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.5/'
                     r'op_builder/builder.py"\n', text)[0]  # nvcc_missing's
    matrix = _broken(tmp_path, "source", line, "")
    assert "kind[1] (nvcc_missing): missing 'source'" in _message(matrix)


def test_a_source_that_is_not_a_url_is_refused(tmp_path):
    matrix = _broken(tmp_path, "url", 'source = "https://github.com/rwth-i6/returnn/issues/1802"',
                     'source = "returnn issue 1802"')
    assert re.search(r"kind\[\d+\]\.source \(nccl_mismatch\): 'returnn issue 1802' is not a "
                     r"citation", _message(matrix))


def test_a_platform_outside_the_list_is_refused(tmp_path):
    matrix = _broken(tmp_path, "platform", '"linux-aarch64", "wsl2"]', '"linux-arm64", "wsl2"]')
    assert re.search(r"platform\[\d+\]\.platforms\[1\] \(megatron-core\): 'linux-arm64' is not "
                     r"a platform", _message(matrix))


def test_a_dangling_root_cause_is_refused(tmp_path):
    matrix = _broken(tmp_path, "root_cause", 'root_cause = "gapped-dependency"\ntitle = "libaio',
                     'root_cause = "gapped-dependencies"\ntitle = "libaio')
    text = _message(matrix)
    assert "kind libaio_missing names root_cause 'gapped-dependencies'" in text
    assert "[[root_cause]]" in text


def test_a_dangling_pattern_is_refused(tmp_path):
    matrix = _broken(tmp_path, "pattern", 'pattern = "manage-versions-dependencies"',
                     'pattern = "manage-versions"')
    assert "kind cuda_major_mismatch names pattern 'manage-versions'" in _message(matrix)


def test_at_most_five_problems_are_listed(tmp_path):
    matrix = _broken(tmp_path, "many", 'severity = "error"', 'severity = "fatal"', count=7)
    text = _message(matrix)
    assert text.count("is not a severity") == 5
    assert "… and 2 more" in text
