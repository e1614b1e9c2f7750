"""Evidence tiers: the tier a record proves, and per combination the highest passing tier,
the record proving it and the newest failed attempt above it."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest
from results_data import ATTEMPTS, VERIFY, load_json

from envgen.results import StoredRecord, evidence, evidence_of, status_of
from envgen.results.attempt import AttemptRecord
from envgen.results.record import Gpu, ResultRecord
from envgen.results.tiers import LABELS, TIERS, rank, tier_label, verify_tier

VERIFY_BY_NAME = {p.stem: ResultRecord.from_dict(load_json(p)) for p in VERIFY}
ATTEMPT_BY_NAME = {p.stem: load_json(p) for p in ATTEMPTS}
GPU_PASS = VERIFY_BY_NAME["ds-gpu-pass"]  # 8 GPUs, NCCL world_size 8
COMBO = "deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"  # the attempts' one


def test_tier_names_and_labels():
    assert TIERS == ("T0", "T1", "T2", "T3", "T4")
    assert [LABELS[t] for t in TIERS] == ["resolves", "locked", "built", "GPU", "multi-GPU"]
    assert [rank(t) for t in TIERS] == [0, 1, 2, 3, 4]
    assert tier_label("T2") == "T2 built"


def _verify(gpus: int, *, backend: str | None = "nccl", world: int = 2, ops: str = "pass"
            ) -> ResultRecord:
    gpu = Gpu(model="NVIDIA H100 80GB HBM3", count=gpus, driver="570.1", cuda_driver="12.8") \
        if gpus else Gpu(model=None, count=0, driver=None, cuda_driver=None)
    return replace(GPU_PASS, gpu=gpu,
                   ops=tuple(replace(o, status=ops) for o in GPU_PASS.ops),
                   smoke=None if backend is None else replace(GPU_PASS.smoke, backend=backend,
                                                              world_size=world))


@pytest.mark.parametrize(("record", "tier"), [
    (_verify(2), "T4"),
    (_verify(8, world=8), "T4"),
    (_verify(2, world=1), "T3"),  # two GPUs, but the smoke test ran one rank
    (_verify(1, world=1), "T3"),
    (_verify(1, backend=None), "T3"),  # ops checked on a GPU, no smoke test
    (_verify(1, backend=None, ops="fail"), "T3"),  # attempted T3 (and failed it)
    (_verify(1, backend=None, ops="skip"), "T2"),  # on a GPU, nothing checked there
    (_verify(2, backend="gloo", ops="skip"), "T2"),
    (_verify(2, backend="gloo"), "T3"),
    (_verify(0, backend="gloo"), "T2"),  # a CPU run
    (_verify(0, backend=None), "T2"),
], ids=["2-gpus-nccl", "8-gpus", "2-gpus-1-rank", "1-gpu-nccl", "1-gpu-ops", "1-gpu-ops-fail",
        "1-gpu-skipped", "gloo-skipped", "gloo-ops", "cpu-gloo", "cpu-no-smoke"])
def test_the_tier_of_a_verify_record(record, tier):
    assert verify_tier(record) == tier == record.tier


def test_fixture_records_have_the_tiers_of_what_they_ran():
    assert {n: r.tier for n, r in VERIFY_BY_NAME.items()} == {
        "colossalai-gpu-fail": "T4", "ds-gpu-fail-older": "T3", "ds-gpu-pass": "T4",
        "ds-older-release-gpu-pass": "T4", "megatron-cpu-pass": "T2"}
    assert {n: d["tier"] for n, d in ATTEMPT_BY_NAME.items()} == {
        "colossalai-t1-lock-fail": "T1", "ds-t1-lock-pass": "T1", "ds-t2-build-fail": "T2",
        "megatron-t2-build-pass": "T2"}


def _attempt(tier: str, status: str, finished: str, *, flavor: str = "venv") -> StoredRecord:
    """An attempt of COMBO finishing on 2026-03-``finished`` (DDTHH:MM)."""
    base = ATTEMPT_BY_NAME["ds-t1-lock-pass" if tier == "T1" else "megatron-t2-build-pass"]
    data = copy.deepcopy(base) | {"combination": COMBO, "status": status, "flavor": flavor,
                                  "started": "2026-03-01T00:00:00Z",
                                  "finished": f"2026-03-{finished}:00Z"}
    if status == "fail":
        data["error"] = f"{tier} broke"
    return StoredRecord(AttemptRecord.from_dict(data), Path(f"{tier}-{status}-{finished}.json"))


def _gpu(status: str, finished: str, *, gpus: int = 2) -> StoredRecord:
    record = replace(_verify(gpus), combination=COMBO, status=status,
                     started="2026-03-01T00:00:00Z", finished=f"2026-03-{finished}:00Z")
    if status == "fail":
        record = replace(record, ops=(replace(record.ops[0], status="fail", message="boom"),
                                      *record.ops[1:]))
    return StoredRecord(record, Path(f"gpu{gpus}-{status}-{finished}.json"))


def _names(s) -> tuple:
    return (s.tier, s.status, s.proof.path.stem if s.proof else None,
            s.failed.path.stem if s.failed else None, [x.path.stem for x in s.shown])


@pytest.mark.parametrize(("records", "expected"), [
    ([], ("T0", "untested", None, None, [])),
    ([_attempt("T1", "pass", "02T10:00")],
     ("T1", "untested", "T1-pass-02T10:00", None, ["T1-pass-02T10:00"])),
    # a failed T2 after a passing T1: tier T1, the T2 failure listed
    ([_attempt("T1", "pass", "02T10:00"), _attempt("T2", "fail", "03T10:00")],
     ("T1", "known-bad", "T1-pass-02T10:00", "T2-fail-03T10:00",
      ["T1-pass-02T10:00", "T2-fail-03T10:00"])),
    # ... and a T1 pass after it: still T1 with the failed T2 above, no longer known-bad
    ([_attempt("T1", "pass", "02T10:00"), _attempt("T2", "fail", "03T10:00"),
      _attempt("T1", "pass", "04T10:00")],
     ("T1", "untested", "T1-pass-04T10:00", "T2-fail-03T10:00",
      ["T1-pass-04T10:00", "T2-fail-03T10:00"])),
    # the newest failed attempt above the tier is the one shown
    ([_attempt("T2", "fail", "02T10:00"), _gpu("fail", "03T10:00"),
      _attempt("T1", "pass", "04T10:00")],
     ("T1", "untested", "T1-pass-04T10:00", "gpu2-fail-03T10:00",
      ["T1-pass-04T10:00", "gpu2-fail-03T10:00"])),
    # a failure at or below the tier is not "failed above", but the newest one is shown
    ([_attempt("T2", "pass", "02T10:00"), _attempt("T1", "fail", "03T10:00")],
     ("T2", "known-bad", "T2-pass-02T10:00", None, ["T2-pass-02T10:00", "T1-fail-03T10:00"])),
    ([_attempt("T1", "fail", "02T10:00")],
     ("T0", "known-bad", None, "T1-fail-02T10:00", ["T1-fail-02T10:00"])),
    # a verify record on 2 GPUs proves T4; attempts after it keep it
    ([_attempt("T2", "pass", "02T10:00"), _gpu("pass", "03T10:00"),
      _attempt("T1", "pass", "04T10:00")],
     ("T4", "known-good", "gpu2-pass-03T10:00", None, ["gpu2-pass-03T10:00"])),
    ([_gpu("pass", "02T10:00", gpus=1), _gpu("fail", "03T10:00")],
     ("T3", "known-bad", "gpu1-pass-02T10:00", "gpu2-fail-03T10:00",
      ["gpu1-pass-02T10:00", "gpu2-fail-03T10:00"])),
    # the newest passing record of the proven tier proves it
    ([_attempt("T2", "pass", "02T10:00"), _attempt("T2", "pass", "03T10:00", flavor="conda")],
     ("T2", "untested", "T2-pass-03T10:00", None, ["T2-pass-03T10:00"])),
], ids=["none", "t1", "t1-then-t2-fail", "t1-t2fail-t1", "newest-failed-above",
        "failure-below", "only-failed", "t4-verify", "t3-then-t4-fail", "newest-proof"])
def test_evidence_of_a_combination(records, expected):
    found = evidence_of(COMBO, list(reversed(records)))
    assert _names(found) == expected
    assert found.records == len(records)
    assert status_of(COMBO, records) == found  # the status is the evidence's


def test_flavor_and_labels_come_from_the_proof():
    found = evidence_of(COMBO, [_attempt("T2", "pass", "02T10:00", flavor="conda"),
                                _attempt("T1", "pass", "03T10:00", flavor="os-package")])
    assert (found.tier, found.tier_label, found.flavor) == ("T2", "built", "conda")
    assert evidence_of(COMBO, [_gpu("pass", "02T10:00")]).flavor is None  # verify: unknown
    assert evidence_of(COMBO, []).flavor is None


def test_evidence_per_combination():
    other = _attempt("T1", "pass", "02T10:00")
    other = StoredRecord(replace(other.record, combination=COMBO.replace("py3.12", "py3.11")),
                         other.path)
    found = evidence([_attempt("T2", "pass", "02T10:00"), other])
    assert list(found) == sorted([COMBO, other.record.combination])
    assert found[COMBO].tier == "T2" and found[other.record.combination].tier == "T1"
