"""The one owner of matrix/: every file in it is read through a :class:`Matrix`.

Input: the matrix directory (read) and the data directory (written: refreshed facts in
``harvested/``, result records in ``results/``); see envgen/facts/locate.py for how both are
found (flag, config, environment, checkout, wheel). Output: typed, validated values, each read
once per ``Matrix`` and only when asked for:

- ``facts``     harvested/*.json + curated/*.toml (envgen/facts/load.py; a compiled copy in the
                user cache, keyed by the files' content hashes (``facts_key``), skips parsing
                and validation)
- ``sources``   sources.toml: indexes, os_packages, [refresh] (envgen/facts/sources.py)
- ``images``    curated/images.toml: bases, recipes, naming (envgen/facts/images.py)
- ``upstream``  curated/upstream.toml: cited upstream evidence (envgen/facts/upstream.py)
- ``cells``     cells.toml: the evidence / GPU-runner cells (envgen/facts/cells.py)
- ``results_dirs`` / ``results_dir``: where result records are read from / written to.

Stages and the API take a ``Matrix`` (or the values it returns), never a path to open.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types only; each file's module is imported when it is first read
    from envgen.facts.images import Recipes
    from envgen.facts.model import Facts
    from envgen.facts.sources import Sources


class Matrix:
    """The matrix to read (``matrix_dir``) and the data directory (``data_dir``; None: the
    matrix itself). Values are cached on the instance: one ``Matrix`` per command."""

    def __init__(self, matrix_dir: str | os.PathLike, data_dir: str | os.PathLike | None = None
                 ) -> None:
        self.matrix_dir = Path(matrix_dir)  # (checked by locate, else by the first read)
        self.data_dir = None if data_dir is None else Path(data_dir)

    def __repr__(self) -> str:
        return f"Matrix(matrix_dir={self.matrix_dir!r}, data_dir={self.data_dir!r})"

    @classmethod
    def locate(cls, matrix_dir: str | Path | None = None, data_dir: str | Path | None = None,
               *, matrix_source: str | None = None, data_source: str | None = None) -> Matrix:
        """The matrix ``matrix_dir`` names (else $ENVGEN_MATRIX_DIR, the checkout's, the
        wheel's) and the data directory ``data_dir`` names (checked: never inside the installed
        package; default: the matrix of a checkout, else the user data directory). The
        ``*_source`` name the flag / config key / variable the values came from, for errors."""
        from envgen.facts.locate import check_data_dir, default_data_dir, find_matrix_dir

        found = find_matrix_dir(matrix_dir, matrix_source)
        data = (check_data_dir(data_dir, data_source) if data_dir
                else default_data_dir(found))
        return cls(matrix_dir=found, data_dir=data)

    @functools.cached_property
    def facts(self) -> Facts:
        from envgen.facts.load import load_facts

        return load_facts(self.matrix_dir, self.data_dir)

    @functools.cached_property
    def facts_key(self) -> str | None:
        """A digest of the files ``facts`` is read from (content, not dates), computed without
        loading them: what is derived from the facts can be cached under it."""
        from envgen.facts.load import facts_key

        return facts_key(self.matrix_dir, self.data_dir)

    @functools.cached_property
    def sources(self) -> Sources:
        from envgen.facts.sources import load_sources

        return load_sources(self.matrix_dir)

    @property
    def has_sources(self) -> bool:
        """A matrix may ship without sources.toml (it only matters to `matrix update`)."""
        return (self.matrix_dir / "sources.toml").is_file()

    def index_urls(self) -> dict[str, str]:
        """Index name → URL from sources.toml ({} without one): the lock's default indexes."""
        return {i.name: i.url for i in self.sources.indexes} if self.has_sources else {}

    @functools.cached_property
    def images(self) -> Recipes:
        from envgen.facts.images import load_recipes

        return load_recipes(self.matrix_dir)

    @functools.cached_property
    def upstream(self):
        from envgen.facts.upstream import load_upstream

        return load_upstream(self.matrix_dir)

    @functools.cached_property
    def cells(self):
        from envgen.facts.cells import load_cells

        return load_cells(self.matrix_dir)

    @property
    def results_dir(self) -> Path:
        """Where new result records are stored: <data dir>/results."""
        return (self.data_dir or self.matrix_dir) / "results"

    def results_dirs(self) -> list[Path]:
        """Where records are read from: the shipped matrix's and the data dir's."""
        dirs = [self.matrix_dir / "results"]
        if self.data_dir and self.data_dir.resolve() != self.matrix_dir.resolve():
            dirs.append(self.data_dir / "results")
        return dirs
