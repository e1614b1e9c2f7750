"""The attempt record: one lock (T1) or build (T2) attempt of one combination ("attempt/1").

Where a verify record (:mod:`envgen.results.record`) proves that a combination runs on GPUs
(tiers T3 and T4), an attempt record proves the tiers below: the lock solves for the target
(T1), or the image builds with the framework's ops compiled for the target architectures and
importable (T2) — no GPU needed. ``matrix/results/README.md`` documents every field; the
evidence runner (``envgen evidence``) writes them.

Input: an attempt record's JSON; output: a frozen :class:`AttemptRecord`, or every problem with
its JSON path (``$.build.ops[1].status``). Reading one checks its shape against
``envgen/schemas/attempt-record.schema.json`` (:mod:`envgen.schemas.check`) and then the rules
across fields, in the words a verify record uses (:mod:`envgen.results.record`), and only then
builds the values. ``to_dict`` gives the JSON back, and the record id is the sha256 of its
canonical JSON, so the same attempt always has the same id.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from envgen.results.record import (
    Image,
    Problem,
    RecordError,
    at,
    canonical_json,
    combination_problems,
    finite,
    in_field_order,
    kind_of,
    parse_time,
    schema_problems,
    times,
)
from envgen.schemas.check import validator

SCHEMA = "attempt/1"
TIERS = ("T1", "T2")
FLAVORS = ("conda", "venv", "os-package")
OP_STATUSES = ("pass", "fail", "skip")
_SCHEMA_NAME = "attempt-record"
_NEWER = re.compile(r"^attempt/([0-9]+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """Where the attempt ran: the host, not the target (``gpus``: model names, [] for none)."""

    os: str
    kernel: str
    arch: str
    cpus: int
    memory_gib: float
    gpus: tuple[str, ...]
    docker: str | None

    @property
    def summary(self) -> str:
        """``2 CPUs, Debian GNU/Linux 12, no GPU``; ``… 8× NVIDIA H100 80GB HBM3``."""
        os_name = re.sub(r"\s*\([^)]*\)$", "", self.os)
        cpus = f"{self.cpus} CPU{'s' if self.cpus != 1 else ''}"
        return f"{cpus}, {os_name}, {_gpus(self.gpus)}"


def _gpus(models: tuple[str, ...]) -> str:
    if not models:
        return "no GPU"
    counts: dict[str, int] = {}
    for model in models:
        counts[model] = counts.get(model, 0) + 1
    return " + ".join(f"{n}× {model}" for model, n in counts.items())


@dataclass(frozen=True, slots=True, kw_only=True)
class Lock:
    """The lock that was solved: its hash, the hash of its inputs, how many packages it pins."""

    hash: str
    inputs_hash: str
    packages: int
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildOp:
    """One of the framework's ops in the built image: compiled and imported (pass), not
    (fail), or not attempted (skip); ``message`` says why (may be empty)."""

    name: str
    status: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Build:
    """The image that was built: pinned by digest, its size, the arch list the ops were
    compiled for, nvcc's version, and each op."""

    image: Image
    size_bytes: int
    seconds: float
    arch_list: str
    nvcc: str | None
    ops: tuple[BuildOp, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One lock (T1) or build (T2) attempt. ``from_dict`` validates completely."""

    schema: str
    tier: str
    combination: str
    flavor: str
    status: str
    started: str
    finished: str
    envgen: str
    machine: Machine
    lock: Lock | None
    build: Build | None
    log_digest: str
    error: str | None
    command: str

    kind = "attempt"

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "attempt record") -> AttemptRecord:
        """The record ``data`` describes; RecordError listing every problem otherwise."""
        record, problems = parse(data)
        if problems:
            raise RecordError({source: problems})
        return record

    def to_dict(self) -> dict[str, Any]:
        m, lock, build = self.machine, self.lock, self.build
        return {
            "schema": self.schema,
            "tier": self.tier,
            "combination": self.combination,
            "flavor": self.flavor,
            "status": self.status,
            "started": self.started,
            "finished": self.finished,
            "envgen": self.envgen,
            "machine": {"os": m.os, "kernel": m.kernel, "arch": m.arch, "cpus": m.cpus,
                        "memory_gib": m.memory_gib, "gpus": list(m.gpus), "docker": m.docker},
            "lock": None if lock is None else {
                "hash": lock.hash, "inputs_hash": lock.inputs_hash, "packages": lock.packages,
                "seconds": lock.seconds},
            "build": None if build is None else {
                "image": {"reference": build.image.reference, "digest": build.image.digest},
                "size_bytes": build.size_bytes, "seconds": build.seconds,
                "arch_list": build.arch_list, "nvcc": build.nvcc,
                "ops": [{"name": o.name, "status": o.status, "message": o.message}
                        for o in build.ops]},
            "log_digest": self.log_digest,
            "error": self.error,
            "command": self.command,
        }

    @property
    def id(self) -> str:
        """sha256 (hex) of the canonical JSON: sorted keys, compact separators, UTF-8."""
        return hashlib.sha256(canonical_json(self.to_dict())).hexdigest()

    @property
    def finished_at(self) -> datetime:
        return parse_time(self.finished)

    # the surface both record kinds share (envgen.results.tiers, status, table)
    @property
    def envgen_version(self) -> str:
        return self.envgen

    @property
    def machine_summary(self) -> str:
        return self.machine.summary

    @property
    def seconds(self) -> float | None:
        """How long the step of this tier took: the lock (T1) or the build (T2)."""
        if self.tier == "T2":
            return self.build.seconds if self.build else None
        return self.lock.seconds if self.lock else None

    @property
    def image_size_bytes(self) -> int | None:
        return self.build.size_bytes if self.build else None

    @property
    def on_gpu(self) -> bool:
        """Lock and build attempts never use a GPU, whatever the machine has."""
        return False


def validate(data: Any) -> list[Problem]:
    """Every problem in ``data`` as an attempt record (empty: valid)."""
    return parse(data)[1]


def parse(data: Any) -> tuple[AttemptRecord | None, list[Problem]]:
    """The record ``data`` describes and no problems, or None and every problem."""
    if not isinstance(data, dict):
        return None, [Problem("$", f"expected an object, got {kind_of(data)}")]
    schema = data.get("schema")
    if schema != SCHEMA or type(schema) is not str:
        if "schema" not in data:
            return None, [Problem("$", "missing key 'schema'")]
        newer = _NEWER.match(schema) if isinstance(schema, str) else None
        if newer and int(newer[1]) > 1:
            message = f"schema {schema!r} is newer than this envgen reads ({SCHEMA!r}); " \
                      "upgrade envgen"
        else:
            message = f"expected {SCHEMA!r}, got {schema!r}"
        return None, [Problem("$.schema", message)]  # the rest may mean something else
    problems = [] if validator(_SCHEMA_NAME).is_valid(data) else \
        in_field_order(_SCHEMA_NAME, schema_problems(data, _SCHEMA_NAME, SCHEMA))
    numbers = [(("machine", "memory_gib"), at(data, "machine", "memory_gib")),
               (("lock", "seconds"), at(data, "lock", "seconds")),
               (("build", "seconds"), at(data, "build", "seconds"))]
    problems += [p for _, p in finite(numbers)]
    problems += _rules(data)
    if problems:
        return None, problems
    return _build(data), []


def _rules(d: dict) -> list[Problem]:
    """Rules across fields. They read the raw data, so they are checked even where a part has
    problems of its own (each only where the values it compares have the right type)."""
    found = combination_problems(
        d, "deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64")
    bad_times, when = times(d)
    out = [p for _, p in found + bad_times]
    if len(when) == 2 and when["finished"] < when["started"]:
        out.append(Problem("$.finished", f"{d['finished']} is before started {d['started']}"))
    status, error, tier = d.get("status"), d.get("error"), d.get("tier")
    if status == "fail" and not (isinstance(error, str) and error.strip()):
        out.append(Problem("$.error", "must be the first error line (a non-empty string) when "
                           "status is 'fail'"))
    if status == "pass" and error is not None:
        out.append(Problem("$.error", "must be null when status is 'pass'"))
    if status == "pass" and tier in TIERS and "lock" in d and d["lock"] is None:
        out.append(Problem("$.lock", f"a passing {tier} attempt needs its lock"))
    if tier == "T1" and d.get("build") is not None:
        out.append(Problem("$.build", "must be null for a T1 (lock) attempt"))
    if status == "pass" and tier == "T2" and "build" in d and d["build"] is None:
        out.append(Problem("$.build", "a passing T2 attempt needs its build"))
    build = d.get("build")
    ops = build.get("ops") if isinstance(build, dict) else None
    if status == "pass" and tier == "T2" and isinstance(ops, list):
        for i, op in enumerate(ops):
            if isinstance(op, dict) and op.get("status") == "fail":
                out.append(Problem(f"$.build.ops[{i}].status",
                                   f"op {op.get('name')!r} failed, but the attempt's status is "
                                   "'pass'; it must be 'fail'"))
    return out



def _build(d: dict) -> AttemptRecord:
    """The record of data already validated."""
    m, lock, build = d["machine"], d["lock"], d["build"]
    return AttemptRecord(
        schema=SCHEMA, tier=d["tier"], combination=d["combination"], flavor=d["flavor"],
        status=d["status"], started=d["started"], finished=d["finished"], envgen=d["envgen"],
        machine=Machine(os=m["os"], kernel=m["kernel"], arch=m["arch"], cpus=int(m["cpus"]),
                        memory_gib=float(m["memory_gib"]), gpus=tuple(m["gpus"]),
                        docker=m["docker"]),
        lock=None if lock is None else Lock(
            hash=lock["hash"], inputs_hash=lock["inputs_hash"], packages=int(lock["packages"]),
            seconds=float(lock["seconds"])),
        build=None if build is None else Build(
            image=Image(reference=build["image"]["reference"],
                        digest=build["image"]["digest"]),
            size_bytes=int(build["size_bytes"]), seconds=float(build["seconds"]),
            arch_list=build["arch_list"], nvcc=build["nvcc"],
            ops=tuple(BuildOp(name=o["name"], status=o["status"], message=o["message"])
                      for o in build["ops"])),
        log_digest=d["log_digest"], error=d["error"], command=d["command"])

