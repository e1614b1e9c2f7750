"""What the benchmarks share: a median in milliseconds (and paired medians, for a ratio), and
the environment a subprocess runs envgen in as an installed copy does (byte code cached, kept
out of the source tree, even where PYTHONDONTWRITEBYTECODE is set: pip compiles it at
install)."""

from __future__ import annotations

import os
import statistics
import sys
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


def paired_ms(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The median wall time of each of ``fns`` in milliseconds, run in turn (one of each per
    round), so that a machine that slows down for a while slows all of them alike: on a shared
    VM, timing one side's runs and then the other's moved a ratio by ±40%."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def installed_env(base: dict[str, str] | None = None,
                  pycache: Path | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with byte code written and read from
    ``pycache`` (default: one folder under the temporary directory)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache or Path(tempfile.gettempdir())
                                     / "envgen-bench-pycache")
    return env


def envgen_command() -> list[str]:
    """The installed ``envgen`` console script next to this Python (what users run), else
    ``python -m envgen`` (which adds runpy's imports)."""
    script = Path(sys.executable).parent / "envgen"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "envgen"]
