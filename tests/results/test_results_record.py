"""The result record: schema-1 validation that reports every problem with its JSON path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from results_data import INVALID, VERIFY

from envgen.errors import DataError
from envgen.results.record import RecordError, ResultRecord, canonical_json, validate


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", VERIFY, ids=lambda p: p.stem)
def test_fixture_records_are_valid_and_round_trip(path):
    data = _load(path)
    assert validate(data) == []
    record = ResultRecord.from_dict(data)
    assert record.to_dict() == data
    assert ResultRecord.from_dict(record.to_dict()) == record


def test_every_problem_is_collected_with_its_path():
    problems = [str(p) for p in validate(_load(INVALID / "many-problems.json"))]
    assert problems == [
        "$: missing key 'finished'",
        "$: missing key 'log_digest'",
        "$.notes: unknown key (schema 1 does not have it)",
        "$.combination: 'deepspeed 0.18' is not a combination id (only A-Z a-z 0-9 _ . -)",
        "$.lock_hash: 'md5:abc' is not sha256:<64 hex digits>",
        "$.image.tag: unknown key (schema 1 does not have it)",
        "$.image.reference: must not be empty",
        "$.image.digest: 'sha256:xyz' is not sha256:<64 hex digits>",
        "$.started: '2026-03-02 10:00:00' is not an RFC 3339 UTC time such as "
        "2026-05-01T12:00:00Z",
        "$.gpu.model: must be null when count is 0 (a CPU run)",
        "$.tools.torch: 2.5 is not a version string",
        "$.ops[0].status: 'passed' is not one of pass, fail, skip",
        "$.ops[0].build_seconds: -1 is not a number of seconds ≥ 0, or null",
        "$.ops[1]: 'cpu_adam' is not an object {name, status, build_seconds, check, message}",
        "$.smoke.backend: 'mpi' is not one of nccl, gloo",
        "$.smoke.world_size: 0 is not a whole number ≥ 1",
        "$.status: 'ok' is not one of pass, fail",
        "$.durations.smoke: '2' is not a number of seconds ≥ 0",
    ]


def test_rules_across_fields_are_checked_even_where_parts_are_broken():
    problems = [str(p) for p in validate(_load(INVALID / "inconsistent.json"))]
    assert problems == [
        "$.smoke.checks[0].rank: rank 2 is outside world_size 2",
        "$.finished: 2026-03-03T11:00:00Z is before started 2026-03-03T12:00:00.250Z",
        "$.status: 'pass' but ops fused_kernels failed; the overall status must be 'fail'",
        "$.smoke.backend: 'nccl' needs GPUs, but gpu.count is 0",
    ]


def test_from_dict_raises_a_data_error_listing_all_problems():
    with pytest.raises(RecordError) as exc:
        ResultRecord.from_dict(_load(INVALID / "many-problems.json"), source="run.json")
    err = exc.value
    assert isinstance(err, DataError) and err.exit_code == 1
    assert list(err.problems) == ["run.json"] and len(err.problems["run.json"]) == 18
    assert err.message.startswith("run.json has 18 problem(s):\n  $: missing key 'finished'")
    assert "$.durations.smoke" in err.message and err.hint


@pytest.mark.parametrize(("schema", "message"), [
    (2, "$.schema: schema 2 is newer than this envgen reads (1); upgrade envgen"),
    ("1", "$.schema: expected 1, got '1'"),
    (True, "$.schema: expected 1, got True"),
])
def test_other_schemas_are_refused_without_guessing(schema, message):
    data = _load(VERIFY[0]) | {"schema": schema, "status": "maybe"}
    assert [str(p) for p in validate(data)] == [message]


@pytest.mark.parametrize(("value", "message"), [
    ([], "$: expected an object, got a list"),
    (None, "$: expected an object, got null"),
])
def test_not_an_object(value, message):
    assert [str(p) for p in validate(value)] == [message]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("finished", "2026-02-30T10:00:00Z", "$.finished: '2026-02-30T10:00:00Z' is not a valid "
     "time (day is out of range for month)"),
    ("finished", "2026-03-02T10:15:42+00:00", "$.finished: '2026-03-02T10:15:42+00:00' is not "
     "an RFC 3339 UTC time such as 2026-05-01T12:00:00Z"),
    ("combination", "deepspeed-0.18.2", "$.combination: 'deepspeed-0.18.2' is not a combination "
     "id such as deepspeed-0.19.8-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"),
    ("combination", "../../etc-0.1-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64",
     "$.combination: '../../etc-0.1-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64' is not a "
     "combination id (only A-Z a-z 0-9 _ . -)"),
    ("gpu", {"model": None, "count": 2, "driver": None, "cuda_driver": None},
     "$.gpu.model: must name the GPU when count is 2"),
    ("gpu", {"model": None, "count": -1, "driver": None, "cuda_driver": None},
     "$.gpu.count: -1 is not a whole number ≥ 0"),
    ("tools", ["torch"], '$.tools: ["torch"] is not an object of tool name → version string'),
    ("ops", {}, "$.ops: {} is not a list of ops {name, status, build_seconds, check, message}"),
    ("durations", {"ops": 1, "smoke": 2, "total": True},
     "$.durations.total: true is not a number of seconds ≥ 0"),
])
def test_single_field_problems(field, value, message):
    data = _load(VERIFY[0]) | {field: value}
    assert [str(p) for p in validate(data)] == [message]


def test_record_id_is_the_sha256_of_canonical_json():
    data = _load(VERIFY[0])
    record = ResultRecord.from_dict(data)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(record.to_dict()) == canonical.encode()
    assert record.id == hashlib.sha256(canonical.encode()).hexdigest()


def test_record_id_ignores_key_order_and_number_spelling():
    data = _load(VERIFY[0])
    shuffled = dict(reversed(list(data.items())))
    shuffled["tools"] = dict(reversed(list(data["tools"].items())))
    shuffled["durations"] = {k: int(v) if v == int(v) else v
                             for k, v in data["durations"].items()}
    assert ResultRecord.from_dict(shuffled).id == ResultRecord.from_dict(data).id
    changed = data | {"log_digest": "sha256:" + "0" * 64}
    assert ResultRecord.from_dict(changed).id != ResultRecord.from_dict(data).id


def test_the_surface_both_record_kinds_share():
    by_name = {p.stem: ResultRecord.from_dict(_load(p)) for p in VERIFY}
    found = {name: (r.kind, r.tier, r.flavor, r.envgen_version, r.machine_summary, r.error,
                    r.seconds, r.image_size_bytes, r.on_gpu) for name, r in by_name.items()}
    assert found == {
        "colossalai-gpu-fail": (
            "verify", "T4", None, "0.1.0", "2× NVIDIA H200, driver 570.124.06",
            "rank 1: engine_steps: loss did not decrease: 6.91 → 6.93 after 4 steps", 160.5,
            None, True),
        "ds-gpu-fail-older": (
            "verify", "T3", None, "0.1.0", "8× NVIDIA H200, driver 570.124.06",
            "fused_adam: nvcc fatal: unsupported gpu architecture 'compute_100'", 71.25, None,
            True),
        "ds-gpu-pass": ("verify", "T4", None, "0.1.0", "8× NVIDIA H200, driver 570.124.06",
                        None, 361.5, None, True),
        "ds-older-release-gpu-pass": (
            "verify", "T4", None, "0.1.0", "4× NVIDIA A100-SXM4-80GB, driver 535.104.05", None,
            77.0, None, True),
        "megatron-cpu-pass": ("verify", "T2", None, "0.1.0", "CPU run, no GPU", None, 26.5,
                              None, False),
    }
    record = by_name["ds-gpu-pass"]
    assert record.finished_at.isoformat() == "2026-03-02T10:15:42+00:00"


def test_a_failed_run_without_a_failing_check_still_has_an_error_line():
    data = _load(VERIFY[0])
    for check in data["smoke"]["checks"]:
        check["status"] = "pass"
    assert ResultRecord.from_dict(data).error == \
        "the run failed (no op or smoke check did; see the log)"
    data["ops"][0] |= {"status": "fail", "message": "\n  first line\nsecond line"}
    assert ResultRecord.from_dict(data).error == "fused_optim: first line"
    data["ops"][0]["message"] = ""
    assert ResultRecord.from_dict(data).error == "fused_optim: failed"
    assert ResultRecord.from_dict(data | {"status": "pass", "ops": []}).error is None
