"""The curated rows of torch 1.0 … 1.12 (matrix/curated/torch.toml, issue 38 part 3) agree with
what their notes quote from the sources they cite (a PyPI wheel's CUDAConfig.h line, or the
pytorch/builder arm), every release 1.0.0 … 1.12.1 has PyPI's default build (the CUDA its
wheel's torch/version.py names) among the doctor's reference builds, and the real matrix judges
the issue's two cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from packaging.specifiers import SpecifierSet

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge
from envgen.doctor.snapshot import Snapshot
from envgen.facts import load_facts
from envgen.harvest.torch_archs import archs_from_config

ROOT = Path(__file__).resolve().parents[2]
# the Linux x86_64 releases the issue asks for (PyPI's torch release history, 1.0.0 … 1.12.1)
# → the CUDA of PyPI's default build (torch/version.py of its manylinux1_x86_64 wheel)
PYPI_CUDA = {"1.0.0": "9.0", "1.0.1": "9.0", "1.1.0": "9.0", "1.2.0": "10.0", "1.3.0": "10.1",
             "1.3.1": "10.1", "1.4.0": "10.1", "1.5.0": "10.2", "1.5.1": "10.2", "1.6.0": "10.2",
             "1.7.0": "10.2", "1.7.1": "10.2", "1.8.0": "10.2", "1.8.1": "10.2", "1.9.0": "10.2",
             "1.9.1": "10.2", "1.10.0": "10.2", "1.10.1": "10.2", "1.10.2": "10.2",
             "1.11.0": "10.2", "1.12.0": "10.2", "1.12.1": "10.2"}
RELEASES = tuple(PYPI_CUDA)
_FLAGS = re.compile(r'#define NVCC_FLAGS_EXTRA "[^"]*"')
_ARM = re.compile(r'base "([0-9.;+PTX]+)", arm (\S+) (?:appends "([0-9.;+PTX]+)"|keeps it)')


def _old_rows() -> list[dict]:
    doc = tomllib.loads((ROOT / "matrix" / "curated" / "torch.toml").read_text())
    return [r for r in doc["archs"]
            if any(SpecifierSet(r["torch"]).contains(v) for v in RELEASES)]


def _sm(value: str) -> list[str]:
    return [f"sm_{item.removesuffix('+PTX').replace('.', '')}" for item in value.split(";")]


def _ptx(value: str) -> list[str]:
    return [f"compute_{item.removesuffix('+PTX').replace('.', '')}" for item in value.split(";")
            if item.endswith("+PTX")]


def quoted(note: str) -> tuple[list[str], list[str]] | None:
    """(archs, ptx) the note quotes: a wheel's NVCC_FLAGS_EXTRA, else the builder's base list
    and the arm's addition; None when it quotes neither."""
    flags = _FLAGS.search(note)
    if flags:
        read = archs_from_config(flags[0])
        return read["sm"], read["ptx"]
    arm = _ARM.search(note)
    if arm:
        added = arm[3] or ""
        return (sorted(_sm(arm[1]) + (_sm(added) if added else []), key=lambda a: int(a[3:])),
                _ptx(arm[1]) + (_ptx(added) if added else []))
    return None


def test_the_quote_reader_reads_both_forms():
    assert quoted('reads #define NVCC_FLAGS_EXTRA "-gencode;arch=compute_37,code=sm_37;'
                  '-gencode;arch=compute_90,code=compute_90" (x)') == (["sm_37"], ["compute_90"])
    assert quoted('base "3.7;5.0", arm 11.[12] appends "8.0;8.6".') == (
        ["sm_37", "sm_50", "sm_80", "sm_86"], [])
    assert quoted('base "3.7;5.0", arm 10.* keeps it.') == (["sm_37", "sm_50"], [])
    assert quoted('base "3.5;5.0+PTX", arm 9.0 appends "6.0;7.0".') == (
        ["sm_35", "sm_50", "sm_60", "sm_70"], ["compute_50"])
    assert quoted("no quote") is None


@pytest.mark.parametrize("row", _old_rows(), ids=lambda r: f"{r['torch']}-cu{r['cuda']}")
def test_each_old_row_is_what_its_note_quotes(row):
    if "unknown" in row:
        assert row["source"].startswith("https://github.com/pytorch/builder/commit/")
        return
    found = quoted(row["note"])
    assert found is not None, "the note quotes no source line"
    assert found == (row["archs"], row.get("ptx", []))
    # the builder commit the note reads first is the one the source cites
    cited = re.search(r"/blob/([0-9a-f]{40})/manywheel/", row["source"])
    named = re.search(r" at ([0-9a-f]{8})\b", row["note"])
    assert cited and named and cited[1].startswith(named[1])
    if _FLAGS.search(row["note"]):  # a wheel's line: each release's PyPI wheel is cited
        for v in RELEASES:
            if SpecifierSet(row["torch"]).contains(v):
                assert f"/torch-{v}-cp" in row["source"]


@pytest.fixture(scope="module")
def real():
    return load_facts(ROOT / "matrix")


def test_every_release_has_its_pypi_build_and_no_silent_arch_list(real):
    for v in RELEASES:
        builds = [b for b in real.reference_builds if b.version == v]
        assert [b.cuda for b in builds if b.index == "pypi"] == [PYPI_CUDA[v]], v
        assert all(b.archs is not None or b.archs_unknown for b in builds), v
    assert not [b for b in real.torch_builds if b.version in RELEASES]  # never candidates


@pytest.mark.parametrize(("torch", "cuda", "gpu", "flagged"), [
    ("1.10.1+cu102", "10.2", "NVIDIA A100-SXM4-40GB", True),
    ("1.9.0+cu111", "11.1", "NVIDIA GeForce RTX 3090", False),
])
def test_the_real_matrix_judges_the_issues_cases(real, torch, cuda, gpu, flagged):
    d = judge(Snapshot.from_dict({"torch": torch, "torch_cuda": cuda, "platform": "linux-x86_64",
                                  "gpus": [{"name": gpu}]}), real, load_catalog(ROOT / "matrix"))
    found = [f for f in d.findings if f.kind == "gpu_arch_unsupported"]
    assert bool(found) == flagged
    if found:
        assert "files.pythonhosted.org" in found[0].source
    assert not [c for c in d.coverage if "older than the first" in c.note]


def test_each_old_variants_row_cites_the_wheel_its_pypi_field_was_read_from():
    doc = tomllib.loads((ROOT / "matrix" / "curated" / "torch.toml").read_text())
    rows = {r["torch"]: r for r in doc["variants"] if r["torch"] in PYPI_CUDA}
    assert set(rows) == set(PYPI_CUDA)  # every release has its row
    for v, row in rows.items():
        assert row["pypi"] == PYPI_CUDA[v] and row["pypi"] in row["cuda"], v
        assert f"/torch-{v}-cp" in row["source"] and "files.pythonhosted.org" in row["source"], v
        read = re.search(r"\(__version__ = [^,]+, cuda = ([0-9.]+)\)", row["note"])
        assert read and ".".join(read[1].split(".")[:2]) == row["pypi"], v
