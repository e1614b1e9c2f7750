"""The attempt record (attempt/1): a lock (T1) or build (T2) attempt, validated against its
JSON Schema and the rules across fields, every problem reported with its JSON path."""

from __future__ import annotations

import copy
import hashlib
import json
import math

import pytest
from results_data import ATTEMPTS, INVALID, load_json

from envgen.errors import DataError
from envgen.results.attempt import AttemptRecord, validate
from envgen.results.record import RecordError, canonical_json
from envgen.schemas.check import SCHEMA_DIR, check, validator

BY_NAME = {p.stem: load_json(p) for p in ATTEMPTS}
T1_PASS = BY_NAME["ds-t1-lock-pass"]
T2_FAIL = BY_NAME["ds-t2-build-fail"]
T2_PASS = BY_NAME["megatron-t2-build-pass"]


def _problems(data) -> list[str]:
    return [str(p) for p in validate(data)]


def test_the_fixtures_cover_both_tiers_and_statuses():
    assert sorted((d["tier"], d["status"]) for d in BY_NAME.values()) == [
        ("T1", "fail"), ("T1", "pass"), ("T2", "fail"), ("T2", "pass")]


@pytest.mark.parametrize("path", ATTEMPTS, ids=lambda p: p.stem)
def test_fixture_attempts_are_valid_and_round_trip_exactly(path):
    data = load_json(path)
    assert validate(data) == []
    record = AttemptRecord.from_dict(data)
    assert record.to_dict() == data
    assert json.dumps(record.to_dict()) == json.dumps(data)  # same key order, same spelling
    assert AttemptRecord.from_dict(record.to_dict()) == record
    with pytest.raises(AttributeError):
        record.status = "fail"  # frozen


def test_the_brief_example_is_valid():
    """The record the evidence runner writes, exactly as specified."""
    data = {
        "schema": "attempt/1", "tier": "T2",
        "combination": "deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64",
        "flavor": "venv", "status": "pass",
        "started": "2026-11-23T16:00:00Z", "finished": "2026-11-23T16:01:10Z",
        "envgen": "0.1.0",
        "machine": {"os": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-40-amd64",
                    "arch": "x86_64", "cpus": 2, "memory_gib": 23.4, "gpus": [],
                    "docker": "20.10.24+dfsg1"},
        "lock": {"hash": "sha256:" + "a" * 64, "inputs_hash": "sha256:" + "b" * 64,
                 "packages": 57, "seconds": 12.3},
        "build": {"image": {"reference": "envgen/deepspeed:0.19.8-x",
                            "digest": "sha256:" + "c" * 64},
                  "size_bytes": 5123456789, "seconds": 431.2, "arch_list": "9.0+PTX",
                  "nvcc": "13.2", "ops": [{"name": "fused_adam", "status": "pass",
                                           "message": ""}]},
        "log_digest": "sha256:" + "d" * 64, "error": None,
        "command": "envgen evidence --tier T2 --combination deepspeed-0.19.8-torch2.15.0-"
                   "cu132-py3.11-debian12-x86_64",
    }
    record = AttemptRecord.from_dict(data)
    assert (record.kind, record.tier, record.seconds, record.image_size_bytes) == (
        "attempt", "T2", 431.2, 5123456789)
    assert record.machine_summary == "2 CPUs, Debian GNU/Linux 12, no GPU"
    assert record.envgen_version == "0.1.0" and record.error is None and not record.on_gpu
    assert record.finished_at.isoformat() == "2026-11-23T16:01:10+00:00"


def test_the_surface_both_record_kinds_share():
    t1, t2, mc = (AttemptRecord.from_dict(d) for d in (T1_PASS, T2_FAIL, T2_PASS))
    assert (t1.tier, t1.status, t1.seconds, t1.image_size_bytes, t1.flavor) == (
        "T1", "pass", 12.3, None, "venv")
    assert (t2.tier, t2.status, t2.seconds, t2.image_size_bytes) == (
        "T2", "fail", 431.2, 9876543210)
    assert t2.error == 'cpu_adam: error: identifier "__nv_bfloat162" is undefined'
    assert mc.machine_summary == "16 CPUs, Debian GNU/Linux 12, 1× NVIDIA H100 80GB HBM3"
    assert not mc.on_gpu  # a build never uses the GPU the machine has
    lock_failed = AttemptRecord.from_dict(BY_NAME["colossalai-t1-lock-fail"])
    assert lock_failed.lock is None and lock_failed.seconds is None


