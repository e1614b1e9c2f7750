"""What the doctor cannot judge (issue 38 part 3): facts outside the data's range are coverage
notes (and, where one fact decides, a need), never a clean bill; the driver floors of CUDA
10.0 … 11.6 (curated/cuda.toml) judge old reports."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from envgen.doctor.catalog import load_catalog
from envgen.doctor.judge import judge
from envgen.doctor.reports import parse_report
from envgen.doctor.snapshot import Snapshot

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
REPO_MATRIX = Path(__file__).resolve().parents[2] / "matrix"


@pytest.fixture
def doctor(facts, fixture_matrix):
    catalog = load_catalog(fixture_matrix)

    def run(snapshot, **kw):
        if isinstance(snapshot, dict):
            snapshot = Snapshot.from_dict(snapshot)
        return judge(snapshot, kw.pop("facts", facts), catalog, **kw)

    return run


def report(name: str) -> Snapshot:
    return parse_report((REPORTS / name).read_text(encoding="utf-8")).snapshot


def facts_of(d) -> list[str]:
    return [c.fact for c in d.coverage]


def test_torch_1_5_on_a_410_driver_is_no_clean_bill(doctor):
    """The issue's case: torch 1.5.0 built with CUDA 10.2 on driver 410.104. The driver floor
    of CUDA 10.2 (440.33) is data now: driver_too_old, and torch's age is a coverage note."""
    d = doctor({"torch": "1.5.0", "torch_cuda": "10.2", "driver": "410.104",
                "platform": "linux-x86_64"})
    found = [f for f in d.findings if f.kind == "driver_too_old"]
    assert len(found) == 1 and found[0].severity == "error"
    assert found[0].evidence["needs"] == "440.33" and "CUDA 10.0" in found[0].fix
    # the first build is the fixture's oldest reference build (curated rows), not 1.13.1
    assert "torch" in facts_of(d) and "(1.8.0)" in d.coverage[0].note
    assert "no problems found" not in d.verdict("1 error")


def test_an_old_cuda_torch_without_the_driver_asks_for_it(doctor):
    d = doctor({"torch": "1.5.0", "torch_cuda": "10.2", "platform": "linux-x86_64"})
    need = next(n for n in d.needs if n.fact == "driver")
    assert "440.33" in need.why
    assert d.findings == () and d.coverage
    assert d.verdict() == ("no problems found within what envgen can judge; 1 thing outside "
                           "its data (see coverage)")


def test_a_driver_above_the_old_floor_is_judged_fine(doctor):
    d = doctor({"torch": "1.5.0", "torch_cuda": "10.0", "driver": "410.104"})
    assert not [f for f in d.findings if f.kind == "driver_too_old"]
    assert "torch_cuda" not in facts_of(d)  # 10.0 has a floor: judged, not outside


def test_a_cuda_older_than_every_floor_is_a_coverage_note(doctor):
    d = doctor({"torch": "1.4.0", "torch_cuda": "9.2", "driver": "390.30"})
    note = next(c for c in d.coverage if c.fact == "torch_cuda")
    assert "start at CUDA 10.0" in note.note and "390.30" in note.note
    assert not d.findings


def test_a_dev_torch_says_its_torch_rules_were_skipped(doctor):
    d = doctor({"torch": "2.1.0.dev20230519+cu121", "torch_cuda": "12.1",
                "gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}],
                "driver": "535.104.05"})
    note = next(c for c in d.coverage if c.fact == "torch")
    assert "nightly/dev build" in note.note and "skipped" in note.note
    assert any(n.fact == "torch_arch_list" for n in d.needs)  # the arch list decides the GPU


@pytest.mark.parametrize("torch", ["2.1.0a0+32f93b1", "1.8.0+git1234abc"])
def test_source_and_local_builds_are_outside(doctor, torch):
    d = doctor({"torch": torch})
    assert facts_of(d) == ["torch"] and "build" in d.coverage[0].note


def test_released_builds_in_range_are_not_notes(doctor):
    d = doctor({"torch": "2.5.1+cu121", "torch_cuda": "12.1", "platform": "linux-x86_64"})
    assert d.coverage == () and d.verdict().startswith("no problems found: ")


def test_a_gpu_not_in_the_catalogue_is_a_note_and_a_need(doctor):
    d = doctor({"gpus": [{"name": "NVIDIA GeForce RTX 4070 Laptop GPU",
                          "compute_capability": None}]})
    assert "gpu" in facts_of(d)
    assert any("compute capability" in n.fact or n.fact == "gpu" for n in d.needs)


def test_a_framework_older_than_the_matrix_is_a_note(doctor):
    d = doctor({"frameworks": {"deepspeed": "0.3.16"}})
    note = next(c for c in d.coverage if c.fact == "deepspeed")
    assert "older than the first" in note.note


def test_a_windows_report_says_linux_rules_only(doctor):
    """tests/fixtures/reports/collect_env_windows_48535.txt: Windows, torch 1.7.0 (CUDA 10.2),
    nvcc 10.2.89, driver 451.67."""
    d = doctor(report("collect_env_windows_48535.txt"))
    notes = {c.fact: c.note for c in d.coverage}
    assert notes["platform"].startswith("Windows: ")
    assert "older than the first torch build" in notes["torch"]
    assert "nvcc 10.2.89 is older" in notes["nvcc"]
    assert not [f for f in d.findings if f.kind == "driver_too_old"]  # 451.67 ≥ 440.33


def test_the_colab_report_on_an_old_torch_is_judged_against_the_old_floor(doctor):
    """tests/fixtures/reports/collect_env_colab_46973.txt: torch 1.7.0+cu101 on driver 418.67
    (CUDA 10.1 needs 418.39): no driver finding, notes for torch and nvcc; with the driver
    lowered to 410.79 the old floor names the fault."""
    from envgen.facts import load_facts

    real = load_facts(REPO_MATRIX)  # the fixture matrix has no CUDA 10.1 floor
    snap = report("collect_env_colab_46973.txt")
    assert (snap.torch, snap.driver) == ("1.7.0+cu101", "418.67")
    d = doctor(snap, facts=real)
    assert "torch" in facts_of(d) and "driver_too_old" not in [f.kind for f in d.findings]
    lowered = doctor(dataclasses.replace(snap, driver="410.79"), facts=real)
    assert "driver_too_old" in [f.kind for f in lowered.errors]


def test_json_carries_coverage_and_the_verdict(doctor):
    doc = doctor({"torch": "1.5.0", "torch_cuda": "10.2", "driver": "410.104"}).to_dict()
    assert doc["coverage"][0]["fact"] == "torch"
    assert doc["verdict"].startswith("1 error; ") and "outside its data" in doc["verdict"]


def test_the_real_matrix_has_the_floors_of_cuda_10_to_11_6():
    from envgen.facts import load_facts

    floors = load_facts(REPO_MATRIX).driver_floors
    assert {c: f.min_driver for c, f in floors.items() if c.startswith("10.")} == {
        "10.0": "410.48", "10.1": "418.39", "10.2": "440.33"}
    assert all(f.min_driver == "450.80.02" for c, f in floors.items()
               if c in ("11.1", "11.2", "11.3", "11.4", "11.5", "11.6", "11.7", "11.8"))
    assert all("docs.nvidia.com" in (f.source or "") for f in floors.values())
