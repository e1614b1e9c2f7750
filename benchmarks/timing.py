"""What the benchmarks share: a median in milliseconds, and the environment a subprocess runs
envgen in as an installed copy does (byte code cached, kept out of the source tree, even where
PYTHONDONTWRITEBYTECODE is set: pip compiles it at install)."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``fn()`` over ``repeat`` runs, in milliseconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def installed_env(base: dict[str, str] | None = None,
                  pycache: Path | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with byte code written and read from
    ``pycache`` (default: one folder under the temporary directory)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache or Path(tempfile.gettempdir())
                                     / "envgen-bench-pycache")
    return env