def test_machine_summary_counts_gpus_and_cpus():
    data = copy.deepcopy(T1_PASS)
    data["machine"] |= {"cpus": 1, "os": "Ubuntu 22.04.5 LTS",
                        "gpus": ["NVIDIA H100 80GB HBM3"] * 2 + ["NVIDIA A100-SXM4-80GB"]}
    assert AttemptRecord.from_dict(data).machine_summary == (
        "1 CPU, Ubuntu 22.04.5 LTS, 2× NVIDIA H100 80GB HBM3 + 1× NVIDIA A100-SXM4-80GB")


def test_every_shape_problem_is_collected_with_its_path_in_field_order():
    assert _problems(load_json(INVALID / "attempt-many-problems.json")) == [
        "$: missing key 'finished'",
        "$.notes: unknown key (attempt/1 does not have it)",
        "$.tier: 'T3' is not one of T1, T2",
        "$.combination: 'deepspeed 0.18' is not a combination id (only A-Z a-z 0-9 _ . -)",
        "$.flavor: 'pip' is not one of conda, venv, os-package",
        "$.status: 'ok' is not one of pass, fail",
        "$.started: '2026-03-05 10:00:00' is not an RFC 3339 UTC time such as "
        "2026-05-01T12:00:00Z",
        "$.envgen: must not be empty",
        "$.machine.disk: unknown key (attempt/1 does not have it)",
        "$.machine.cpus: 0 is not a whole number ≥ 1",
        "$.machine.memory_gib: '23.4' is not a number ≥ 0",
        "$.machine.gpus[1]: must not be empty",
        "$.machine.docker: must not be empty",
        "$.lock: missing key 'seconds'",
        "$.lock.hash: 'md5:abc' is not sha256:<64 hex digits>",
        "$.lock.packages: 57.5 is not a whole number ≥ 0",
        "$.build.image.digest: 'sha256:xyz' is not sha256:<64 hex digits>",
        "$.build.size_bytes: -1 is not a whole number ≥ 0",
        "$.build.ops[0].status: 'passed' is not one of pass, fail, skip",
        "$.build.ops[1]: 'cpu_adam' is not an object {name, status, message}",
        "$.error: 3 is not a string (the first error line) or null",
    ]


def test_rules_across_fields_are_checked_together():
    assert _problems(load_json(INVALID / "attempt-inconsistent.json")) == [
        "$.combination: 'deepspeed-0.18.2' is not a combination id such as "
        "deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64",
        "$.finished: 2026-03-06T09:07:11Z is before started 2026-03-06T09:10:00Z",
        "$.error: must be null when status is 'pass'",
        "$.lock: a passing T1 attempt needs its lock",
        "$.build: must be null for a T1 (lock) attempt",
    ]


