"""Where the matrix/ data directory is.

Order: an explicit path (``--matrix-dir``), ``$ENVGEN_MATRIX_DIR``, the ``matrix/`` of the
source checkout this package runs from, then the copy packaged inside the wheel.
"""

from __future__ import annotations

import os
from pathlib import Path

from envgen.errors import DataError

_PACKAGE = Path(__file__).resolve().parent.parent


def find_matrix_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    candidates: list[tuple[str, Path]] = []
    if explicit:
        candidates.append(("--matrix-dir", Path(explicit)))
    elif os.environ.get("ENVGEN_MATRIX_DIR"):
        candidates.append(("ENVGEN_MATRIX_DIR", Path(os.environ["ENVGEN_MATRIX_DIR"])))
    else:
        candidates.append(("source checkout", _PACKAGE.parent / "matrix"))
        candidates.append(("installed package", _PACKAGE / "_matrix"))
    for _origin, path in candidates:
        if (path / "curated").is_dir():
            return path
    origin, path = candidates[0]
    raise DataError(
        f"no matrix data at {path} (from {origin})",
        hint="point --matrix-dir or ENVGEN_MATRIX_DIR at a directory holding curated/ and "
        "harvested/, e.g. the matrix/ folder of an envgen checkout",
    )
