"""torch 1.0 … 1.12 (issue 38 part 3): releases older than the harvested builds are judged by
their reference builds (curated/torch.toml [[variants]] / [[archs]] rows, Facts.reference_builds)
instead of a "older than the first build" coverage note; they never become resolver candidates.
An old release that names no CUDA (a bare "1.3.0") is judged as PyPI's default build of it, and
the doctor asks for torch's CUDA. Runs on the fixture matrix (harvested builds from 1.13.1;
reference rows for 1.8.0, 1.8.1, 1.10.1) and on the text of real reports of the dev corpus
(the real matrix where the fixture lacks the release)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge, pypi_reference_build
from envgen.doctor.reports import parse_report
from envgen.doctor.snapshot import UNKNOWN, Snapshot
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


# ---------------------------------------------------------------- a bare old release: PyPI's build

REAL = ROOT / "matrix"


@pytest.fixture(scope="module")
def real():
    return load_facts(REAL), load_catalog(REAL)


def driver_findings(d):
    return [f for f in d.findings if f.kind == "driver_too_old"]


def test_pytorch_31243_is_judged_against_the_cuda_of_1_3_0s_pypi_build(real):
    """pytorch/pytorch#31243 (dev set): `pip install torch===1.3.0 … -f …/torch_stable.html`
    and driver 410.48 in a reply. torch names no CUDA; PyPI's 1.3.0 wheel (what that command
    installs, curated `pypi = "10.1"`) is built with CUDA 10.1, which needs 418.39, as the
    maintainer answered. Before the 1.0 … 1.7 rows the doctor could only ask for torch's CUDA.
    A warning, not an error: it rests on the assumed build, which the evidence names."""
    facts, catalog = real
    text = (CORPUS / "pytorch-31243.txt").read_text(encoding="utf-8")
    d = judge(parse_report(text).snapshot, facts, catalog, origin="report")
    [found] = driver_findings(d)
    assert found.evidence == {"driver": "410.48", "torch_cuda": "10.1", "needs": "418.39",
                              "assumed": "PyPI's default build of torch 1.3.0 (CUDA 10.1)"}
    assert found.severity == "warning"
    assert "older than the 418.39 CUDA 10.1 needs" in found.summary
    need = next(n for n in d.needs if n.fact == "torch_cuda")
    assert "judged as PyPI's default build of 1.3.0 (CUDA 10.1)" in need.why
    assert "torch.version.cuda" in need.how
    assert d.snapshot.torch_cuda is UNKNOWN  # the diagnosis shows what the report stated
    assert "older than the first torch build" not in notes(d)
    assert "older than the harvested torch builds" in notes(d)


def test_a_stated_cuda_is_never_replaced(real):
    """The same torch and driver with torch's CUDA stated (conda's cudatoolkit 10.0 build):
    410.48 meets CUDA 10.0's floor; nothing is assumed, nothing asked."""
    facts, catalog = real
    d = judge(Snapshot.from_dict({"torch": "1.3.0", "torch_cuda": "10.0", "driver": "410.48"}),
              facts, catalog)
    assert not driver_findings(d)
    assert not [n for n in d.needs if n.fact == "torch_cuda"]


@pytest.mark.parametrize("snapshot", [
    {"torch": "1.3.0+cu92", "driver": "410.48"},  # the tag names the build (CUDA 9.2)
    {"torch": "1.3.0", "driver": "410.48", "packages": {"pytorch": "1.3.0",
                                                         "cudatoolkit": "10.0.130"}},  # conda
    {"torch": "1.3.0", "driver": "410.48", "platform": "windows"},
], ids=["local-tag", "conda", "windows"])
def test_no_pypi_build_is_assumed(real, snapshot):
    facts, _ = real
    assert pypi_reference_build(Snapshot.from_dict(snapshot), facts) is None


@pytest.mark.parametrize(("torch", "cuda", "driver", "needs"), [
    ("1.0.1", "9.0", "384.81", None),       # CUDA 9.0's floor met
    ("1.0.1", "9.0", "375.26", "384.81"),
    ("1.2.0", "10.0", "396.26", "410.48"),
    ("1.4.0", "10.1", "410.48", "418.39"),
    ("1.7.1", "10.2", "418.67", "440.33"),
])
def test_each_old_pypi_build_names_its_cuda_floor(real, torch, cuda, driver, needs):
    facts, catalog = real
    d = judge(Snapshot.from_dict({"torch": torch, "driver": driver}), facts, catalog)
    found = driver_findings(d)
    assert [f.evidence["needs"] for f in found] == ([needs] if needs else [])
    assert f"(CUDA {cuda})" in next(n.why for n in d.needs if n.fact == "torch_cuda")


def test_the_real_matrix_has_the_floors_of_cuda_8_and_9(real):
    """curated/cuda.toml: NVIDIA's table rows for the CUDAs of torch 1.0 … 1.7's variants."""
    floors = real[0].driver_floors
    assert {c: floors[c].min_driver for c in ("8.0", "9.0", "9.2")} == {
        "8.0": "375.26", "9.0": "384.81", "9.2": "396.26"}
    cudas = {b.cuda for b in real[0].reference_builds}
    assert cudas <= set(floors), cudas - set(floors)  # every reference build's CUDA has one

