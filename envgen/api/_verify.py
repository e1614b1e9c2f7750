"""``verify()``: check an installed env (or a built image) and build its result record.

Input: a :class:`VerifyRequest` (which checks, the target: an interpreter or an image, the
lock it was installed from). Output: a :class:`VerifyResult` (ops.py's document, the smoke
test's result, the record, where it was written). The checks run in the target through
envgen.verify.launch (envgen/inside's ops.py and smoke.py); this module never prints or exits,
it reports progress through the callbacks.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envgen.api.progress import Progress, quiet

if TYPE_CHECKING:
    from envgen.lock.manifest import Manifest
    from envgen.results.record import ResultRecord
    from envgen.verify.launch import SmokeResult

WHATS = ("ops", "smoke", "all")
BACKENDS = ("auto", "nccl", "gloo")


@dataclass(frozen=True)
class VerifyRequest:
    """What to verify. ``python`` None: this interpreter (ignored with ``image``); ``ops``
    None: all of the framework's; ``nproc`` None: the visible GPUs, else 2; ``framework``
    None: the lock's. Error messages name the CLI options (``--python``, ``--ops``…)."""

    what: str
    python: str | None = None
    image: str | None = None
    docker_cli: str = "docker"
    lock_dir: Path | None = None
    framework: str | None = None
    ops: tuple[str, ...] | None = None
    nproc: int | None = None
    backend: str = "auto"
    timeout: float = 300.0
    record_path: Path | None = None
    ops_timeout: float = 1800.0  # the whole ops check, JIT builds included (--ops-timeout)

    def checked(self) -> VerifyRequest:
        """Every option checked (UsageError naming the option otherwise), normalized: the
        interpreter found on PATH, paths absolute, op names stripped. Touches nothing but
        the file system's metadata (the lock is read by :func:`verify`)."""
        from envgen import validate
        from envgen.errors import UsageError

        if self.what not in WHATS:
            raise UsageError(f"verify {self.what!r}: not one of {', '.join(WHATS)}",
                             hint="verify ops | smoke | all")
        if self.backend not in BACKENDS:
            raise UsageError(f"--backend {self.backend!r}: not one of {', '.join(BACKENDS)}",
                             hint="e.g. --backend gloo", source="--backend")
        image, python = self.image, self.python
        if image is not None:
            image = validate.image_ref(image, "--image", "--image")
        else:
            python = _check_python(sys.executable if python is None else python)
        docker_cli = validate.text(self.docker_cli, "--docker-cli", "--docker-cli")
        ops = self.ops
        if ops is not None:
            items = ops.split(",") if isinstance(ops, str) else ops  # "a,b" as the CLI has it
            ops = tuple(validate.name(o.strip() if isinstance(o, str) else o, "--ops", "--ops")
                        for o in items if not isinstance(o, str) or o.strip())
            if not ops:
                raise UsageError("--ops is empty", hint="e.g. --ops cpu_adam,async_io",
                                 source="--ops")
        if self.nproc is not None:
            if isinstance(self.nproc, bool) or not isinstance(self.nproc, int):
                raise UsageError(f"--nproc must be a whole number, not {self.nproc!r}",
                                 hint="e.g. --nproc 2", source="--nproc")
            if self.nproc < 1:
                raise UsageError(f"--nproc {self.nproc}: at least one process",
                                 hint="e.g. --nproc 2", source="--nproc")
        timeout = validate.positive(self.timeout, "--timeout", "--timeout")
        ops_timeout = validate.positive(self.ops_timeout, "--ops-timeout", "--ops-timeout")
        record_path = None
        if self.record_path is not None:
            from envgen.atomic import check_replaceable_file

            record_path = validate.path(str(self.record_path), "--record", "--record")
            check_replaceable_file(record_path, "--record")
        lock_dir = (validate.path(str(self.lock_dir), "--lock", "--lock")
                    if self.lock_dir is not None else None)
        return replace(self, image=image, python=python, docker_cli=docker_cli, ops=ops,
                       timeout=timeout, lock_dir=lock_dir, record_path=record_path,
                       ops_timeout=ops_timeout)


