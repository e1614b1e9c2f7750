"""The result record: what one verify run on one combination found (schema version 1).

A record is plain JSON (``matrix/results/README.md`` documents every field). Reading one
checks it completely and reports *every* problem with its JSON path (``$.ops[1].status``), so
a broken record is fixed in one pass. Values are frozen dataclasses; ``to_dict`` gives the
JSON back, and a record's id is the sha256 of its canonical JSON (sorted keys, compact
separators), so the same run always has the same id.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from envgen.errors import DataError
from envgen.resolve.combination import parse_combination_id
from envgen.results.tiers import verify_tier

SCHEMA = 1
STATUSES = ("pass", "fail", "skip")
OVERALL = ("pass", "fail")
BACKENDS = ("nccl", "gloo")

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")
SAFE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


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


class _Reader:
    """Collects problems while reading nested JSON; each reader returns None when broken."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def obj(self, data: Any, path: str, required: tuple[str, ...],
            optional: tuple[str, ...] = ()) -> dict[str, Any] | None:
        if not isinstance(data, dict):
            self.add(path, f"expected an object, got {_kind(data)}")
            return None
        for key in required:
            if key not in data:
                self.add(path, f"missing key {key!r}")
        for key in sorted(set(data) - set(required) - set(optional)):
            self.add(f"{path}.{key}", "unknown key (schema 1 does not have it)")
        return data

    def string(self, data: dict, key: str, path: str, *, null: bool = False,
               pattern: re.Pattern | None = None, choices: tuple[str, ...] = (),
               shape: str = "", empty: bool = False) -> str | None:
        if key not in data:
            return None
        value, where = data[key], f"{path}.{key}"
        if value is None and null:
            return None
        if not isinstance(value, str):
            self.add(where, f"expected a string{' or null' if null else ''}, got {_kind(value)}")
        elif choices and value not in choices:
            self.add(where, f"{value!r} is not one of {', '.join(choices)}")
        elif pattern and not pattern.match(value):
            self.add(where, f"{value!r} is not {shape}")
        elif not value and not empty:
            self.add(where, "must not be empty")
        return value if isinstance(value, str) else None

    def integer(self, data: dict, key: str, path: str, *, minimum: int = 0,
                null: bool = False) -> int | None:
        if key not in data:
            return None
        value, where = data[key], f"{path}.{key}"
        if value is None and null:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(where, f"expected an integer{' or null' if null else ''}, got {_kind(value)}")
            return None
        if value < minimum:
            self.add(where, f"must be ≥ {minimum}, got {value}")
        return value

    def seconds(self, data: dict, key: str, path: str, *, null: bool = False) -> float | None:
        if key not in data:
            return None
        value, where = data[key], f"{path}.{key}"
        if value is None and null:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add(where, f"expected seconds (a number{' or null' if null else ''}), "
                     f"got {_kind(value)}")
            return None
        if not value >= 0:  # also rejects NaN
            self.add(where, f"must be ≥ 0 seconds, got {value}")
        return float(value)

    def items(self, data: dict, key: str, path: str, read: Callable[[Any, str], Any]
              ) -> tuple | None:
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, list):
            self.add(f"{path}.{key}", f"expected a list, got {_kind(value)}")
            return None
        out = tuple(read(item, f"{path}.{key}[{i}]") for i, item in enumerate(value))
        return None if any(x is None for x in out) else out


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _time(r: _Reader, data: dict, key: str, path: str) -> str | None:
    text = r.string(data, key, path, pattern=_UTC,
                    shape="an RFC 3339 UTC time such as 2026-05-01T12:00:00Z")
    if text is None or not _UTC.match(text):
        return None
    try:
        parse_time(text)
    except ValueError as exc:
        r.add(f"{path}.{key}", f"{text!r} is not a valid time ({exc})")
        return None
    return text


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

    @classmethod
    def read(cls, r: _Reader, data: Any, path: str) -> Image | None:
        d = r.obj(data, path, ("reference", "digest"))
        if d is None:
            return None
        n = len(r.problems)
        reference = r.string(d, "reference", path)
        digest = r.string(d, "digest", path, pattern=_DIGEST, shape="sha256:<64 hex digits>")
        return None if len(r.problems) > n else cls(reference=reference, digest=digest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """The GPUs the run saw: count 0 and model null for a CPU run."""

    model: str | None
    count: int
    driver: str | None
    cuda_driver: str | None

    @classmethod
    def read(cls, r: _Reader, data: Any, path: str) -> Gpu | None:
        d = r.obj(data, path, ("model", "count", "driver", "cuda_driver"))
        if d is None:
            return None
        n = len(r.problems)
        model = r.string(d, "model", path, null=True)
        count = r.integer(d, "count", path)
        driver = r.string(d, "driver", path, null=True)
        cuda_driver = r.string(d, "cuda_driver", path, null=True)
        if count == 0 and model is not None:
            r.add(f"{path}.model", "must be null when count is 0 (a CPU run)")
        if count is not None and count > 0 and "model" in d and model is None:
            r.add(f"{path}.model", f"must name the GPU when count is {count}")
        if len(r.problems) > n:
            return None
        return cls(model=model, count=count, driver=driver, cuda_driver=cuda_driver)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpResult:
    """One of the framework's ops: built (how long), loaded, and checked against a reference."""

    name: str
    status: str
    build_seconds: float | None
    check: str
    message: str

    @classmethod
    def read(cls, r: _Reader, data: Any, path: str) -> OpResult | None:
        d = r.obj(data, path, ("name", "status", "build_seconds", "check", "message"))
        if d is None:
            return None
        n = len(r.problems)
        values = {"name": r.string(d, "name", path),
                  "status": r.string(d, "status", path, choices=STATUSES),
                  "build_seconds": r.seconds(d, "build_seconds", path, null=True),
                  "check": r.string(d, "check", path),
                  "message": r.string(d, "message", path, empty=True)}
        return None if len(r.problems) > n else cls(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeCheck:
    """One smoke-test check; ``rank`` names the process that failed it (null: all ranks)."""

    name: str
    status: str
    message: str
    rank: int | None

    @classmethod
    def read(cls, r: _Reader, data: Any, path: str) -> SmokeCheck | None:
        d = r.obj(data, path, ("name", "status", "message", "rank"))
        if d is None:
            return None
        n = len(r.problems)
        values = {"name": r.string(d, "name", path),
                  "status": r.string(d, "status", path, choices=STATUSES),
                  "message": r.string(d, "message", path, empty=True),
                  "rank": r.integer(d, "rank", path, null=True)}
        return None if len(r.problems) > n else cls(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Smoke:
    """The multi-process smoke test: backend, world size, its checks and how long it took."""

    backend: str
    world_size: int
    checks: tuple[SmokeCheck, ...]
    seconds: float

    @classmethod
    def read(cls, r: _Reader, data: Any, path: str) -> Smoke | None:
        d = r.obj(data, path, ("backend", "world_size", "checks", "seconds"))
        if d is None:
            return None
        n = len(r.problems)
        values = {"backend": r.string(d, "backend", path, choices=BACKENDS),
                  "world_size": r.integer(d, "world_size", path, minimum=1),
                  "checks": r.items(d, "checks", path, lambda x, p: SmokeCheck.read(r, x, p)),
                  "seconds": r.seconds(d, "seconds", path)}
        if values["world_size"] is not None and values["checks"] is not None:
            for i, check in enumerate(values["checks"]):
                if check.rank is not None and check.rank >= values["world_size"]:
                    r.add(f"{path}.checks[{i}].rank",
                          f"rank {check.rank} is outside world_size {values['world_size']}")
        return None if len(r.problems) > n else cls(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Durations:
    """Wall-clock seconds: building and checking the ops, the smoke test, the whole run."""

    ops: float
    smoke: float
    total: float

    @classmethod
    def read(cls, r: _Reader, data: Any, path: str) -> Durations | None:
        d = r.obj(data, path, ("ops", "smoke", "total"))
        if d is None:
            return None
        n = len(r.problems)
        values = {k: r.seconds(d, k, path) for k in ("ops", "smoke", "total")}
        return None if len(r.problems) > n else cls(**values)


_FIELDS = ("schema", "combination", "lock_hash", "image", "started", "finished", "gpu",
           "tools", "ops", "smoke", "status", "durations", "log_digest")


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
        record, problems = _read(data)
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
    def on_gpus(self) -> bool:
        """Real-hardware evidence: GPUs present and the smoke test ran over NCCL."""
        return self.gpu.count >= 1 and self.smoke is not None and self.smoke.backend == "nccl"

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
    return _read(data)[1]


def parse(data: Any) -> tuple[ResultRecord | None, list[Problem]]:
    """The record ``data`` describes and no problems, or None and every problem (one pass:
    validating, then building, would read the data twice)."""
    return _read(data)


def _read(data: Any) -> tuple[ResultRecord | None, list[Problem]]:
    r = _Reader()
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(data, dict) and "schema" in data and (type(schema) is not int
                                                        or schema != SCHEMA):
        if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA:
            r.add("$.schema", f"schema {schema} is newer than this envgen reads ({SCHEMA}); "
                  "upgrade envgen")
        else:
            r.add("$.schema", f"expected {SCHEMA}, got {schema!r}")
        return None, r.problems  # the rest may mean something else in another schema
    d = r.obj(data, "$", _FIELDS)
    if d is None:
        return None, r.problems
    combination = r.string(d, "combination", "$", pattern=SAFE_ID,
                           shape="a combination id (only A-Z a-z 0-9 _ . -)")
    if combination and SAFE_ID.match(combination) and not parse_combination_id(combination):
        r.add("$.combination", f"{combination!r} is not a combination id such as "
              "deepspeed-0.19.8-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64")
    values: dict[str, Any] = {"schema": SCHEMA, "combination": combination}
    digest = {"pattern": _DIGEST, "shape": "sha256:<64 hex digits>"}
    values["lock_hash"] = r.string(d, "lock_hash", "$", **digest)
    values["log_digest"] = r.string(d, "log_digest", "$", **digest)
    values["image"] = None if d.get("image") is None else Image.read(r, d["image"], "$.image")
    values["started"] = _time(r, d, "started", "$")
    values["finished"] = _time(r, d, "finished", "$")
    values["gpu"] = Gpu.read(r, d["gpu"], "$.gpu") if "gpu" in d else None
    values["tools"] = _tools(r, d)
    values["ops"] = r.items(d, "ops", "$", lambda x, p: OpResult.read(r, x, p))
    values["smoke"] = None if d.get("smoke") is None else Smoke.read(r, d["smoke"], "$.smoke")
    values["status"] = r.string(d, "status", "$", choices=OVERALL)
    values["durations"] = (Durations.read(r, d["durations"], "$.durations")
                           if "durations" in d else None)
    _consistent(r, d, values)
    if r.problems:
        return None, r.problems
    return ResultRecord(**values), []


def _tools(r: _Reader, d: dict) -> dict[str, str] | None:
    if "tools" not in d:
        return None
    tools = d["tools"]
    if not isinstance(tools, dict):
        r.add("$.tools", f"expected an object of name → version strings, got {_kind(tools)}")
        return None
    for key, value in tools.items():
        if not key:
            r.add("$.tools", "a tool name must not be empty")
        if not isinstance(value, str):
            r.add(f"$.tools.{key}", f"expected a version string, got {_kind(value)}")
    return dict(sorted(tools.items()))


def _consistent(r: _Reader, d: dict, v: dict) -> None:
    """Rules across fields: time order, overall status, NCCL needs GPUs. They read the raw
    data, so they are checked even where a part has problems of its own."""
    if v["started"] and v["finished"] and parse_time(v["finished"]) < parse_time(v["started"]):
        r.add("$.finished", f"{v['finished']} is before started {v['started']}")
    smoke = d.get("smoke") if isinstance(d.get("smoke"), dict) else {}
    failed = [f"ops {o.get('name')}" for o in _dicts(d.get("ops")) if o.get("status") == "fail"]
    failed += [f"smoke {c.get('name')}" for c in _dicts(smoke.get("checks"))
               if c.get("status") == "fail"]
    if d.get("status") == "pass" and failed:
        r.add("$.status", f"'pass' but {', '.join(failed)} failed; the overall status must be "
              "'fail'")
    gpu = d.get("gpu") if isinstance(d.get("gpu"), dict) else {}
    if smoke.get("backend") == "nccl" and gpu.get("count") == 0:
        r.add("$.smoke.backend", "'nccl' needs GPUs, but gpu.count is 0")


def _dicts(items: Any) -> list[dict]:
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []
