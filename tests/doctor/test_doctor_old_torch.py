"""torch 1.8 … 1.12 (issue 38 part 3): releases older than the harvested builds are judged by
their reference builds (curated/torch.toml [[variants]] / [[archs]] rows, Facts.reference_builds)
instead of a "older than the first build" coverage note; they never become resolver candidates.
Runs on the fixture matrix (harvested builds from 1.13.1; reference rows for 1.8.0, 1.8.1, 1.10.1)
and on the text of a real report of the dev corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge
from envgen.doctor.snapshot import Snapshot
from envgen.errors import DataError, InfeasibleError
from envgen.facts import load_facts
from envgen.resolve import Request, resolve

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "doctor" / "corpus" / "reports"
A100 = "NVIDIA A100-SXM4-40GB"


@pytest.fixture
def doctor(facts, fixture_matrix):
    catalog = load_catalog(fixture_matrix)
    return lambda snapshot: judge(Snapshot.from_dict(snapshot), facts, catalog)


def gpu_findings(d):
    return [f for f in d.findings if f.kind == "gpu_arch_unsupported"]


def notes(d) -> str:
    return "\n".join(c.note for c in d.coverage)


def test_old_variants_become_reference_builds_not_candidates(facts):
    ref = {(b.version, b.cuda): b for b in facts.reference_builds}
    assert set(ref) == {("1.8.0", "10.2"), ("1.8.0", "11.1"), ("1.8.1", "10.2"),
                        ("1.8.1", "11.1"), ("1.10.1", "10.2"), ("1.10.1", "11.1")}
    assert not {b.version for b in facts.torch_builds} & {"1.8.0", "1.8.1", "1.10.1"}
    pypi, cu111 = ref[("1.10.1", "10.2")], ref[("1.10.1", "11.1")]
    assert (pypi.index, pypi.pin) == ("pypi", "torch==1.10.1")  # the row's `pypi` variant
    assert (cu111.index, cu111.pin) == ("pytorch-cu111", "torch==1.10.1+cu111")
    assert cu111.archs_from == "curated" and "sm_86" in cu111.archs
    assert pypi.archs == ("sm_37", "sm_50", "sm_60", "sm_70") and pypi.python == ()
    assert ref[("1.8.0", "11.1")].archs is None
    assert "release day" in ref[("1.8.0", "11.1")].archs_unknown
    # a variant of a release newer than the harvest (3.0.0) is neither
    assert not [b for b in facts.reference_builds if b.version == "3.0.0"]


def test_an_old_release_is_never_a_resolver_candidate(facts):
    with pytest.raises(InfeasibleError, match=r"--torch 1\.10\.1"):
        resolve(Request(torch="1.10.1"), facts)


def test_pypi_must_name_one_of_the_rows_variants(matrix_copy):
    path = matrix_copy / "curated" / "torch.toml"
    text = path.read_text()
    path.write_text(text.replace('torch = "1.10.1"\ncuda = ["10.2", "11.1"]\npypi = "10.2"',
                                 'torch = "1.10.1"\ncuda = ["10.2", "11.1"]\npypi = "11.3"'))
    with pytest.raises(DataError, match=r"variants\[\d+\].*pypi '11.3' is not one of its cuda"):
        load_facts(matrix_copy)


def test_a_cu102_build_on_an_a100_is_judged_by_the_arch_rule(diagnose):
    """The issue's case: torch 1.10.1+cu102 on an A100 is no longer 'older than the first build'
    but the arch rule's: the cu102 build has no sm_80 kernels (the fixture's row says so)."""
    d = diagnose("PyTorch version: 1.10.1+cu102\nCUDA used to build PyTorch: 10.2\n"
                 "OS: Ubuntu 20.04.3 LTS (x86_64)\n"
                 f"GPU models and configuration: GPU 0: {A100}\n"
                 "Nvidia driver version: 470.82.01\n")
    [found] = gpu_findings(d)
    assert "sm_37, sm_50, sm_60, sm_70: no kernel runs on" in found.summary
    assert "(sm_80)" in found.summary
    assert found.source.startswith("https://example.invalid/CUDAConfig.h")  # the row's citation
    assert "older than the first torch build" not in notes(d)
    assert "older than the harvested torch builds (1.13.1" in notes(d)  # what it still lacks


def test_a_cu111_build_on_an_rtx_3090_is_fine(doctor):
    d = doctor({"torch": "1.10.1+cu111", "torch_cuda": "11.1", "platform": "linux-x86_64",
                "gpus": [{"name": "NVIDIA GeForce RTX 3090"}]})
    assert not gpu_findings(d)
    assert not [c for c in d.coverage if c.fact == "torch_arch_list"]


def test_a_build_whose_arch_list_is_unknown_says_so_and_asks(doctor):
    d = doctor({"torch": "1.8.0+cu111", "torch_cuda": "11.1", "platform": "linux-x86_64",
                "gpus": [{"name": "NVIDIA GeForce RTX 3090"}]})
    assert not gpu_findings(d)
    note = next(c.note for c in d.coverage if c.fact == "torch_arch_list")
    assert "release day" in note and "NVIDIA GeForce RTX 3090 was not judged" in note
    assert any(n.fact == "torch_arch_list" for n in d.needs)


def test_an_old_variant_no_row_names_is_still_a_coverage_note(doctor):
    d = doctor({"torch": "1.10.1+cu113", "torch_cuda": "11.3", "platform": "linux-x86_64",
                "gpus": [{"name": A100}]})
    assert not gpu_findings(d)
    assert "no build of torch 1.10.1 for CUDA 11.3" in notes(d)


def _collect_env(name: str) -> str:
    """The torch.utils.collect_env block of a corpus report, without the lines above it."""
    text = (CORPUS / name).read_text(encoding="utf-8")
    return text[text.index("Collecting environment information..."):]


def test_a_real_report_without_torchs_warning_is_judged_from_the_build(diagnose):
    """pytorch/pytorch#57922 (dev set): torch 1.8.1+cu102 on an A100. Its collect_env block
    alone (no capability warning, no arch list) is judged by the 1.8.1 cu102 build's archs."""
    d = diagnose(_collect_env("pytorch-57922.txt"))
    [found] = gpu_findings(d)
    assert "torch 1.8.1+cu102 was compiled for sm_37, sm_50, sm_60, sm_70" in found.summary
    assert "older than the first torch build" not in notes(d)


def test_the_whole_real_report_still_names_the_arch(diagnose):
    d = diagnose((CORPUS / "pytorch-57922.txt").read_text(encoding="utf-8"))
    assert gpu_findings(d)
    assert "older than the first torch build" not in notes(d)
