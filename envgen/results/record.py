"""The result record: what one verify run on one combination found (schema version 1).

Input: a record's JSON (``matrix/results/README.md`` documents every field). Output: a frozen
:class:`ResultRecord`, or every problem with its JSON path (``$.ops[1].status``), so a broken
record is fixed in one pass. Reading one checks its shape against
``envgen/schemas/result-record.schema.json`` (:mod:`envgen.schemas.check`), then the rules a
schema cannot say (a real date, a combination id envgen can parse, the GPU model against the
count, ranks within the world size, the overall status against the parts, time order); only
then are the values built. ``to_dict`` gives the JSON back, and a record's id is the sha256 of
its canonical JSON (sorted keys, compact separators), so the same run always has the same id.
The helpers that word schema errors as record problems serve both record kinds
(:mod:`envgen.results.attempt`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from envgen.errors import DataError
from envgen.ids import parse_combination_id
from envgen.results.tiers import verify_tier
from envgen.schemas.check import SchemaError, load_schema, validator

SCHEMA = 1
STATUSES = ("pass", "fail", "skip")
OVERALL = ("pass", "fail")
BACKENDS = ("nccl", "gloo")
SCHEMA_NAME = "result-record"

_UTC = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z\Z")
SAFE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a record: where (a JSON path) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class RecordError(DataError):
    """Result records failed validation. ``problems`` maps each source (a file name, or
    "result record") to every problem found in it."""

    def __init__(self, problems: Mapping[str, list[Problem]], *, total: int | None = None,
                 hint: str | None = None) -> None:
        self.problems = {source: tuple(ps) for source, ps in problems.items() if ps}
        count = sum(len(ps) for ps in self.problems.values())
        if len(self.problems) == 1 and total is None:
            source, ps = next(iter(self.problems.items()))
            head = f"{source} has {count} problem(s):"
            lines = [str(p) for p in ps]
        else:
            of = f" of {total}" if total is not None else ""
            head = f"{len(self.problems)}{of} result file(s) invalid, {count} problem(s):"
            lines = [f"{source}: {p}" for source, ps in self.problems.items() for p in ps]
        super().__init__(
            "\n  ".join([head, *lines]),
            hint=hint or "fix the fields named (matrix/results/README.md describes both record "
            "kinds: verify records, schema 1, and attempt records, attempt/1), or re-run what "
            "wrote it",
        )


def kind_of(value: Any) -> str:
    """``a list``, ``null``: what a JSON value is, for messages."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


# What both record kinds share: problems found as (path parts, Problem), the path parts placing
# the problem among the others (in the order the schema lists the fields), then sorted.
Found = list[tuple[tuple, Problem]]


def schema_problems(data: Any, schema_name: str, label: str) -> Found:
    """Every way ``data`` breaks the record schema ``schema_name``; ``label`` names the schema
    in "unknown key" messages ("schema 1")."""
    return [(e.path, p) for e in validator(schema_name).errors(data) for p in _worded(e, label)]


def in_field_order(schema_name: str, found: Found) -> list[Problem]:
    """The problems sorted by where they are: each key's position among its object's
    properties in the schema, list indexes as they are (a stable sort)."""
    schema = load_schema(schema_name)
    return [p for _, p in sorted(found, key=lambda f: _field_order(schema, f[0]))]


def _field_order(schema: dict, parts: tuple) -> tuple:
    key: list[int] = []
    node: Any = schema
    for part in parts:
        while isinstance(node, dict) and "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        if not isinstance(node, dict):
            node = {}
        if isinstance(part, int):
            key.append(part)
            node = node.get("items", {})
        else:
            props = list(node.get("properties", {}))
            key.append(props.index(part) if part in props else len(props))
            node = node.get("properties", {}).get(part, {})
    return tuple(key)


