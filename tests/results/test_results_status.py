"""A combination's status from its records: known-good, known-bad, untested (CPU only)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from results_data import RECORDS

from envgen.results import StoredRecord, status_of, statuses
from envgen.results.record import Gpu, ResultRecord

COMBO = "deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"
BY_NAME = {p.stem: ResultRecord.from_dict(json.loads(p.read_text())) for p in RECORDS}
GPU_PASS = BY_NAME["ds-gpu-pass"]  # H200 × 8, NCCL smoke test passed
CPU = Gpu(model=None, count=0, driver=None, cuda_driver=None)


def run(status: str, finished: str, *, gpu: bool = True, smoke: str | None = "nccl"
        ) -> StoredRecord:
    """A record of COMBO that finished at ``finished`` (day of March 2026, HH:MM)."""
    record = replace(GPU_PASS, status=status, finished=f"2026-03-{finished}:00Z",
                     started="2026-03-01T00:00:00Z", ops=(),
                     gpu=GPU_PASS.gpu if gpu else CPU,
                     smoke=None if smoke is None else replace(
                         GPU_PASS.smoke, backend=smoke, checks=()))
    return StoredRecord(record, Path(f"{status}-{finished}.json"))


@pytest.mark.parametrize(("records", "status", "note", "newest"), [
    ([], "untested", None, None),
    ([run("pass", "02T10:00")], "known-good", None, "pass-02T10:00"),
    ([run("fail", "01T10:00"), run("pass", "02T10:00")], "known-good", None, "pass-02T10:00"),
    ([run("pass", "01T10:00"), run("fail", "02T10:00")], "known-bad", None, "fail-02T10:00"),
    # the newest decides: a CPU failure after a GPU pass is known-bad
    ([run("pass", "01T10:00"), run("fail", "02T10:00", gpu=False, smoke="gloo")],
     "known-bad", None, "fail-02T10:00"),
    # a CPU pass after a GPU pass keeps the GPU evidence
    ([run("pass", "01T10:00"), run("pass", "02T10:00", gpu=False, smoke="gloo")],
     "known-good", None, "pass-02T10:00"),
    ([run("pass", "02T10:00", gpu=False, smoke="gloo")], "untested", "CPU only",
     "pass-02T10:00"),
    ([run("fail", "01T10:00"), run("pass", "02T10:00", gpu=False, smoke="gloo")],
     "untested", "CPU only", "pass-02T10:00"),
    ([run("pass", "02T10:00", smoke=None)], "untested", "no NCCL smoke test on GPUs",
     "pass-02T10:00"),
    ([run("pass", "02T10:00", smoke="gloo")], "untested", "no NCCL smoke test on GPUs",
     "pass-02T10:00"),
], ids=["none", "gpu-pass", "fixed", "broken", "cpu-fail-after-gpu-pass", "cpu-after-gpu",
        "cpu-only", "cpu-pass-after-fail", "gpu-no-smoke", "gpu-gloo"])
def test_status_rules(records, status, note, newest):
    s = status_of(COMBO, list(reversed(records)))  # order of the input does not matter
    assert (s.status, s.note, s.records) == (status, note, len(records))
    assert (s.newest.path.stem if s.newest else None) == newest
    assert s.date == ("2026-03-02" if records else None)
    assert s.label == (f"{status} ({note})" if note else status)


def test_newest_is_by_time_not_by_text():
    early = run("fail", "02T09:59")
    late = StoredRecord(replace(early.record, status="pass",
                                finished="2026-03-02T09:59:00.5Z"), Path("late.json"))
    assert status_of(COMBO, [late, early]).newest.path.name == "late.json"


def test_other_combinations_records_are_ignored():
    other = StoredRecord(replace(GPU_PASS, combination=COMBO.replace("py3.12", "py3.11")),
                         Path("other.json"))
    assert status_of(COMBO, [other]).status == "untested"


def test_statuses_of_the_fixture_records():
    stored = [StoredRecord(r, Path(f"{name}.json")) for name, r in BY_NAME.items()]
    found = {c: (s.status, s.note, s.records) for c, s in statuses(stored).items()}
    assert found == {
        "colossalai-0.4.6-torch2.5.1-cu124-py3.12-ubuntu22.04-x86_64": ("known-bad", None, 1),
        "deepspeed-0.16.4-torch2.5.1-cu121-py3.11-debian12-x86_64": ("known-good", None, 1),
        COMBO: ("known-good", None, 2),
        "megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64":
            ("untested", "CPU only", 1),
    }
    assert list(found) == sorted(found)

