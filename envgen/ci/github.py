"""The GitHub Actions matrix of the GPU cells that still need a run.

Inputs: the cells (:mod:`envgen.facts.cells`: the matrix's cells.toml or another file), the
folder of their locks (each cell's ``<locks>/<id>/envgen.lock.json``, written by ``nox -s
lock``), and the result records (the lock hashes that already have a verify record,
``envgen.results.store.verified_lock_hashes``). Output: a :class:`GithubMatrix`. A cell is due
when no verify record has its lock hash, when it has no lock yet, or always with ``force``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envgen.errors import DataError
from envgen.facts.cells import Cell
from envgen.userfile import read_bytes

if TYPE_CHECKING:
    from envgen.facts.matrix import Matrix

MANIFEST = "envgen.lock.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class GithubEntry:
    """One job of the matrix: the cell's combination, its lock hash (None: not locked yet),
    the `envgen make` options its lock needs and the moving image tags it carries
    (``deepspeed-cu132``: on the newest cell of that framework and CUDA; space-separated)."""

    combination: str
    lock_hash: str | None
    make_options: str
    aliases: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"combination": self.combination, "lock_hash": self.lock_hash,
                "make_options": self.make_options, "aliases": self.aliases}


@dataclass(frozen=True, slots=True, kw_only=True)
class GithubMatrix:
    """The cells due (``include``) and how many cells there are, already verified, not
    locked yet."""

    include: tuple[GithubEntry, ...]
    cells: int
    verified: int
    unlocked: int

    @property
    def due(self) -> int:
        return len(self.include)

    @property
    def counts(self) -> dict[str, int]:
        return {"cells": self.cells, "verified": self.verified, "unlocked": self.unlocked,
                "due": self.due}

    @property
    def summary(self) -> str:
        """``5 cells: 2 due (1 not locked yet), 3 already verified``."""
        return (f"{self.cells} cells: {self.due} due ({self.unlocked} not locked yet), "
                f"{self.verified} already verified")

    def to_dict(self) -> dict[str, Any]:
        """``{"include": [...]}``, what GitHub Actions reads as a matrix."""
        return {"include": [e.to_dict() for e in self.include]}

    def to_json(self) -> str:
        """The matrix as one line of compact JSON (``$GITHUB_OUTPUT`` takes one line)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))


def lock_hash(locks: Path, cell: Cell) -> str | None:
    """The cell's lock hash from <locks>/<id>/envgen.lock.json, or None if not locked yet."""
    path = os.path.join(locks, cell.combination, MANIFEST)
    try:
        return json.loads(read_bytes(path, "lock"))["lock_hash"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path} is not a lock manifest ({exc})",
                        hint=f"re-lock it: nox -s lock -- {cell.combination}") from None


def moving_aliases(cells: Sequence[Cell]) -> dict[str, str]:
    """combination id → its moving image tag ``<framework>-cu<XY>[-<arch>]``, for the newest
    cell of each framework × CUDA × architecture (the highest framework release, then torch,
    then Python, a free-threaded one after every other, as policy.toml ranks them; the first
    listed on a tie). The alias moves when a newer cell is added."""
    from envgen.ids import parse_combination_id
    from envgen.versions import dotted_key, python_key

    best: dict[str, tuple[tuple, int, str]] = {}
    for i, cell in enumerate(cells):
        f = parse_combination_id(cell.combination)
        if f is None:
            continue
        arch = f["platform"].removeprefix("linux-")
        alias = (f"{f['framework']}-cu{f['cuda'].replace('.', '')}"
                 + ("" if arch == "x86_64" else f"-{arch}"))
        major, minor, free = python_key(f["python"])
        key = (dotted_key(f["framework_version"]), dotted_key(f["torch"]),
               (not free, major, minor))
        if alias not in best or (key, -i) > (best[alias][0], -best[alias][1]):
            best[alias] = (key, i, cell.combination)
    return {combination: alias for alias, (_k, _i, combination) in best.items()}


def github_matrix(cells: Sequence[Cell], locks: Path, verified: Collection[str], *,
                  force: bool = False) -> GithubMatrix:
    """The matrix of the cells in ``cells`` whose lock under ``locks`` has no hash in
    ``verified`` (every cell with ``force``)."""
    include: list[GithubEntry] = []
    done = unlocked = 0
    aliases = moving_aliases(cells)
    for cell in cells:
        h = lock_hash(locks, cell)
        if h is None:
            unlocked += 1
        elif h in verified and not force:
            done += 1
            continue
        include.append(GithubEntry(combination=cell.combination, lock_hash=h,
                                   make_options=" ".join(cell.make_options()),
                                   aliases=aliases.get(cell.combination, "")))
    return GithubMatrix(include=tuple(include), cells=len(cells), verified=done,
                        unlocked=unlocked)


def matrix_github(matrix: Matrix, *, locks: Path, cells: Path | None = None,
                  results_dirs: Sequence[Path] | None = None,
                  force: bool = False, changed_since: str | None = None) -> GithubMatrix:
    """The matrix of ``matrix``'s cells (or those of the cells file ``cells``) whose lock
    under ``locks`` has no verify record in ``results_dirs`` (default: the matrix's and the
    data directory's results). ``changed_since``: only the cells whose fact digest differs
    from the committed cell-digests.json at that git revision (envgen.ci.digests)."""
    from envgen.facts.cells import read_cells
    from envgen.results.store import verified_lock_hashes

    found = read_cells(cells) if cells is not None else matrix.cells
    if changed_since is not None:
        from envgen.ci.digests import changed_since as changed

        keep = set(changed(found, matrix.facts, matrix.matrix_dir, changed_since))
        found = [c for c in found if c.combination in keep]
    dirs = matrix.results_dirs() if results_dirs is None else list(results_dirs)
    return github_matrix(found, locks, verified_lock_hashes(dirs), force=force)
