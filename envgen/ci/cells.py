"""The GPU matrix's cells (matrix/cells.toml) and their lock hashes: names kept for the code
that imported them from here. The file is read by :mod:`envgen.facts.cells`; the matrix of
the cells due is :mod:`envgen.ci.github`."""

from __future__ import annotations

from envgen.ci.github import lock_hash
from envgen.facts.cells import FILE, Cell, read_cells

load_cells = read_cells  # the name this module gave it: a cells.toml path → cells

__all__ = ["FILE", "Cell", "load_cells", "lock_hash", "read_cells"]
