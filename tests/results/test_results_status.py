"""A combination's status from its records, defined through the tiers: known-good (tier ≥ T3
and the newest record passed), known-bad (the newest record failed), untested otherwise."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from results_data import RECORDS, VERIFY

from envgen.results import StoredRecord, status_of, statuses
from envgen.results.record import Gpu, ResultRecord
from envgen.results.store import parse_any

COMBO = "deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"
BY_NAME = {p.stem: ResultRecord.from_dict(json.loads(p.read_text())) for p in VERIFY}
GPU_PASS = BY_NAME["ds-gpu-pass"]  # H200 × 8, NCCL smoke test passed
CPU = Gpu(model=None, count=0, driver=None, cuda_driver=None)


def run(status: str, finished: str, *, gpu: bool = True, smoke: str | None = "nccl",
        ops: bool = False) -> StoredRecord:
    """A record of COMBO that finished at ``finished`` (day of March 2026, HH:MM); ``ops``:
    keep the fixture's checked ops (else none)."""
    record = replace(GPU_PASS, status=status, finished=f"2026-03-{finished}:00Z",
                     started="2026-03-01T00:00:00Z", ops=GPU_PASS.ops if ops else (),
                     gpu=GPU_PASS.gpu if gpu else CPU,
                     smoke=None if smoke is None else replace(
                         GPU_PASS.smoke, backend=smoke, checks=()))
    return StoredRecord(record, Path(f"{status}-{finished}.json"))


@pytest.mark.parametrize(("records", "status", "tier", "note", "newest"), [
    ([], "untested", "T0", None, None),
    ([run("pass", "02T10:00")], "known-good", "T4", None, "pass-02T10:00"),
    ([run("fail", "01T10:00"), run("pass", "02T10:00")], "known-good", "T4", None,
     "pass-02T10:00"),
    ([run("pass", "01T10:00"), run("fail", "02T10:00")], "known-bad", "T4", None,
     "fail-02T10:00"),
    # the newest decides: a CPU failure after a GPU pass is known-bad (the tier stays T4)
    ([run("pass", "01T10:00"), run("fail", "02T10:00", gpu=False, smoke="gloo")],
     "known-bad", "T4", None, "fail-02T10:00"),
    # a CPU pass after a GPU pass keeps the GPU evidence
    ([run("pass", "01T10:00"), run("pass", "02T10:00", gpu=False, smoke="gloo")],
     "known-good", "T4", None, "pass-02T10:00"),
    ([run("pass", "02T10:00", gpu=False, smoke="gloo")], "untested", "T2", "CPU only",
     "pass-02T10:00"),
    ([run("fail", "01T10:00"), run("pass", "02T10:00", gpu=False, smoke="gloo")],
     "untested", "T2", "CPU only", "pass-02T10:00"),
    # one GPU with the ops checked is GPU evidence (T3) without a smoke test
    ([run("pass", "02T10:00", smoke=None, ops=True)], "known-good", "T3", None,
     "pass-02T10:00"),
    # on GPUs, but nothing checked there: no GPU evidence
    ([run("pass", "02T10:00", smoke=None)], "untested", "T2", "no GPU check",
     "pass-02T10:00"),
    ([run("pass", "02T10:00", smoke="gloo")], "untested", "T2", "no GPU check",
     "pass-02T10:00"),
], ids=["none", "gpu-pass", "fixed", "broken", "cpu-fail-after-gpu-pass", "cpu-after-gpu",
        "cpu-only", "cpu-pass-after-fail", "gpu-ops-no-smoke", "gpu-nothing-checked",
        "gpu-gloo"])
def test_status_rules(records, status, tier, note, newest):
    s = status_of(COMBO, list(reversed(records)))  # order of the input does not matter
    assert (s.status, s.tier, s.note, s.records) == (status, tier, note, len(records))
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
    stored = [StoredRecord(parse_any(json.loads(p.read_text()))[0], Path(f"{p.stem}.json"))
              for p in RECORDS]
    found = {c: (s.status, s.tier, s.note, s.records,
                 s.proof.path.stem if s.proof else None,
                 s.failed.path.stem if s.failed else None)
             for c, s in statuses(stored).items()}
    assert found == {
        "colossalai-0.4.6-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64":
            ("known-bad", "T0", None, 1, None, "colossalai-t1-lock-fail"),
        "colossalai-0.4.6-torch2.5.1-cu124-py3.12-ubuntu22.04-x86_64":
            ("known-bad", "T0", None, 1, None, "colossalai-gpu-fail"),
        "deepspeed-0.16.4-torch2.5.1-cu121-py3.11-debian12-x86_64":
            ("known-good", "T4", None, 1, "ds-older-release-gpu-pass", None),
        "deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64":
            ("known-bad", "T1", None, 2, "ds-t1-lock-pass", "ds-t2-build-fail"),
        COMBO: ("known-good", "T4", None, 2, "ds-gpu-pass", None),
        "megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64":
            ("untested", "T2", "CPU only", 1, "megatron-cpu-pass", None),
        "megatron-core-0.12.0-torch2.7.1-cu126-py3.12-ubuntu22.04-x86_64":
            ("untested", "T2", None, 1, "megatron-t2-build-pass", None),  # a build: no note
    }
    assert list(found) == sorted(found)
