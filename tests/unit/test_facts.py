from __future__ import annotations

import json

import pytest

from envgen.errors import DataError
from envgen.facts import find_matrix_dir, load_facts


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
    with pytest.raises(DataError, match=r"os\[2\] \(debian-12\): has no 'source'"):
        load_facts(matrix_copy)


def test_all_problems_reported_at_once(matrix_copy):
    torch = matrix_copy / "harvested" / "torch.json"
    doc = json.loads(torch.read_text())
    doc["builds"][0]["version"] = "not a version"
    doc["builds"][1]["python"] = ["three"]
    torch.write_text(json.dumps(doc))
    (matrix_copy / "curated" / "cuda.toml").write_text("this is = = not toml")
    with pytest.raises(DataError) as exc:
        load_facts(matrix_copy)
    text = str(exc.value)
    assert "3 problem(s)" in text
    assert "builds[0]: 'not a version' is not a version" in text
    assert "builds[1]: malformed record" in text
    assert "cuda.toml: not valid TOML" in text
    assert "envgen matrix update --write" in text  # says how to regenerate


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
