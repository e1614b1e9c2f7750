"""A digest per GPU cell of the facts that decide it, and the cells whose digest changed.

Input: the cells (cells.toml) and the matrix's facts. Output: ``{combination id: digest}``:
the sha256 of the cell's combination as the resolver builds it today from the facts (every
field: the torch pin and index, NCCL, cuDNN, nvcc and gcc, glibc, the driver floors, the arch
lists, the unavailable ops, the notes; ``infeasible`` and the reason when it no longer
resolves) plus the cell's own options. `envgen matrix update --write` records them in
``cell-digests.json`` next to harvested/; ``changed_since`` compares today's digests with the
file as it was at a git revision, so CI re-runs only the cells whose facts moved.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from envgen.errors import DataError, EnvgenError, UsageError
from envgen.facts.cells import Cell
from envgen.facts.model import Facts

FILE = "cell-digests.json"
GIT_TIMEOUT = 120  # seconds for each git command (--changed-since)
HEADER = ("Written by `envgen matrix update --write`: per GPU cell (cells.toml), the sha256 of "
          "the facts that decide its combination. `envgen matrix github --changed-since REF` "
          "lists the cells whose digest differs from this file at REF. Do not edit.")


def cell_digest(cell: Cell, facts: Facts) -> str:
    from envgen.errors import InfeasibleError
    from envgen.ids import parse_combination_id
    from envgen.resolve import Request, resolve

    fields = parse_combination_id(cell.combination) or {}
    doc: dict = {"cell": {"combination": cell.combination, "options": cell.make_options()}}
    try:
        combo = resolve(Request(**fields, flavor=cell.flavor), facts, limit=1)[0]
    except InfeasibleError as exc:
        doc["infeasible"] = exc.message
    else:
        doc["combination"] = combo.to_dict()
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def cell_digests(cells: Sequence[Cell], facts: Facts) -> dict[str, str]:
    return {c.combination: cell_digest(c, facts) for c in cells}


def render(digests: dict[str, str]) -> str:
    return json.dumps({"//": HEADER, "cells": dict(sorted(digests.items()))}, indent=2) + "\n"


def parse(text: str, where: str) -> dict[str, str]:
    try:
        doc = json.loads(text)
        cells = doc["cells"]
        if not isinstance(cells, dict) or not all(isinstance(v, str) for v in cells.values()):
            raise TypeError("cells is not an object of strings")
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{where} is not a cell digest file ({exc})",
                        hint="regenerate it with `envgen matrix update --write`") from None
    return cells


def write(directory: Path, digests: dict[str, str]) -> Path:
    from envgen.atomic import write_file

    path = Path(directory) / FILE
    write_file(path, render(digests).encode(), source=str(path))
    return path


def _git(directory: Path, *args: str) -> subprocess.CompletedProcess:
    """``git -C directory ARGS``, at most GIT_TIMEOUT seconds (its process group is then
    killed: a credential prompt or a hung network filesystem cannot hold envgen)."""
    from envgen.proc import run, time_limit

    try:
        return run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                   timeout=GIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise time_limit(f"git {' '.join(args)}", GIT_TIMEOUT, None,
                         hint=f"run `git -C {directory} {' '.join(args)}` by hand to see "
                         "what it waits for") from None


def at_revision(directory: Path, revision: str) -> dict[str, str] | None:
    """The digests of ``directory``'s cell-digests.json at git ``revision`` (None when the
    file did not exist there)."""
    directory = Path(directory).resolve()
    try:
        top = _git(directory, "rev-parse", "--show-toplevel")
    except FileNotFoundError:
        raise EnvgenError("--changed-since needs git, which is not installed",
                          hint="install git, or drop --changed-since") from None
    if top.returncode != 0:
        raise UsageError(f"--changed-since: {directory} is not in a git checkout",
                         hint="run it in the repository that holds the matrix",
                         source="--changed-since")
    rel = (directory / FILE).relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    verify = _git(directory, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if verify.returncode != 0:
        raise UsageError(f"--changed-since {revision}: no such commit",
                         hint="give a branch, tag or commit (e.g. origin/main, HEAD~1); in CI "
                         "fetch enough history (actions/checkout fetch-depth: 0)",
                         source="--changed-since")
    shown = _git(directory, "show", f"{revision}:{rel}")
    if shown.returncode != 0:
        return None
    return parse(shown.stdout, f"{rel} at {revision}")


def changed_since(cells: Sequence[Cell], facts: Facts, directory: Path,
                  revision: str) -> list[str]:
    """The cells whose digest today differs from ``directory``'s file at ``revision`` (every
    cell when the file did not exist there), in cells.toml order."""
    before = at_revision(directory, revision)
    now = cell_digests(cells, facts)
    if before is None:
        return list(now)
    return [cid for cid, digest in now.items() if before.get(cid) != digest]