def _with(base: dict, **changes) -> dict:
    data = copy.deepcopy(base)
    for dotted, value in changes.items():
        node, *parts = dotted.split("__")
        target = data
        for part in [node, *parts][:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = [node, *parts][-1]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return data


@pytest.mark.parametrize(("data", "expected"), [
    # finished ≥ started
    (_with(T1_PASS, finished="2026-03-05T09:59:59.999Z"),
     ["$.finished: 2026-03-05T09:59:59.999Z is before started 2026-03-05T10:00:00Z"]),
    (_with(T1_PASS, finished="2026-02-30T10:00:00Z"),
     ["$.finished: '2026-02-30T10:00:00Z' is not a valid time (day is out of range for "
      "month)"]),
    # status "fail" ⇔ error is a non-empty string
    (_with(T1_PASS, status="fail"),
     ["$.error: must be the first error line (a non-empty string) when status is 'fail'"]),
    (_with(T2_FAIL, error="   "),
     ["$.error: must be the first error line (a non-empty string) when status is 'fail'"]),
    (_with(T2_FAIL, error=""),
     ["$.error: must be the first error line (a non-empty string) when status is 'fail'"]),
    (_with(T1_PASS, error="lock solved, then something"),
     ["$.error: must be null when status is 'pass'"]),
    # a passing T1 needs its lock; a T1 has no build
    (_with(T1_PASS, lock=None), ["$.lock: a passing T1 attempt needs its lock"]),
    (_with(T1_PASS, build=T2_PASS["build"]),
     ["$.build: must be null for a T1 (lock) attempt"]),
    (_with(BY_NAME["colossalai-t1-lock-fail"], build=T2_PASS["build"]),
     ["$.build: must be null for a T1 (lock) attempt"]),
    # a passing T2 needs its lock and its build, and no failed op
    (_with(T2_PASS, lock=None), ["$.lock: a passing T2 attempt needs its lock"]),
    (_with(T2_PASS, build=None), ["$.build: a passing T2 attempt needs its build"]),
    (_with(T2_FAIL, status="pass", error=None),
     ["$.build.ops[1].status: op 'cpu_adam' failed, but the attempt's status is 'pass'; it "
      "must be 'fail'"]),
    # op status ∈ pass | fail | skip
    (_with(T2_PASS, build__ops__0__status="ok"),
     ["$.build.ops[0].status: 'ok' is not one of pass, fail, skip"]),
    # the combination is a valid id
    (_with(T1_PASS, combination="deepspeed-0.18.2-torch2.9.0"),
     ["$.combination: 'deepspeed-0.18.2-torch2.9.0' is not a combination id such as "
      "deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64"]),
    (_with(T1_PASS, combination="../x-0.1-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"),
     ["$.combination: '../x-0.1-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64' is not a "
      "combination id (only A-Z a-z 0-9 _ . -)"]),
    # types and shapes
    (_with(T1_PASS, machine__cpus=True), ["$.machine.cpus: true is not a whole number ≥ 1"]),
    (_with(T1_PASS, machine__gpus="none"),
     ["$.machine.gpus: 'none' is not a list of GPU model names (empty: no GPU)"]),
    (_with(T1_PASS, machine__docker=24),
     ["$.machine.docker: 24 is not a non-empty string (the docker version) or null"]),
    (_with(T1_PASS, lock__seconds=-0.5), ["$.lock.seconds: -0.5 is not a number ≥ 0"]),
    (_with(T1_PASS, lock__seconds=math.nan), ["$.lock.seconds: must be a finite number, "
                                              "got nan"]),
    (_with(T1_PASS, lock=[]),
     ["$.lock: [] is not an object {hash, inputs_hash, packages, seconds} or null"]),
    (_with(T2_PASS, build__nvcc=""), ["$.build.nvcc: must not be empty"]),
    (_with(T2_PASS, build__image=None), ["$.build.image: null is not an object "
                                         "{reference, digest}"]),
    (_with(T1_PASS, log_digest="sha256:" + "A" * 64),
     ["$.log_digest: 'sha256:" + "A" * 64 + "' is not sha256:<64 hex digits>"]),
    (_with(T1_PASS, log_digest="sha256:" + "a" * 64 + "\n"),
     ["$.log_digest: 'sha256:" + "a" * 64 + "\\n' is not sha256:<64 hex digits>"]),
    (_with(T1_PASS, command=""), ["$.command: must not be empty"]),
], ids=["time-order", "time-invalid", "fail-without-error", "fail-blank-error",
        "fail-empty-error", "pass-with-error", "t1-pass-no-lock", "t1-with-build",
        "t1-fail-with-build", "t2-pass-no-lock", "t2-pass-no-build", "t2-pass-failed-op",
        "op-status", "combination-shape", "combination-path", "cpus-bool", "gpus-type",
        "docker-type", "seconds-negative", "seconds-nan", "lock-type", "nvcc-empty",
        "image-null", "digest-case", "digest-newline", "command-empty"])
def test_each_rule_reports_its_path(data, expected):
    assert _problems(data) == expected


@pytest.mark.parametrize(("changes", "ok"), [
    ({"status": "fail", "error": "x", "lock": None}, True),  # a T1 whose lock failed
    ({"tier": "T2", "status": "fail", "error": "docker build failed"}, True),  # no build
    ({"machine": None}, False),
])
def test_what_a_failed_attempt_may_leave_out(changes, ok):
    assert (_problems(T1_PASS | changes) == []) is ok


@pytest.mark.parametrize(("schema", "message"), [
    ("attempt/2", "$.schema: schema 'attempt/2' is newer than this envgen reads "
                  "('attempt/1'); upgrade envgen"),
    ("attempt/x", "$.schema: expected 'attempt/1', got 'attempt/x'"),
    ("attempt/0", "$.schema: expected 'attempt/1', got 'attempt/0'"),
])
def test_other_schemas_are_refused_without_guessing(schema, message):
    assert _problems(T1_PASS | {"schema": schema, "status": "maybe"}) == [message]


def test_not_an_object_and_no_schema():
    assert _problems([]) == ["$: expected an object, got a list"]
    assert _problems({k: v for k, v in T1_PASS.items() if k != "schema"}) == [
        "$: missing key 'schema'"]


def test_from_dict_raises_a_data_error_listing_all_problems():
    with pytest.raises(RecordError) as exc:
        AttemptRecord.from_dict(load_json(INVALID / "attempt-many-problems.json"),
                                source="attempt.json")
    err = exc.value
    assert isinstance(err, DataError) and err.exit_code == 1
    assert len(err.problems["attempt.json"]) == 21
    assert err.message.startswith("attempt.json has 21 problem(s):\n  $: missing key "
                                  "'finished'")
    assert "attempt/1" in err.hint


def test_record_id_is_the_sha256_of_canonical_json_and_stable():
    record = AttemptRecord.from_dict(T2_FAIL)
    canonical = json.dumps(T2_FAIL, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(record.to_dict()) == canonical.encode()
    assert record.id == hashlib.sha256(canonical.encode()).hexdigest()
    assert record.id.startswith("dd132156c55f")  # stable: the golden table links it
    shuffled = dict(reversed(list(T2_FAIL.items())))
    shuffled["machine"] = dict(reversed(list(T2_FAIL["machine"].items())))
    shuffled["build"] = T2_FAIL["build"] | {"seconds": 431.2, "size_bytes": 9876543210.0}
    assert AttemptRecord.from_dict(shuffled).id == record.id
    assert AttemptRecord.from_dict(T2_FAIL | {"lock": T2_FAIL["lock"] | {"seconds": 12.30}}
                                   ).id == record.id
    assert AttemptRecord.from_dict(T2_FAIL | {"error": "other"}).id != record.id


def test_the_schema_is_draft_2020_12_and_agrees_with_jsonschema():
    """fastjsonschema decides whether a record is valid, jsonschema lists the places wrong:
    both agree (the rules across fields are envgen's own, on top of the schema)."""
    import jsonschema

    schema = json.loads((SCHEMA_DIR / "attempt-record.schema.json").read_text("utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    reference = jsonschema.Draft202012Validator(schema)
    for data in [*BY_NAME.values(), load_json(INVALID / "attempt-many-problems.json"),
                 load_json(INVALID / "attempt-inconsistent.json"),
                 _with(T1_PASS, machine__cpus=2.5, lock=[], error=3, tier=None)]:
        ours = sorted({tuple(e.path) for e in check(data, "attempt-record")}, key=str)
        theirs = sorted({tuple(e.absolute_path) for e in reference.iter_errors(data)}, key=str)
        assert ours == theirs, data
        assert validator("attempt-record").is_valid(data) == (not theirs), data