@dataclass(frozen=True)
class VerifyResult:
    """What the checks found. ``ops``: ops.py's JSON document (None when not run);
    ``smoke``: the smoke test's result (None when not run); ``record``: the result record
    (None without a lock); ``record_path``: where it was written (None when not asked);
    ``log``: what the checks printed (its sha256 is the record's log digest)."""

    status: str
    ops: dict | None
    smoke: SmokeResult | None
    durations: dict[str, float]
    record: ResultRecord | None = None
    record_path: Path | None = None
    log: str = field(default="", repr=False)

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        """The JSON `envgen verify --json` prints."""
        doc: dict[str, Any] = {"status": self.status, "ops": self.ops,
                               "smoke": self.smoke.section() if self.smoke else None}
        if self.record is not None:
            doc["record"] = self.record.to_dict()
        return doc


def _check_python(value: str) -> str:
    """--python must name an interpreter that exists and can be run."""
    import os
    import shutil

    from envgen import validate
    from envgen.errors import UsageError

    raw = validate.text(value, "--python", "--python")
    found = shutil.which(raw) if os.sep not in raw else raw
    if not found or not os.path.exists(found):
        raise UsageError(f"--python {raw}: no such interpreter",
                         hint="give the environment's python, e.g. --python ./env/bin/python "
                         "(the one `envgen install` printed)", source="--python")
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise UsageError(f"--python {raw} is not an executable file",
                         hint="give the environment's bin/python", source="--python")
    return found


def _manifest(lock_dir: Path | None) -> Manifest | None:
    """The lock's manifest (read and checked by envgen.lock)."""
    if lock_dir is None:
        return None
    from envgen.lock import read_manifest

    return read_manifest(lock_dir)


def verify(request: VerifyRequest, *, progress: Progress = quiet,
           debug: Progress = quiet) -> VerifyResult:
    """Run the requested checks in the target and build (and, with ``record_path``, write)
    the result record. UsageError for a bad request, EnvgenError when a check could not run
    at all; a check that ran and failed is ``status == "fail"``, not an exception."""
    from envgen.errors import UsageError
    from envgen.verify.launch import frameworks, run_ops, run_smoke, target_for
    from envgen.verify.record import build_record, utc_now

    req = request.checked()
    manifest = _manifest(req.lock_dir)
    framework = req.framework or (manifest.framework if manifest else None)
    if not framework:
        raise UsageError("which framework?", hint="pass --framework NAME or --lock DIR")
    known = frameworks()
    if framework not in known:
        raise UsageError(f"envgen has no checks for framework {framework!r}",
                         hint=f"use one of: {', '.join(known)}")
    if req.record_path and not manifest:
        raise UsageError("--record needs --lock DIR",
                         hint="the record names the combination and lock hash of that lock")
    started, t0 = utc_now(), time.monotonic()
    ops = smoke = None
    logs, durations = "", {"ops": 0.0, "smoke": 0.0}
    target = target_for(req.python, req.image, req.docker_cli)
    if req.what in ("ops", "all"):
        ops, log = run_ops(target, framework, req.ops, progress=progress, debug=debug,
                           timeout=req.ops_timeout)
        logs += log
        durations["ops"] = time.monotonic() - t0
    if req.what in ("smoke", "all"):
        t1 = time.monotonic()
        smoke = run_smoke(target, framework, nproc=req.nproc, backend=req.backend,
                          timeout=req.timeout, progress=progress)
        logs += smoke.log_tail
        durations["smoke"] = time.monotonic() - t1
        for c in smoke.checks:
            if c["status"] != "pass" or c.get("rank") == 0:
                progress(f"  {c['name']:26} rank {c.get('rank')}  {c['status']:5} "
                         f"{c.get('message', '')}")
    durations["total"] = time.monotonic() - t0
    failed = any(o["status"] == "fail" for o in (ops or {}).get("ops", [])) or (
        smoke is not None and smoke.status == "fail")
    record = None
    if manifest:
        image = None
        if req.image:
            from envgen.verify.launch import image_id

            image = {"reference": req.image, "digest": image_id(req.image)}
        record = build_record(
            combination=manifest.id, lock_hash=manifest.lock_hash, image=image,
            started=started, finished=utc_now(), ops=ops, smoke=smoke, durations=durations,
            logs=logs, framework=framework)
        if req.record_path:
            import json

            from envgen.atomic import write_file

            write_file(req.record_path,
                       (json.dumps(record.to_dict(), indent=2) + "\n").encode(),
                       source="--record")
            progress(f"wrote {req.record_path} (envgen results add {req.record_path})")
    return VerifyResult(status="fail" if failed else "pass", ops=ops, smoke=smoke,
                        durations=durations, record=record,
                        record_path=req.record_path if record is not None else None, log=logs)
