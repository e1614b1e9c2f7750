"""Collect a doctor snapshot of a live environment (``envgen doctor`` without --snapshot/--report).

Input: the target interpreter (``--python``; default: the active one), the ops the user builds
or uses (``--op``) and a time limit. Output: a :class:`~envgen.doctor.snapshot.Snapshot`.

Two halves: envgen/inside/collect_env.py runs under the target interpreter (its Python, torch,
packages, nvcc, compiler, libaio, ninja, NCCL, environment variables, extension caches) and
prints one JSON snapshot; this module adds what the machine says whatever the interpreter (the
NVIDIA driver and GPUs, through NVML or ``nvidia-smi``) and the ops. The target's problems are
facts in the snapshot, never exceptions; only an interpreter that cannot be found (UsageError,
exit 2) or a script that cannot run there (EnvironmentProblem, exit 4) raise.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from envgen.errors import EnvironmentProblem, UsageError
from envgen.inside import path as inside_path
from envgen.proc import run

__all__ = ["collect", "driver_and_gpus", "ops_from_env", "parse_nvidia_smi",
           "target_interpreter"]

# DS_BUILD_<VAR> whose op is not the variable's lower case, and DS_BUILD_* that name no op
_DS_OP_NAMES = {"AIO": "async_io"}
_DS_NOT_OPS = {"OPS", "STRING"}
_DS_BUILD = re.compile(r"^DS_BUILD_([A-Z0-9_]+)$")


def target_interpreter(python: str | None = None, environ: Mapping[str, str] | None = None
                       ) -> tuple[str, dict[str, str]]:
    """(the interpreter to collect from, the environment to run it with).

    ``python`` given (a path, or a name on PATH): it, run as if its environment were activated
    (its bin directory first on PATH; VIRTUAL_ENV set for a venv, CONDA_PREFIX for a conda
    env); a UsageError naming it when it is not an executable file. Else the active one, with
    the environment as is: $VIRTUAL_ENV/bin/python, else $CONDA_PREFIX/bin/python, else
    ``python3`` on PATH, else the Python running envgen."""
    env = dict(os.environ if environ is None else environ)
    exe = "python.exe" if os.name == "nt" else "python"
    bindir = "Scripts" if os.name == "nt" else "bin"
    if python is None:
        for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            if env.get(var):
                candidate = Path(env[var]) / bindir / exe
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return str(candidate), env
        found = shutil.which("python3", path=env.get("PATH"))
        return found or sys.executable, env
    given = Path(python).expanduser()
    if not given.is_absolute() and os.sep not in python:
        on_path = shutil.which(python, path=env.get("PATH"))
        if on_path:
            given = Path(on_path)
    given = given.absolute()
    if not given.is_file() or not os.access(given, os.X_OK):
        what = "does not exist" if not given.exists() else "is not an executable file"
        raise UsageError(f"--python {python}: {given} {what}",
                         hint="give the Python of the environment to diagnose, e.g. "
                         "`--python /path/to/venv/bin/python` (or activate it and leave "
                         "--python out)", source="--python")
    folder = given.parent
    prefix = folder.parent
    env["PATH"] = os.pathsep.join(p for p in (str(folder), env.get("PATH", "")) if p)
    if (prefix / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(prefix)
    elif (prefix / "conda-meta").is_dir():
        env["CONDA_PREFIX"] = str(prefix)
    env.pop("PYTHONHOME", None)
    return str(given), env


def ops_from_env(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The ops ``DS_BUILD_<OP>=1`` variables ask DeepSpeed to build (DS_BUILD_FUSED_ADAM=1 →
    fused_adam, DS_BUILD_AIO=1 → async_io); DS_BUILD_OPS=1 (all of them) adds none."""
    ops = []
    for name, value in sorted(environ.items()):
        m = _DS_BUILD.match(name)
        if m and value.strip() == "1" and m.group(1) not in _DS_NOT_OPS:
            ops.append(_DS_OP_NAMES.get(m.group(1), m.group(1).lower()))
    return tuple(ops)


