"""A compiled copy of loaded facts in the user's cache, so that a command does not parse and
re-validate the matrix (~1.5 MB of JSON and TOML, ~40 ms) when nothing in it changed.

The copy lives in ``<cache>/facts/<key>.pickle`` (``<cache>``: ``$ENVGEN_CACHE_DIR`` or
``~/.cache/envgen``). The key covers envgen's version and the path, size and modification time
of every data file read and of every schema it was checked against, so any edit, refresh or
upgrade misses and the facts are read and checked again. Hand-written (no library caches
arbitrary frozen dataclasses keyed by file stamps); pickle is safe here because envgen reads
only what it wrote into the user's own cache directory. Anything wrong with the cache (missing,
corrupt, unreadable, read-only, from another Python) is ignored: it only ever saves time.
``ENVGEN_FACTS_CACHE=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

import envgen
from envgen.atomic import write_file
from envgen.config import cache_root
from envgen.schemas.check import SCHEMA_DIR

FORMAT = 1  # bump when the pickled types change shape
KEEP = 8  # compiled copies kept (matrix checkouts, data dirs, versions in use); older ones go


def enabled() -> bool:
    return os.environ.get("ENVGEN_FACTS_CACHE", "1") != "0"


def key(stamp: tuple) -> str:
    """The cache key of a load whose data files are ``stamp`` (see :func:`load_facts`)."""
    schemas = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                    for p in sorted(SCHEMA_DIR.glob("*.schema.json")))
    raw = repr((FORMAT, envgen.__version__, stamp, schemas)).encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def _path(name: str) -> Path:
    return cache_root() / "facts" / f"{name}.pickle"


def read(name: str) -> Any | None:
    if not enabled():
        return None
    try:
        with _path(name).open("rb") as fh:
            return pickle.load(fh)
    except Exception:
        return None


def write(name: str, facts: Any) -> None:
    if not enabled():
        return
    try:
        path = _path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL), durable=False)
        copies = sorted(path.parent.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns,
                        reverse=True)
        for old in copies[KEEP:]:
            old.unlink(missing_ok=True)
    except Exception:
        return
