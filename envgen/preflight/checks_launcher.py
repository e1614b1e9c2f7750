"""What the launcher carries to the other nodes: a variable the preflight exports to every rank
for its own check (NCCL_*, GLOO_*, TORCH_NCCL_*, TP_SOCKET_IFNAME of the launching shell) that
DeepSpeed's multi-node runner would leave behind — not one of the prefixes it exports, not a
line of its .deepspeed_env — so the check passes and the real launch would not have it.

Input: the exported variables, the launching node's environment and working directory, the
catalog's [deepspeed_runner] facts. Output: env-not-forwarded findings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from envgen.doctor.findings import Finding
from envgen.errors import UsageError
from envgen.shellcmd import command
from envgen.userfile import read_text

__all__ = ["deepspeed_env_file", "not_forwarded"]


def deepspeed_env_file(catalog, environ: Mapping[str, str], cwd: Path,
                       home: Path) -> tuple[list[Path], set[str]]:
    """The env files DeepSpeed's runner reads, as it looks for them (its DS_ENV_FILE name, in
    ~ then .), and the variable names their VAR=VALUE lines set."""
    name = environ.get(catalog.deepspeed_env_file_var or "", "") or catalog.deepspeed_env_file
    dirs = {"~": home, ".": cwd}
    paths = [dirs.get(d, Path(os.path.expanduser(d))) / name
             for d in catalog.deepspeed_env_file_dirs]
    found: list[Path] = []
    names: set[str] = set()
    for path in paths:
        try:
            text = read_text(path, "launcher", errors="replace")
        except (OSError, UsageError):  # absent, unreadable, not a file or too large: not read
            continue
        found.append(path)
        names |= {line.split("=", 1)[0].strip() for line in text.splitlines()
                  if "=" in line and not line.lstrip().startswith("#")}
    return found, names


def not_forwarded(catalog, exported: Mapping[str, str], environ: Mapping[str, str], *,
                  cwd: Path, home: Path) -> list[Finding]:
    """One env-not-forwarded finding per exported variable DeepSpeed's runner would drop."""
    files, listed = deepspeed_env_file(catalog, environ, cwd, home)
    out = []
    for var in sorted(exported):
        if catalog.deepspeed_forwards(var) or var in listed:
            continue
        value = exported[var]
        out.append(catalog.finding(
            "env-not-forwarded",
            f"{var}={value} is set here, but DeepSpeed's multi-node runner exports only "
            f"{', '.join(p + '*' for p in catalog.deepspeed_export_prefixes)} and the lines of "
            f"{catalog.deepspeed_env_file}: the other nodes' ranks will not have it (the "
            "preflight passed it to them for its own check)",
            {"variable": var, "value": value, "env_files": [str(p) for p in files],
             "exported_prefixes": list(catalog.deepspeed_export_prefixes)},
            f"add `{var}={value}` to ~/{catalog.deepspeed_env_file} on the launching node (or "
            "set it in every node's shell profile)",
            _append(f"{var}={value}", catalog.deepspeed_env_file)))
    return out


def _append(line: str, name: str) -> str | None:
    """The command that adds ``line`` to ``~/NAME``, the line one quoted word (printf where
    echo might read a backslash in it); None for a line no command can write as one line."""
    if not line.isprintable():
        return None
    how = ("printf", "%s\\n") if "\\" in line else ("echo",)
    return f"{command(*how, line)} >> ~/{name}"
