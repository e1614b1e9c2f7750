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
from dataclasses import replace
from pathlib import Path

from envgen.doctor.findings import Finding
from envgen.errors import UsageError
from envgen.shellcmd import command, ssh
from envgen.userfile import read_text

__all__ = ["deepspeed_env_file", "not_carried", "not_forwarded", "session_path",
           "view_finding"]


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
            f"{catalog.deepspeed_env_file}: no rank will have it (pdsh starts the ranks on "
            "every node, this one too, over ssh), so the preflight ran its checks and its "
            "collective without it, as the launch will run",
            {"variable": var, "value": value, "env_files": [str(p) for p in files],
             "exported_prefixes": list(catalog.deepspeed_export_prefixes)},
            f"add `{var}={value}` to ~/{catalog.deepspeed_env_file} on the launching node (or "
            "set it in every node's shell profile)",
            _append(f"{var}={value}", catalog.deepspeed_env_file)))
    return out


def not_carried(catalog, rule, dropped: Mapping[str, str]) -> list[Finding]:
    """One env-not-forwarded finding per variable of this shell (NCCL_*, GLOO_*, TORCH_NCCL_*,
    TP_SOCKET_IFNAME) that ``rule``'s launcher (a catalog LauncherRule) does not carry to the
    ranks: the preflight ran without it, as the launch will."""
    out = []
    for var in sorted(dropped):
        value = dropped[var]
        out.append(catalog.finding(
            "env-not-forwarded",
            f"{var}={value} is set here, but {rule.name} does not carry it to the ranks "
            f"({_carries(rule)}): no rank will have it, so the preflight ran its checks and "
            "its collective without it, as the launch will run",
            {"variable": var, "value": value, "launcher": rule.id},
            rule.how_to_forward.format(var=var, value=value), None))
    return out


def _carries(rule) -> str:
    return {"none": "it takes nothing from the launching node; each node's torchrun has that "
                    "node's environment",
            "listed": "only the variables named to it"
                      + (f" and {', '.join(p + '*' for p in rule.listed_prefixes)}"
                         if rule.listed_prefixes else ""),
            }.get(rule.forwards, "see its record")


def _append(line: str, name: str) -> str | None:
    """The command that adds ``line`` to ``~/NAME``, the line one quoted word (printf where
    echo might read a backslash in it); None for a line no command can write as one line."""
    if not line.isprintable():
        return None
    how = ("printf", "%s\\n") if "\\" in line else ("echo",)
    return f"{command(*how, line)} >> ~/{name}"


# what a rank or the launcher starts by name, looked up on the session's PATH
_BY_NAME = ("ninja", "deepspeed", "torchrun", "python", "python3")


def session_path(catalog, facts: dict[str, dict], python: str,
                 exported: Mapping[str, str]) -> list[Finding]:
    """launcher-path: a node whose non-interactive SSH session (the one the launcher's
    commands and the preflight's own programs run in) has a PATH without the folder of the
    job's Python, so that tools installed beside it (ninja, deepspeed, python) are not found
    or are other ones. Nothing when the launcher exports PATH itself (a PATH line in its
    environment file)."""
    if "PATH" in exported or not os.path.isabs(python):
        return []
    folder = os.path.dirname(python)
    out = []
    for node, doc in facts.items():
        session = doc.get("session") or {}
        path = session.get("path")
        if not isinstance(path, str):
            continue
        entries = [os.path.normpath(e) for e in path.split(":") if e]
        if os.path.normpath(folder) in entries:
            continue
        beside = session.get("beside_python") or {}
        which = session.get("which") or {}
        lost = {t: which.get(t) for t in _BY_NAME if beside.get(t)
                and which.get(t) != os.path.join(folder, t)}
        if not lost:
            continue
        said = "; ".join(f"`{t}` is {w}" if w else f"`{t}` is not found" for t, w in lost.items())
        severe = "ninja" in lost and lost["ninja"] is None
        out.append(catalog.finding(
            "launcher-path",
            f"{node}: a non-interactive SSH session (what pdsh / DeepSpeed's runner and mpirun "
            f"start the ranks in: no login shell) has PATH={path}, without {folder}: {said}, "
            f"although {', '.join(lost)} {'is' if len(lost) == 1 else 'are'} in {folder} — "
            "works when you ssh in, fails in the launcher"
            + (" (torch's JIT op builds stop with 'Ninja is required to load C++ extensions')"
               if severe else ""),
            {"node": node, "path": path, "folder": folder, "which": which,
             "lost": sorted(lost)},
            f"put {folder} first on the PATH of non-interactive SSH sessions on {node}: "
            f"`SetEnv PATH={folder}:{path}` in {node}:/etc/ssh/sshd_config (then reload sshd), "
            f"or add the line `PATH={folder}:{path}` to ~/{catalog.deepspeed_env_file} on the "
            "launching node (DeepSpeed exports it to every rank)",
            ssh(node, "sh", "-c", "echo \"$PATH\"; command -v ninja python"),
            severity=None if severe else "warning"))
    return out


def view_finding(catalog, view, *, exported: Mapping[str, str], master: str | None,
                 master_said: str | None) -> Finding:
    """launcher-view (info): what the launcher will export, which master address and port the
    ranks use, the environment they start in — with where each comes from."""
    from envgen.validate import shown

    items = [f"{k}={shown(v)[:120]} ({view.origins.get(k, 'this preflight')})"
             for k, v in sorted(exported.items())]
    said = "; ".join(items) if items else "nothing"
    files = ", ".join(view.files) if view.files else f"no {catalog.deepspeed_env_file} found"
    rule = catalog.launchers.get(view.id) if view.id else None
    if rule is not None and "deepspeed" not in rule.forwards and not view.files:
        files = ""  # a launcher that does not read .deepspeed_env
    where = f"; master address {master} ({master_said})" if master else ""
    more = "".join(f"; {part}" for part in (
        f"the ranks start in {view.session}" if view.session else "",
        f"their interpreter: {view.interpreter}" if view.interpreter else "",
        f"they read their rank from {', '.join(view.rank_vars)}" if view.rank_vars else "",
        *view.notes) if part)
    found = catalog.finding(
        "launcher-view",
        f"{view.launcher or 'the launch'} exports to every rank: {said}"
        + (f" [{files}]" if files else "") + f"{where}{more}; the checks and the collective "
        "below ran with exactly these",
        view.to_dict() | {"exported": dict(exported)}, "", None)
    # the launcher's own record is the rule this view follows (the kind cites DeepSpeed's)
    return replace(found, source=rule.source) if rule is not None else found