def json_path(parts: tuple) -> str:
    """``$.ops[1].status`` for ``("ops", 1, "status")``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _worded(error: SchemaError, label: str) -> list[Problem]:
    path = json_path(error.path)
    if error.keyword == "required":
        return [Problem(path, f"missing key {error.detail!r}")]
    if error.keyword == "additionalProperties":
        return [Problem(f"{path}.{key}", f"unknown key ({label} does not have it)")
                for key in error.detail]
    if error.keyword == "minLength" and error.instance == "":
        return [Problem(path, "must not be empty")]
    return [Problem(path, error.message())]


def finite(numbers: list[tuple[tuple, Any]]) -> Found:
    """NaN and infinities (Python's json reads them; JSON Schema's ``minimum`` lets them by)
    are not numbers a record may hold: ``numbers`` are the record's number fields."""
    return [(parts, Problem(json_path(parts), f"must be a finite number, got {value}"))
            for parts, value in numbers
            if isinstance(value, float) and not math.isfinite(value)]


def at(d: Any, *keys: str) -> Any:
    """``d[k1][k2]…``, or None where a part is missing or not an object."""
    for key in keys:
        d = d.get(key) if isinstance(d, dict) else None
    return d


def times(d: dict) -> tuple[Found, dict[str, datetime]]:
    """Problems of ``started`` and ``finished`` where they have the right shape but are no
    real time (February 30th), and those that are."""
    out: Found = []
    found: dict[str, datetime] = {}
    for key in ("started", "finished"):
        text = d.get(key)
        if isinstance(text, str) and _UTC.match(text):
            try:
                found[key] = parse_time(text)
            except ValueError as exc:
                out.append(((key,), Problem(f"$.{key}", f"{text!r} is not a valid time "
                                                      f"({exc})")))
    return out, found


def combination_problems(d: dict, example: str) -> Found:
    """The combination id, when it is a safe name, must also be one envgen can read."""
    combination = d.get("combination")
    if isinstance(combination, str) and SAFE_ID.match(combination) \
            and not parse_combination_id(combination):
        return [(("combination",), Problem("$.combination", f"{combination!r} is not a "
                                           f"combination id such as {example}"))]
    return []


