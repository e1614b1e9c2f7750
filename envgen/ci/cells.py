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
from envgen.schemas.check import check, where
from envgen.schemas.read import read_toml

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

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
    """matrix/cells.toml: [[cell]] combination, flavor, gpu_arch, base, checked against
    envgen/schemas/cells.schema.json and for valid, distinct combination ids. Every problem
    at once."""
    doc = read_toml(Path(path), fix=f"fix matrix/{FILE}",
                    missing_hint=f"list the GPU matrix's cells in matrix/{FILE} ([[cell]] "
                    "combination = \"<id>\")")
    errors = check(doc, "cells")
    problems = [f"{where(e.path) or '(top level)'}: {e.message()}" for e in errors]
    rows = doc.get("cell")
    seen: set[str] = set()
    for i, row in enumerate(rows if isinstance(rows, list) else ()):
        cid = row.get("combination") if isinstance(row, dict) else None
        if not isinstance(cid, str):
            continue
        if parse_combination_id(cid) is None:
            problems.append(f"cell[{i}].combination: {cid!r} is not a combination id")
        elif cid in seen:
            problems.append(f"cell[{i}]: {cid} is listed twice")
        seen.add(cid)
    problems.sort(key=_order)
    if problems:
        raise DataError(f"{path} has {len(problems)} problem(s):\n  " + "\n  ".join(problems),
                        hint=f"fix matrix/{FILE} (its header documents the keys; the schema is "
                        "envgen/schemas/cells.schema.json)")
    return [Cell(combination=row["combination"], flavor=row.get("flavor", "conda"),
                 gpu_arch=row.get("gpu_arch"), base=row.get("base")) for row in doc.get("cell", [])]


def _order(problem: str) -> tuple:
    """Problems of cell[2] after those of cell[1]: by the index in their path."""
    head = problem.split(":", 1)[0]
    if head.startswith("cell[") and "]" in head:
        index = head[5:head.index("]")]
        return (0, int(index) if index.isdigit() else 0)
    return (1, 0)


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
