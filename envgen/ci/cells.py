"""The GPU matrix: the cells in matrix/cells.toml, and the GitHub Actions matrix of those whose
lock has no result yet.

A cell is a combination id plus how to lock and build it (flavor, GPU arch, base). Its lock
lives in ``<locks>/<id>/envgen.lock.json`` (written by ``nox -s lock``); a cell is due when no
result record has that lock hash, when it has no lock yet, or always with ``force``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import DataError
from envgen.resolve.combination import parse_combination_id

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILE = "cells.toml"


@dataclass(frozen=True, slots=True)
class Cell:
    combination: str
    flavor: str = "conda"
    gpu_arch: str | None = None
    base: str | None = None

    def make_options(self) -> list[str]:
        """`envgen make` options beyond --combination that this cell's lock needs."""
        out = ["--flavor", self.flavor]
        if self.gpu_arch:
            out += ["--gpu-arch", self.gpu_arch]
        if self.base:
            out += ["--base", self.base]
        return out


def load_cells(path: Path) -> list[Cell]:
    """matrix/cells.toml: [[cell]] combination, flavor, gpu_arch, base. Every problem at once."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path} does not exist",
                        hint=f"list the GPU matrix's cells in matrix/{FILE} ([[cell]] "
                        "combination = \"<id>\")") from None
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: {exc}", hint="fix the TOML syntax") from None
    cells, problems, seen = [], [], set()
    for i, row in enumerate(doc.get("cell", [])):
        where = f"cell[{i}]"
        cid = row.get("combination")
        if not isinstance(cid, str) or parse_combination_id(cid) is None:
            problems.append(f"{where}.combination: {cid!r} is not a combination id")
            continue
        if cid in seen:
            problems.append(f"{where}: {cid} is listed twice")
        seen.add(cid)
        flavor = row.get("flavor", "conda")
        if flavor not in ("conda", "venv"):
            problems.append(f"{where}.flavor: {flavor!r} is not conda or venv")
        unknown = set(row) - {"combination", "flavor", "gpu_arch", "base", "note"}
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        cells.append(Cell(combination=cid, flavor=flavor, gpu_arch=row.get("gpu_arch"),
                          base=row.get("base")))
    if problems:
        raise DataError(f"{path} has {len(problems)} problem(s):\n  " + "\n  ".join(problems),
                        hint=f"fix matrix/{FILE} (its header documents the keys)")
    return cells


def lock_hash(locks: Path, cell: Cell) -> str | None:
    """The cell's lock hash from <locks>/<id>/envgen.lock.json, or None if not locked yet."""
    path = Path(locks) / cell.combination / "envgen.lock.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))["lock_hash"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError) as exc:
        raise DataError(f"{path} is not a lock manifest ({exc})",
                        hint=f"re-lock it: nox -s lock -- {cell.combination}") from None


def github_matrix(cells: list[Cell], locks: Path, verified: set[str], force: bool = False
                  ) -> tuple[dict, dict[str, int]]:
    """({"include": [...]} for GitHub Actions, counts). ``verified``: lock hashes that have
    at least one result record."""
    include, counts = [], {"cells": len(cells), "verified": 0, "unlocked": 0, "due": 0}
    for cell in cells:
        h = lock_hash(locks, cell)
        if h is None:
            counts["unlocked"] += 1
        elif h in verified and not force:
            counts["verified"] += 1
            continue
        counts["due"] += 1
        include.append({"combination": cell.combination, "lock_hash": h,
                        "make_options": " ".join(cell.make_options())})
    return {"include": include}, counts
