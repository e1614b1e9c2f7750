"""The machine an evidence run happened on, as a record's ``machine`` object.

Only what tells a reader how comparable a build time is (OS, kernel, CPUs, memory, GPUs, the
Docker daemon); never a host name, user or address.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from envgen.gpus import visible_gpus


def _os_name() -> str:
    """PRETTY_NAME of /etc/os-release (the standard library reads it)."""
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME") or platform.system()
    except OSError:
        return platform.system()


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 ** 2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def gpus() -> list[str]:
    """The model of each GPU NVML lists (:mod:`envgen.gpus`; none without a driver)."""
    return [gpu.name for gpu in visible_gpus()]


def machine(docker_version: str | None = None) -> dict:
    """This machine's ``machine`` object (envgen/schemas/attempt-record.schema.json)."""
    return {"os": _os_name(), "kernel": platform.release(), "arch": platform.machine(),
            "cpus": os.cpu_count() or 1, "memory_gib": _memory_gib(), "gpus": gpus(),
            "docker": docker_version}