def parse_nvidia_smi(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(driver, gpus) from ``nvidia-smi --query-gpu=name,compute_cap,driver_version
    --format=csv,noheader`` ("NVIDIA H100 80GB HBM3, 9.0, 550.54.15" a line; without the
    compute_cap column for an nvidia-smi too old to have it)."""
    driver, gpus = None, []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 2 or not cells[0]:
            continue
        cap = cells[1] if len(cells) == 3 else None
        gpus.append({"name": cells[0],
                     "compute_capability": cap if cap and re.fullmatch(r"\d{1,2}\.\d{1,2}", cap)
                     else None})
        driver = driver or (cells[-1] if re.fullmatch(r"[0-9][0-9.]*", cells[-1]) else None)
    return driver, gpus


def driver_and_gpus(timeout: float = 30) -> dict[str, Any]:
    """The snapshot's ``driver`` and ``gpus``, as this machine says (not the interpreter):
    :func:`envgen.machine_gpus.read` (NVML, else ``nvidia-smi --query-gpu``). Known to be none
    (driver None, gpus []) only when there is no NVML library AND no nvidia-smi on PATH: no
    NVIDIA driver is installed. When NVML or nvidia-smi is there but answers nothing (a driver
    that is not loaded, a container without the GPUs) the two are left out (unknown), and the
    doctor asks for them."""
    from envgen.machine_gpus import read

    found = read(timeout=timeout)
    if found.known:
        return {"driver": found.driver,
                "gpus": [{"name": g.name, "compute_capability": g.compute_capability}
                         for g in found.gpus]}
    return {"driver": None, "gpus": []} if found.absent else {}


def _stderr_tail(text: str, lines: int = 8) -> str:
    tail = [ln for ln in (text or "").strip().splitlines() if ln.strip()][-lines:]
    return " | ".join(tail)[-1500:] or "(nothing on stderr)"


def _marked_snapshot(stdout: str, marker: str) -> dict | None:
    """The snapshot on the last stdout line that starts with ``marker`` (collect_env.py's
    ``--marker``), when it is a schema-1 object; None otherwise."""
    for line in reversed(stdout.splitlines()):
        if not line.startswith(marker + " "):
            continue
        try:
            doc = json.loads(line[len(marker) + 1:])
        except (ValueError, RecursionError):
            return None
        return doc if isinstance(doc, dict) and doc.get("schema") == 1 else None
    return None


def collect(python: str | None = None, *, ops: tuple[str, ...] = (), timeout: float = 120,
            progress: Callable[[str], None] | None = None) -> Any:
    """The snapshot of the environment of interpreter ``python`` (see
    :func:`target_interpreter` for the default) plus this machine's driver and GPUs.

    ``ops``: the ops the user builds or uses (``--op``), merged with those DS_BUILD_<OP>=1
    names; none at all leaves ``ops`` unknown. ``timeout``: seconds for the whole collection
    (the script gets most of it for its imports, ``pip check`` and extension loads; what does
    not finish in time is left unknown). ``progress`` is called with a line now and then.
    Raises UsageError (the interpreter is not there) or EnvironmentProblem (the script cannot
    run under it, or prints no snapshot)."""
    from envgen.doctor.snapshot import Snapshot

    say = progress or (lambda _line: None)
    interpreter, env = target_interpreter(python)
    script = inside_path("collect_env.py")
    say(f"collecting the environment of {interpreter}")
    budget = max(5.0, timeout - 10)
    marker = f"envgen-snapshot:{secrets.token_hex(8)}"  # only the collector can echo it back
    cmd = [interpreter, str(script), "--budget", f"{budget:.0f}", "--marker", marker]
    try:
        proc = run(cmd, capture_output=True, text=True, errors="replace", env=env,
                   timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(
            f"collecting the environment of {interpreter} took longer than {timeout:.0f} s",
            hint="retry with a longer limit; an import that hangs (a network filesystem, a "
            "locked extension build) shows with `" + shlex.quote(interpreter) +
            " -c 'import torch'`",
            source="--python") from None
    except OSError as exc:
        raise EnvironmentProblem(f"{interpreter} cannot be started: {exc.strerror or exc}",
                                 hint="give a working Python with --python",
                                 source="--python") from None
    doc = _marked_snapshot(proc.stdout, marker)
    if proc.returncode == 0 and doc is None:
        raise EnvironmentProblem(
            f"{interpreter} exited 0 without the collector's snapshot (no line marked with "
            "this run's nonce, schema 1): it did not run envgen's collector, so nothing about "
            "that environment is known",
            hint="give the environment's real Python with --python (`" + shlex.quote(interpreter) +
            " -c 'import sys; print(sys.executable)'` shows what it is), or paste a report "
            "with --report", source="--python")
    if proc.returncode != 0 or doc is None:
        raise EnvironmentProblem(
            f"{script.name} failed under {interpreter} (exit code {proc.returncode}): "
            f"{_stderr_tail(proc.stderr)}",
            hint="check that it is a working Python 3.8 or newer (`" + shlex.quote(interpreter) +
            " --version`), or save a snapshot by hand / paste a report with --report",
            source="--python")
    say("asking NVML / nvidia-smi for the driver and GPUs")
    doc.update(driver_and_gpus())
    merged = tuple(dict.fromkeys([*ops, *ops_from_env(env)]))
    if merged:
        doc["ops"] = list(merged)
    return Snapshot.from_dict(doc, source=f"the snapshot collected from {interpreter}")
