"""``table()``: the compatibility table from the result records and the facts: one row per
combination with records, plus the resolver's best combination per framework × torch × CUDA of
each framework's latest release; each row with its evidence tier, status, the records that
prove it and upstream citations. With ``write``: the Markdown page, the JSON and the README
block and the selector's data (docs/selector.json), written together or not at all.

Input: TableRequest (where the outputs go, where records are read from). Output: TableResult
(the typed Table; the rendered page and JSON; which files were written or unchanged).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from envgen.api.progress import Progress, quiet
from envgen.facts.matrix import Matrix
from envgen.results.table import (
    REGENERATE,
    Table,
    load_table,
)
from envgen.results.table_render import (
    Written,
    render_json,
    render_markdown,
    write_outputs,
)


@dataclass(frozen=True, slots=True)
class TableRequest:
    write: bool = False  # write the three files (else only render)
    page: Path = Path("docs/compatibility.md")
    data_file: Path = Path("docs/compatibility.json")
    readme: Path = Path("README.md")  # JSON evidence paths are relative to its folder
    results_dirs: tuple[Path, ...] | None = None  # default: the matrix's and the data dir's
    # the docs page's selector data (every feasible combination, newest patch per minor);
    # written with the others, None: not written
    selector_file: Path | None = Path("docs/selector.json")


@dataclass(frozen=True, slots=True)
class TableResult:
    table: Table
    request: TableRequest
    written: tuple[Written, ...] = ()

    def markdown(self) -> str:
        """The docs page (links relative to ``page``)."""
        return render_markdown(self.table, self.request.page)

    def json(self) -> str:
        """The JSON for tools (record paths relative to the README's folder)."""
        return render_json(self.table, self.request.readme.parent)


def table(req: TableRequest, *, matrix: Matrix | None = None,
          progress: Progress = quiet) -> TableResult:
    matrix = matrix or Matrix.locate()
    if not req.write:
        return TableResult(table=load_table(matrix, req.results_dirs), request=req)
    from envgen.writelock import holding  # (only to write: it brings socket, ctypes, shutil)

    with contextlib.ExitStack() as locks:  # a second table --write refuses meanwhile
        for folder in _folders(req):
            locks.enter_context(holding(folder, REGENERATE))
        built = load_table(matrix, req.results_dirs)
        extra = {}
        if req.selector_file is not None:
            # (only here: the selector's data is built for --write alone)
            from envgen.results.selector import render_selector_json, selector_data
            from envgen.results.store import load_many

            progress("the selector's data: every feasible combination, newest patch per minor")
            doc = selector_data(matrix.facts, built, load_many(
                matrix.results_dirs() if req.results_dirs is None else list(req.results_dirs)),
                progress=progress, upstream=matrix.upstream)
            extra[req.selector_file] = render_selector_json(doc).encode("utf-8")
        written = write_outputs(built, page=req.page, data=req.data_file, readme=req.readme,
                                extra=extra)
    return TableResult(table=built, request=req, written=written)


def _folders(req: TableRequest) -> list[Path]:
    """The folders ``write`` writes into (their write locks, :mod:`envgen.writelock`)."""
    files = (req.page, req.data_file, req.readme, req.selector_file)
    return sorted({Path(os.path.abspath(f)).parent for f in files if f is not None})
