"""Where the matrix/ data is read from, and where new data is written.

Two directories:

- the **matrix** (read): ``--matrix-dir``, config ``matrix-dir``, ``$ENVGEN_MATRIX_DIR``, the
  ``matrix/`` of the source checkout this package runs from, then the copy inside the wheel;
- the **data directory** (written: refreshed facts in ``harvested/``, result records in
  ``results/``): ``--data``, config ``data-dir``, ``$ENVGEN_DATA``; by default the matrix
  itself when it is a checkout's or one the user named, else the platform's user data
  directory (``~/.local/share/envgen``). The installed package is never written.

When the data directory holds a harvested snapshot, the newer of it and the matrix's own
(by its ``generated`` date; the data directory's on a tie) is the one facts come from.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from envgen.errors import DataError, FilesystemError

REGENERATE = "envgen matrix update --write"
# the files read: harvested name → its list of records; curated names
HARVESTED = {"torch.json": "builds", "frameworks.json": "releases", "cuda.json": "toolkits",
             "os_toolkits.json": "toolkits"}
OPTIONAL_HARVESTED = ("os_toolkits.json",)  # a matrix without it offers no os-package flavor
CURATED = ("os", "cuda", "torch", "frameworks", "policy", "toolchain", "gpus", "compilers")
OPTIONAL = ("toolchain",)  # curated files a matrix may leave out


_PACKAGE = Path(__file__).resolve().parent.parent


def _inside(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def find_matrix_dir(explicit: str | os.PathLike | None = None,
                    source: str | None = None) -> Path:
    """The matrix to read; ``explicit`` (from ``source``: a flag, config key or env var)
    first, else the checkout's matrix/, else the wheel's copy."""
    candidates: list[tuple[str, Path]] = []
    if not explicit and os.environ.get("ENVGEN_MATRIX_DIR", "").strip():
        explicit, source = os.environ["ENVGEN_MATRIX_DIR"], "ENVGEN_MATRIX_DIR"
    if explicit:
        candidates.append((source or "--matrix-dir", Path(explicit)))
    else:
        candidates.append(("source checkout", _PACKAGE.parent / "matrix"))
        candidates.append(("installed package", _PACKAGE / "_matrix"))
    for _origin, path in candidates:
        if (path / "curated").is_dir():
            return path
    origin, path = candidates[0]
    problem = "is not a directory" if path.exists() and not path.is_dir() else (
        "holds no curated/ folder" if path.is_dir() else "does not exist")
    raise DataError(
        f"no matrix data at {path} (from {origin}): it {problem}",
        hint="point --matrix-dir or ENVGEN_MATRIX_DIR at a directory holding curated/ and "
        "harvested/, e.g. the matrix/ folder of an envgen checkout", source=source)


def default_data_dir(matrix_dir: str | os.PathLike) -> Path:
    """The matrix itself unless it is inside the installed package; then the user data dir."""
    if not _inside(matrix_dir, _PACKAGE):
        return Path(matrix_dir)
    import platformdirs

    return Path(platformdirs.user_data_dir("envgen", appauthor=False))


def check_data_dir(data_dir: str | os.PathLike, source: str | None = None) -> Path:
    """``data_dir`` may be written: not inside the installed package, not a file."""
    data_dir = Path(data_dir)
    if _inside(data_dir, _PACKAGE):
        raise FilesystemError(
            f"{data_dir} is inside the installed envgen package; envgen never writes there "
            "(a reinstall would lose it, and a broken write would break the tool)",
            hint="write refreshed data elsewhere: --data DIR or ENVGEN_DATA (default: "
            "~/.local/share/envgen)", source=source)
    if data_dir.exists() and not data_dir.is_dir():
        raise FilesystemError(f"the data directory {data_dir} is a file",
                              hint="point --data / ENVGEN_DATA at a directory", source=source)
    return data_dir


_GENERATED = rb'"generated":\s*\{[^{}]*?"date":\s*"(\d{4}-\d{2}-\d{2})"'  # (compiled on use)


def generated_date(harvested: str | os.PathLike) -> str | None:
    """The date a harvested/ snapshot was written (its torch.json's ``generated.date``).
    Hand-written: the object is read from the file's last KiB (its keys are sorted, so
    ``generated`` comes after the builds) — parsing the 300 KB file took 20 ms, the tail
    0.1 ms; a file written otherwise is parsed whole."""
    torch = os.path.join(harvested, "torch.json")
    try:
        with open(torch, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 1024))
            found = re.search(_GENERATED, f.read())
    except OSError:
        return None
    if found:
        return found.group(1).decode()
    import json  # a file written otherwise: parsed whole

    try:
        with open(torch, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    gen = doc.get("generated") if isinstance(doc, dict) else None
    return str(gen.get("date")) if isinstance(gen, dict) and gen.get("date") else None


def harvested_dir(matrix_dir: str | os.PathLike, data_dir: str | os.PathLike | None) -> Path:
    """The harvested/ folder facts are read from (see the module docstring)."""
    shipped = Path(matrix_dir, "harvested")
    if data_dir is None or os.path.realpath(data_dir) == os.path.realpath(matrix_dir):
        return shipped
    refreshed = Path(data_dir, "harvested")
    if not all((refreshed / f).is_file() for f in ("torch.json", "frameworks.json", "cuda.json")):
        return shipped
    mine, theirs = generated_date(refreshed), generated_date(shipped)
    if theirs and mine and theirs > mine:
        return shipped
    return refreshed
