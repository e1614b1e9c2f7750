"""Turn what ``ops.py`` and ``smoke.py`` (envgen/inside) reported into one result record
(schema 1, matrix/results/README.md), validated by envgen.results.record before it is written.

Inputs: ops.py's JSON document, a launch.SmokeResult, the lock's id and hash, this machine's
driver (NVML, envgen.gpus). Output: a ResultRecord."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from envgen import __version__
from envgen.results.record import ResultRecord


def utc_now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def driver_info() -> tuple[str | None, str | None]:
    """(driver version, the newest CUDA the driver supports) from NVML (envgen.gpus), or
    (None, None) without a driver."""
    from envgen.gpus import cuda_driver_version, driver_version

    return driver_version(), cuda_driver_version()


def build_record(*, combination: str, lock_hash: str, image: dict | None, started: str,
                 finished: str, ops: dict | None, smoke, durations: dict[str, float],
                 logs: str, framework: str) -> ResultRecord:
    """``ops``: ops.py's JSON document (or None); ``smoke``: a launch.SmokeResult (or None)."""
    info = smoke.info if smoke else {}
    driver, cuda_driver = driver_info()
    gpu_count = int(info.get("gpu_count") or 0)
    tools = {"envgen": __version__, "framework": framework}
    for key in ("torch", "torch_cuda", "nccl", "python", "framework_version"):
        value = info.get(key) if info else None
        if value is None and ops:
            value = ops.get(key)
        if value is not None:
            tools[key] = str(value)
    op_rows = [{"name": o["name"], "status": o["status"], "build_seconds": o["build_seconds"],
                "check": o["check"], "message": o["message"]} for o in (ops or {}).get("ops", [])]
    smoke_section = smoke.section() if smoke else None
    failed = any(o["status"] == "fail" for o in op_rows) or (smoke is not None
                                                            and smoke.status == "fail")
    doc = {
        "schema": 1, "combination": combination, "lock_hash": lock_hash, "image": image,
        "started": started, "finished": finished,
        "gpu": {"model": info.get("gpu_model") if gpu_count else None, "count": gpu_count,
                "driver": driver, "cuda_driver": cuda_driver},
        "tools": tools, "ops": op_rows, "smoke": smoke_section,
        "status": "fail" if failed else "pass",
        "durations": {k: round(v, 3) for k, v in durations.items()},
        "log_digest": "sha256:" + hashlib.sha256(logs.encode()).hexdigest(),
    }
    return ResultRecord.from_dict(doc, source="the verify run's record")
