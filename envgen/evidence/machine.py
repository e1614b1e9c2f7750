"""The machine an evidence run happened on, as a record's ``machine`` object.

Only what tells a reader how comparable a build time is (OS, kernel, CPUs, memory, GPUs, the
Docker daemon); never a host name, user or address.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path


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
    """The model of each GPU ``nvidia-smi -L`` lists (none without a driver)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def machine(docker_version: str | None = None) -> dict:
    """This machine's ``machine`` object (envgen/schemas/attempt-record.schema.json)."""
    return {"os": _os_name(), "kernel": platform.release(), "arch": platform.machine(),
            "cpus": os.cpu_count() or 1, "memory_gib": _memory_gib(), "gpus": gpus(),
            "docker": docker_version}
