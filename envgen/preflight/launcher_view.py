"""What DeepSpeed's multi-node runner will do, computed from its own code (DeepSpeed 0.19.8,
``deepspeed/launcher/runner.py`` and ``multinode_runner.py``, read in the installed package):
the variables it exports to every rank (names *and* values), the master address it picks, and
the lines of its environment files that break the launch.

- Exports (runner.py L596-L611): every variable of the launching shell whose name starts with
  one of its prefixes (EXPORT_ENVS + the accelerator's, matrix/curated/preflight.toml
  ``[deepspeed_runner]``), PYTHONPATH with the launch folder put first (L585-L589), then each
  line of ``.deepspeed_env`` (DS_ENV_FILE) in ``~`` then ``.``: ``key, val =
  line.split('=', maxsplit=1)`` (L606-L611). ``add_export`` (multinode_runner.py L37-L41)
  strips key and value and wraps a value holding a character outside ``[\\w@%+=:,./-]`` in
  double quotes; PDSHRunner writes ``export KEY=VALUE;`` for each into the command line pdsh
  runs through each node's shell (L102-L104).
- Master address (runner.py L495-L515): with no --master_addr, ``ssh FIRST_HOST hostname -I``
  and its first word.

Input: the catalog, the launching shell's variables, its folder and home. Output: a
:class:`LauncherView` (the exports with where each came from, the files read, the problems)
and the findings about the files' lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgen.doctor.findings import Finding
from envgen.errors import UsageError
from envgen.userfile import read_text

__all__ = ["EnvLine", "LauncherView", "deepspeed_view", "env_file_findings", "master_from",
           "read_env_file"]

# multinode_runner.py L37-L41 (0.19.8): a value with any other character is double-quoted
_PLAIN_VALUE = re.compile(r"[^\w@%+=:,./-]")
# what the node's shell still changes inside double quotes (POSIX sh, 2.2.3 Double-Quotes)
_EXPANDED = re.compile(r"[$`\\\"]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class EnvLine:
    path: str
    line: int
    text: str  # the line as written (without its newline)
    key: str | None  # as DeepSpeed reads it (None: the line has no '=')
    value: str | None  # stripped, as the node's shell receives it (before its expansion)
    problem: str | None = None  # why the launch breaks on this line, or None
    severity: str = "error"

    def where(self) -> str:
        return f"{self.path} line {self.line}"


@dataclass(frozen=True)
class LauncherView:
    launcher: str  # "deepspeed (pdsh)" or "" when no DeepSpeed launch is known
    exports: dict[str, str] = field(default_factory=dict)  # variable → value on every rank
    origins: dict[str, str] = field(default_factory=dict)  # variable → where it comes from
    files: tuple[str, ...] = ()  # the environment files read
    lines: tuple[EnvLine, ...] = ()
    master_addr: str | None = None
    master_from: str | None = None
    id: str | None = None  # the [[launcher]] id (None: no launcher was named or known)
    session: str | None = None  # the environment the ranks start in
    rank_vars: tuple[str, ...] = ()  # where the ranks read their rank and world size
    notes: tuple[str, ...] = ()
    master_port: int | None = None
    interpreter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"launcher": self.launcher, "id": self.id, "exports": dict(self.exports),
                "origins": dict(self.origins), "files": list(self.files),
                "problems": [{"path": ln.path, "line": ln.line, "text": ln.text,
                              "problem": ln.problem} for ln in self.lines if ln.problem],
                "master_addr": self.master_addr, "master_port": self.master_port,
                "master_from": self.master_from, "session": self.session,
                "interpreter": self.interpreter, "rank_vars": list(self.rank_vars),
                "notes": list(self.notes)}


def _read_line(path: str, number: int, raw: str) -> EnvLine:
    text = raw.rstrip("\r\n")
    if "=" not in raw:  # DeepSpeed: ValueError (not enough values to unpack)
        why = ("has no '=': DeepSpeed's runner stops with \"ValueError: not enough values to "
               "unpack (expected 2, got 1)\" before it starts any rank"
               + (" (an empty line counts)" if not text.strip() else ""))
        return EnvLine(path, number, text, None, None, why)
    key, value = raw.split("=", 1)
    key, value = key.strip(), value.strip()
    if key.startswith("#") or "#" in key:
        why = (f"is not skipped as a comment: DeepSpeed's runner writes `export {key}=...;` "
               "into the command each node's shell runs, and the '#' comments out the rest of "
               "it — the exports after it and the launch itself")
        return EnvLine(path, number, text, key, value, why)
    if not _NAME.fullmatch(key):
        why = (f"{key!r} is not a variable name: the node's shell fails on `export {key}=...`, "
               "and the launch command with it")
        return EnvLine(path, number, text, key, value, why)
    if _PLAIN_VALUE.search(value) and _EXPANDED.search(value):
        why = ("the value goes to each node's shell inside double quotes, where $, `, \\ and \" "
               "are still interpreted: the ranks may see another value than the one written")
        return EnvLine(path, number, text, key, value, why, "warning")
    return EnvLine(path, number, text, key, value)


def read_env_file(path: Path) -> tuple[EnvLine, ...] | None:
    """The lines of one environment file as DeepSpeed's runner reads them (``readlines()``:
    every line, blank or not); None when it is not there or cannot be read."""
    try:
        text = read_text(path, "launcher", errors="replace")
    except (OSError, UsageError):
        return None
    return tuple(_read_line(str(path), n, raw)
                 for n, raw in enumerate(text.splitlines(keepends=True), start=1))


def _env_paths(catalog, environ: Mapping[str, str], cwd: Path, home: Path) -> list[Path]:
    name = environ.get(catalog.deepspeed_env_file_var or "", "") or catalog.deepspeed_env_file
    dirs = {"~": home, ".": cwd}
    paths: list[Path] = []
    for d in catalog.deepspeed_env_file_dirs:
        path = dirs.get(d, Path(os.path.expanduser(d))) / name
        # the same file twice (launched from ~, or DS_ENV_FILE absolute): DeepSpeed reads it
        # twice to the same effect; it is read and reported once here
        if not any(os.path.abspath(path) == os.path.abspath(p) for p in paths):
            paths.append(path)
    return paths


def deepspeed_view(catalog, environ: Mapping[str, str], *, cwd: Path, home: Path
                   ) -> LauncherView:
    """The variables DeepSpeed's runner exports to every rank of a multi-node launch from
    this shell and folder, with their origins, and the lines of its environment files."""
    exports: dict[str, str] = {}
    origins: dict[str, str] = {}
    for var in sorted(environ):
        if catalog.deepspeed_forwards(var):
            exports[var] = environ[var]
            origins[var] = "this shell (a prefix DeepSpeed's runner exports)"
    old = environ.get("PYTHONPATH")
    exports["PYTHONPATH"] = f"{cwd}:{old}" if old else str(cwd)
    origins["PYTHONPATH"] = "DeepSpeed's runner (the launch folder first)"
    files: list[str] = []
    lines: list[EnvLine] = []
    for path in _env_paths(catalog, environ, cwd, home):
        read = read_env_file(path)
        if read is None:
            continue
        files.append(str(path))
        lines += read
        for ln in read:
            if ln.key is None or (ln.problem and ln.severity == "error"):
                continue
            exports[ln.key] = ln.value or ""
            origins[ln.key] = ln.where()
    return LauncherView("deepspeed (pdsh)", exports, origins, tuple(files), tuple(lines),
                        id="deepspeed", session="each node's non-interactive SSH session (pdsh)")


def master_from(hostname_i: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """(the first word of ``hostname -I``'s output, or None; what it printed or why not)."""
    if not hostname_i:
        return None, "not asked"
    words = (hostname_i.get("stdout") or "").split()
    if hostname_i.get("rc") == 0 and words:
        return words[0], " ".join(words)
    return None, hostname_i.get("error") or f"exit {hostname_i.get('rc')}, printed nothing"


def env_file_findings(catalog, view: LauncherView) -> list[Finding]:
    """One deepspeed-env-line finding per line of an environment file that breaks the launch
    (error) or whose value the nodes' shells rewrite (warning)."""
    out = []
    for ln in view.lines:
        if not ln.problem:
            continue
        fix = (f"edit {ln.where()}: one VAR=VALUE per line, no blank or comment lines (DeepSpeed "
               "reads every line)" if ln.severity == "error" else
               f"write the value of {ln.key} in {ln.where()} without $, `, \\ or \" (or check "
               "that what each node's shell makes of it is what the ranks need)")
        out.append(catalog.finding(
            "deepspeed-env-line", f"{ln.where()} {ln.text!r} {ln.problem}",
            {"path": ln.path, "line": ln.line, "text": ln.text, "key": ln.key,
             "value": ln.value}, fix, None, severity=ln.severity))
    return out