def parse_time(text: str) -> datetime:
    """An RFC 3339 UTC time (``…Z``, optional fraction up to nanoseconds) as a datetime."""
    main, _, frac = text[:-1].partition(".")
    stamp = datetime.fromisoformat(main + "+00:00")
    return stamp.replace(microsecond=int((frac + "000000")[:6])) if frac else stamp


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    """The image the run used, pinned by digest."""

    reference: str
    digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """The GPUs the run saw: count 0 and model null for a CPU run."""

    model: str | None
    count: int
    driver: str | None
    cuda_driver: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpResult:
    """One of the framework's ops: built (how long), loaded, and checked against a reference."""

    name: str
    status: str
    build_seconds: float | None
    check: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeCheck:
    """One smoke-test check; ``rank`` names the process that failed it (null: all ranks)."""

    name: str
    status: str
    message: str
    rank: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Smoke:
    """The multi-process smoke test: backend, world size, its checks and how long it took."""

    backend: str
    world_size: int
    checks: tuple[SmokeCheck, ...]
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Durations:
    """Wall-clock seconds: building and checking the ops, the smoke test, the whole run."""

    ops: float
    smoke: float
    total: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultRecord:
    """One verify run on one combination (schema 1). ``from_dict`` validates completely."""

    schema: int
    combination: str
    lock_hash: str
    image: Image | None
    started: str
    finished: str
    gpu: Gpu
    tools: Mapping[str, str]
    ops: tuple[OpResult, ...]
    smoke: Smoke | None
    status: str
    durations: Durations
    log_digest: str

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "result record") -> ResultRecord:
        """The record ``data`` describes; RecordError listing every problem otherwise."""
        record, problems = parse(data)
        if problems:
            raise RecordError({source: problems})
        return record

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "combination": self.combination,
            "lock_hash": self.lock_hash,
            "image": None if self.image is None else {"reference": self.image.reference,
                                                      "digest": self.image.digest},
            "started": self.started,
            "finished": self.finished,
            "gpu": {"model": self.gpu.model, "count": self.gpu.count, "driver": self.gpu.driver,
                    "cuda_driver": self.gpu.cuda_driver},
            "tools": dict(sorted(self.tools.items())),
            "ops": [{"name": o.name, "status": o.status, "build_seconds": o.build_seconds,
                     "check": o.check, "message": o.message} for o in self.ops],
            "smoke": None if self.smoke is None else {
                "backend": self.smoke.backend, "world_size": self.smoke.world_size,
                "checks": [{"name": c.name, "status": c.status, "message": c.message,
                            "rank": c.rank} for c in self.smoke.checks],
                "seconds": self.smoke.seconds},
            "status": self.status,
            "durations": {"ops": self.durations.ops, "smoke": self.durations.smoke,
                          "total": self.durations.total},
            "log_digest": self.log_digest,
        }

    @property
    def id(self) -> str:
        """sha256 (hex) of the canonical JSON: sorted keys, compact separators, UTF-8."""
        return hashlib.sha256(canonical_json(self.to_dict())).hexdigest()

    @property
    def finished_at(self) -> datetime:
        return parse_time(self.finished)

    # the surface both record kinds share (envgen.results.tiers, status, table)
    kind = "verify"

    @property
    def tier(self) -> str:
        """T4, T3 or T2: what the run attempted (and proves if it passed); see
        :func:`envgen.results.tiers.verify_tier`."""
        return verify_tier(self)

    @property
    def flavor(self) -> None:
        """A verify record does not say how the environment was installed."""
        return None

    @property
    def envgen_version(self) -> str | None:
        return self.tools.get("envgen")

    @property
    def on_gpu(self) -> bool:
        return self.gpu.count >= 1

    @property
    def machine_summary(self) -> str:
        """``1× NVIDIA H100 80GB HBM3, driver 570.124.06``; ``CPU run, no GPU``."""
        if self.gpu.count == 0:
            return "CPU run, no GPU"
        driver = f", driver {self.gpu.driver}" if self.gpu.driver else ""
        return f"{self.gpu.count}× {self.gpu.model}{driver}"

    @property
    def seconds(self) -> float:
        return self.durations.total

    @property
    def image_size_bytes(self) -> None:
        return None

    @property
    def error(self) -> str | None:
        """The first failing op's or smoke check's name and message (its first line); None
        when the run passed."""
        if self.status != "fail":
            return None
        failing = [(o.name, o.message) for o in self.ops if o.status == "fail"]
        if self.smoke is not None:
            failing += [(c.name if c.rank is None else f"rank {c.rank}: {c.name}", c.message)
                        for c in self.smoke.checks if c.status == "fail"]
        if not failing:
            return "the run failed (no op or smoke check did; see the log)"
        name, message = failing[0]
        first = message.strip().splitlines()[0] if message.strip() else "failed"
        return f"{name}: {first}"


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def validate(data: Any) -> list[Problem]:
    """Every problem in ``data`` as a schema-1 result record (empty: valid)."""
    return parse(data)[1]


def parse(data: Any) -> tuple[ResultRecord | None, list[Problem]]:
    """The record ``data`` describes and no problems, or None and every problem."""
    if not isinstance(data, dict):
        return None, [Problem("$", f"expected an object, got {kind_of(data)}")]
    schema = data.get("schema", SCHEMA)
    if type(schema) is not int or schema != SCHEMA:
        if type(schema) is int and schema > SCHEMA:
            message = f"schema {schema} is newer than this envgen reads ({SCHEMA}); upgrade envgen"
        else:
            message = f"expected {SCHEMA}, got {schema!r}"
        return None, [Problem("$.schema", message)]  # the rest may mean something else
    found = [] if validator(SCHEMA_NAME).is_valid(data) else \
        schema_problems(data, SCHEMA_NAME, "schema 1")
    bad_times, when = times(data)
    found += _field_rules(data, bad_times)
    problems = in_field_order(SCHEMA_NAME, found) if found else []
    problems += _rules(data, when)
    return (None, problems) if problems else (_build(data), [])


