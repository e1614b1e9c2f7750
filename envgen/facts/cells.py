"""matrix/cells.toml → ``tuple[Cell, ...]``: the combinations the GPU CI matrix verifies.

Input: the file (``[[cell]]`` combination, flavor, gpu_arch, base, note). Output: frozen
:class:`Cell` values in file order. The document is checked against
envgen/schemas/cells.schema.json and for valid, distinct combination ids; every problem is
reported at once (DataError). Pure: no state, nothing written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envgen.errors import DataError
from envgen.ids import COMBINATION_ID, parse_combination_id  # noqa: F401 (re-exported)

FILE = "cells.toml"
SCHEMA = "cells"
@dataclass(frozen=True, slots=True)
class Cell:
    """One cell: a combination id plus how to lock and build it."""

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


def read_cells(path: str | Path) -> tuple[Cell, ...]:
    """The cells of ``path`` (matrix/cells.toml), checked against
    envgen/schemas/cells.schema.json and for valid, distinct combination ids. Every problem
    at once. Read back from the compiled copy (envgen/facts/compiled.py, keyed by the file's
    content) when these bytes were read and checked before: no TOML or schema."""
    from envgen.facts import compiled

    return compiled.remembered(
        "cells", FILE, Path(path), _read_cells,
        lambda v: isinstance(v, tuple) and all(isinstance(c, Cell) for c in v))


def _read_cells(path: Path) -> tuple[Cell, ...]:
    from envgen.schemas.check import check, where
    from envgen.schemas.read import read_toml

    path = Path(path)
    doc = read_toml(path, fix=f"fix matrix/{FILE}",
                    missing_hint=f"list the GPU matrix's cells in matrix/{FILE} ([[cell]] "
                    "combination = \"<id>\")")
    errors = check(doc, SCHEMA)
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
    return tuple(Cell(combination=row["combination"], flavor=row.get("flavor", "conda"),
                      gpu_arch=row.get("gpu_arch"), base=row.get("base"))
                 for row in doc.get("cell", []))


def load_cells(matrix_dir: str | Path) -> tuple[Cell, ...]:
    """The cells of ``matrix_dir``/cells.toml."""
    return read_cells(Path(matrix_dir) / FILE)


def _order(problem: str) -> tuple:
    """Problems of cell[2] after those of cell[1]: by the index in their path."""
    head = problem.split(":", 1)[0]
    if head.startswith("cell[") and "]" in head:
        index = head[5:head.index("]")]
        return (0, int(index) if index.isdigit() else 0)
    return (1, 0)
