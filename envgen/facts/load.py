"""Load matrix/ into a ``Facts`` value: from this process's copy, else the compiled copy in the
user's cache, else by reading and validating every file.

Input: the matrix directory (and the data directory, whose harvested/ snapshot is used when
newer). Output: ``Facts``. The reading and checking (envgen/facts/parse.py: each file against
its JSON Schema and the checks a schema cannot express, all problems reported together) runs
only when the files' content has no compiled copy (envgen/facts/compiled.py); this module
imports nothing of it until then, so a command that finds the copy pays for neither the
parsers nor the validator.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envgen.facts import compiled
from envgen.facts.locate import (  # the files a matrix has, where they are
    CURATED,
    HARVESTED,
    OPTIONAL,
    OPTIONAL_HARVESTED,
    harvested_dir,
)
from envgen.facts.model import Facts


def __getattr__(name: str) -> Any:
    """``check`` (the schema validator) is imported on first use; tests patch it here."""
    if name == "check":
        from envgen.schemas.check import check

        globals()["check"] = check
        return check
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_CACHE: dict[tuple, Facts] = {}


def _reads(matrix_dir: Path, harvested: Path) -> list[tuple[str, Path]]:
    """(label, path) of every file the facts are read from."""
    reads = [(f"harvested/{name}", harvested / name) for name in HARVESTED
             if name not in OPTIONAL_HARVESTED or (harvested / name).exists()]
    curated = matrix_dir / "curated"
    reads += [(f"curated/{name}.toml", curated / f"{name}.toml") for name in CURATED
              if name not in OPTIONAL or (curated / f"{name}.toml").exists()]
    return reads


def facts_key(matrix_dir: str | Path, data_dir: str | Path | None = None) -> str | None:
    """The digest of the files the facts of ``matrix_dir`` are read from (the compiled copy's
    key), computed without loading them; None when a file cannot be read."""
    matrix_dir = Path(matrix_dir)
    harvested = harvested_dir(matrix_dir, data_dir or None)
    try:
        return compiled.key(_reads(matrix_dir, harvested))
    except OSError:
        return None


def load_facts(matrix_dir: str | Path, data_dir: str | Path | None = None) -> Facts:
    """Load and validate every file in ``matrix_dir``; raise DataError listing all problems.
    With ``data_dir``, harvested facts come from its harvested/ when that snapshot is newer
    (:func:`envgen.facts.locate.harvested_dir`)."""
    matrix_dir = Path(matrix_dir)
    harvested = harvested_dir(matrix_dir, data_dir or None)
    reads = _reads(matrix_dir, harvested)
    try:  # this process's copy: by modification time (a stat per file, no reading)
        stamp = (os.path.realpath(matrix_dir), os.path.realpath(harvested),
                 tuple((f, os.stat(f).st_mtime_ns) for _, f in reads))
    except OSError:  # a file vanished (or a dangling link): read it and report it below
        stamp = None
    if stamp in _CACHE:
        return _CACHE[stamp]
    cache_key = None
    if stamp is not None and compiled.enabled():
        try:  # the compiled copy: by the files' content (envgen/facts/compiled.py)
            cache_key = compiled.key(reads)
        except OSError:
            cache_key = None
    if cache_key is not None:
        hit = compiled.read(cache_key)
        if isinstance(hit, Facts):
            _CACHE.clear()
            _CACHE[stamp] = hit
            return hit
    from envgen.facts.parse import read_facts

    facts = read_facts(matrix_dir, harvested,
                       globals().get("check") or __getattr__("check"))
    _CACHE.clear()
    if stamp is not None:
        _CACHE[stamp] = facts
        if cache_key is not None:
            compiled.write(cache_key, facts)
    return facts