def _field_rules(d: dict, bad_times: Found) -> Found:
    """Rules of one field or part that a schema cannot say; each looks only at values of the
    right type. Their problems sort among the schema's."""
    out = combination_problems(d, "deepspeed-0.19.8-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64")
    out += bad_times
    gpu = _dict(d.get("gpu"))
    smoke = _dict(d.get("smoke"))
    checks = _dicts(smoke.get("checks"))
    seconds = [(("ops", i, "build_seconds"), o.get("build_seconds"))
               for i, o in _dicts(d.get("ops"))]
    seconds += [(("smoke", "seconds"), smoke.get("seconds"))]
    seconds += [(("durations", k), at(d, "durations", k)) for k in ("ops", "smoke", "total")]
    out += finite(seconds)
    whole = [(("gpu", "count"), gpu.get("count")), (("smoke", "world_size"),
                                                     smoke.get("world_size"))]
    whole += [(("smoke", "checks", i, "rank"), c.get("rank")) for i, c in checks]
    for parts, value in whole:  # JSON Schema's integers include 2.0; a record's do not
        if isinstance(value, float) and value.is_integer():
            out.append((parts, Problem(json_path(parts), f"{value} is not written as an "
                                                         "integer")))
    count, model = gpu.get("count"), gpu.get("model")
    if _is_int(count) and count == 0 and isinstance(model, str):
        out.append((("gpu", "model"), Problem("$.gpu.model", "must be null when count is 0 "
                                                             "(a CPU run)")))
    if _is_int(count) and count > 0 and "model" in gpu and model is None:
        out.append((("gpu", "model"), Problem("$.gpu.model", "must name the GPU when count "
                                                             f"is {count}")))
    size = smoke.get("world_size")
    for i, check in checks:
        rank = check.get("rank")
        if _is_int(size) and _is_int(rank) and rank >= size:
            parts = ("smoke", "checks", i, "rank")
            out.append((parts, Problem(json_path(parts), f"rank {rank} is outside world_size "
                                                         f"{size}")))
    return out


def _rules(d: dict, when: dict[str, datetime]) -> list[Problem]:
    """Rules across fields: time order, overall status, NCCL needs GPUs. They read the raw
    data, so they are checked even where a part has problems of its own."""
    out: list[Problem] = []
    if len(when) == 2 and when["finished"] < when["started"]:
        out.append(Problem("$.finished", f"{d['finished']} is before started {d['started']}"))
    smoke = _dict(d.get("smoke"))
    failed = [f"ops {o.get('name')}" for _, o in _dicts(d.get("ops"))
              if o.get("status") == "fail"]
    failed += [f"smoke {c.get('name')}" for _, c in _dicts(smoke.get("checks"))
               if c.get("status") == "fail"]
    if d.get("status") == "pass" and failed:
        out.append(Problem("$.status", f"'pass' but {', '.join(failed)} failed; the overall "
                           "status must be 'fail'"))
    gpu = _dict(d.get("gpu"))
    if smoke.get("backend") == "nccl" and _is_int(gpu.get("count")) and gpu["count"] == 0:
        out.append(Problem("$.smoke.backend", "'nccl' needs GPUs, but gpu.count is 0"))
    return out


def _build(d: dict) -> ResultRecord:
    """The record of data already validated."""
    image, gpu, smoke, durations = d["image"], d["gpu"], d["smoke"], d["durations"]
    return ResultRecord(
        schema=SCHEMA, combination=d["combination"], lock_hash=d["lock_hash"],
        image=None if image is None else Image(reference=image["reference"],
                                               digest=image["digest"]),
        started=d["started"], finished=d["finished"],
        gpu=Gpu(model=gpu["model"], count=gpu["count"], driver=gpu["driver"],
                cuda_driver=gpu["cuda_driver"]),
        tools=dict(sorted(d["tools"].items())),
        ops=tuple(OpResult(name=o["name"], status=o["status"],
                           build_seconds=None if o["build_seconds"] is None
                           else float(o["build_seconds"]),
                           check=o["check"], message=o["message"]) for o in d["ops"]),
        smoke=None if smoke is None else Smoke(
            backend=smoke["backend"], world_size=smoke["world_size"],
            checks=tuple(SmokeCheck(name=c["name"], status=c["status"], message=c["message"],
                                    rank=c["rank"]) for c in smoke["checks"]),
            seconds=float(smoke["seconds"])),
        status=d["status"],
        durations=Durations(ops=float(durations["ops"]), smoke=float(durations["smoke"]),
                            total=float(durations["total"])),
        log_digest=d["log_digest"])


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _dicts(items: Any) -> list[tuple[int, dict]]:
    """The objects of a list, with their indexes."""
    return [(i, x) for i, x in enumerate(items) if isinstance(x, dict)] \
        if isinstance(items, list) else []
