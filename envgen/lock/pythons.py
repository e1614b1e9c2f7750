"""The Python interpreters on this machine, found the way uv finds them, for the venv flavors:
which Python `envgen install` builds the env on, and which Pythons `envgen make` may lock for
when the user did not name one.

Where they are looked for, in order: ``$PATH`` (``python3.X`` and ``python3``), then the
managers' own folders, where a shim on PATH may point at a version that is not selected
(pyenv's ``$PYENV_ROOT/versions``, uv's managed Pythons, conda's base and envs), then
/usr/bin and /usr/local/bin. Shim folders (``…/shims``) are skipped: a shim answers for the
version its manager selects, not for its name. ``installed`` runs each candidate once to ask
its version (a broken one is left out); ``listed`` only reads names (cheap: `envgen make`).
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from envgen.proc import run

SYSTEM_DIRS = ("/usr/bin", "/usr/local/bin")  # where a distribution's own Pythons are
NAME = re.compile(r"python(3\.\d{1,2})(t?)$")
PROBE = "import sys; print('%d.%d' % sys.version_info[:2] + ('t' if getattr(sys, " \
        "'_is_gil_enabled', lambda: True)() is False else ''))"


@dataclass(frozen=True)
class Found:
    version: str  # "3.12", "3.13t"
    path: str
    source: str  # "PATH", "pyenv", "uv", "conda", "system"


def _manager_dirs() -> list[tuple[str, str]]:
    home = Path.home()
    pyenv = os.environ.get("PYENV_ROOT") or str(home / ".pyenv")
    uv = os.environ.get("UV_PYTHON_INSTALL_DIR") or str(
        Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "uv" / "python")
    conda_roots = [os.environ.get("CONDA_PREFIX"), os.environ.get("CONDA_ROOT"),
                   *(str(home / d) for d in ("miniconda3", "anaconda3", "miniforge3",
                                             "mambaforge")), "/opt/conda"]
    dirs = [("pyenv", d) for d in sorted(glob.glob(f"{glob.escape(pyenv)}/versions/*/bin"))]
    dirs += [("uv", d) for d in sorted(glob.glob(f"{glob.escape(uv)}/*/bin"))]
    for root in filter(None, conda_roots):
        dirs.append(("conda", f"{root}/bin"))
        dirs += [("conda", d) for d in sorted(glob.glob(f"{glob.escape(root)}/envs/*/bin"))]
    return dirs


def _candidates() -> list[tuple[str, str, str | None]]:
    """(source, path, version from the name or None) of every interpreter file, first
    occurrence of a real file only."""
    dirs = [("PATH", d) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    dirs += [*_manager_dirs(), *(("system", d) for d in SYSTEM_DIRS)]
    out, seen = [], set()
    for source, d in dirs:
        if Path(d).name == "shims" or "/shims/" in d + "/":
            continue
        try:  # python3.12 before python3 (a link to it): the name says the version
            names = sorted(os.listdir(d), key=lambda n: (n == "python3", n))
        except OSError:
            continue
        for name in names:
            m = NAME.fullmatch(name)
            if not m and name != "python3":
                continue
            path = os.path.join(d, name)
            real = os.path.realpath(path)
            if real in seen or not os.access(path, os.X_OK) or os.path.isdir(path):
                continue
            seen.add(real)
            out.append((source, path, m.group(1) + m.group(2) if m else None))
    return out


def listed() -> list[Found]:
    """The interpreters whose names say their version (``python3.12``), without running any."""
    return [Found(v, p, s) for s, p, v in _candidates() if v]


def _ask(path: str) -> str | None:
    try:
        proc = run([path, "-c", PROBE], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout.strip()
    return text if proc.returncode == 0 and re.fullmatch(r"3\.\d{1,2}t?", text) else None


def installed_at(path: str) -> str | None:
    """The version of the interpreter at ``path`` (or a name on PATH), None if it does not
    run."""
    return _ask(path)


def installed(version: str | None = None, *, first: bool = False) -> list[Found]:
    """The interpreters that run, with the version each reports (of ``version`` only, when
    given: candidates named for another version are not run); with ``first``, only the first
    one found (the rest are not run)."""
    out = []
    for source, path, named in _candidates():
        if version is not None and named is not None and named != version:
            continue
        got = _ask(path)
        if got and (version is None or got == version):
            out.append(Found(got, path, source))
            if first:
                break
    return out


def describe(found: list[Found]) -> str:
    """"3.11 (/usr/bin/python3.11), 3.12 (~/.pyenv/versions/3.12.1/bin/python3.12)"."""
    if not found:
        return "none"
    firsts: dict[str, Found] = {}
    for f in found:
        firsts.setdefault(f.version, f)
    return ", ".join(f"{v} ({f.path})" for v, f in sorted(
        firsts.items(), key=lambda kv: tuple(int(x) for x in kv[0].rstrip("t").split("."))))
