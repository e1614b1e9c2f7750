"""Run envgen as a user does: a subprocess, so exit codes and stderr are the real ones."""

from __future__ import annotations

import subprocess
import sys

HOST_PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def run_envgen(*args: str, env: dict | None = None, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)
