"""The harvested snapshot on disk: ``matrix/harvested/{torch,frameworks,cuda}.json``.

Writing is safe to interrupt at any moment (SIGKILL included). Scheme:

1. every file of the new snapshot is written into a fresh directory
   ``matrix/.harvested.new-<pid>/`` and fsynced;
2. that directory and ``matrix/harvested/`` are swapped with one atomic
   ``renameat2(RENAME_EXCHANGE)`` — so the path ``matrix/harvested`` always names a complete
   directory, the old one before the call and the new one after it;
3. the old directory (now under the temporary name) is deleted.

A kill during 1 leaves ``harvested/`` untouched plus a stray temporary directory; a kill after
2 leaves the new snapshot plus the stray old one. :func:`recover` (run before every write)
deletes strays. Where RENAME_EXCHANGE is unavailable (not Linux, old kernel, some file
systems) the fallback renames ``harvested`` → ``.harvested.old`` then the new directory into
place; a kill between those two renames leaves no ``harvested/`` for an instant, and
:func:`recover` restores ``.harvested.old`` (complete, marked by its ``.complete`` file) first.
A reader that must see one consistent snapshot opens the directory once and reads files
relative to that handle (or simply reads all three files after :func:`recover`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from envgen.atomic import exchange, fsync_dir
from envgen.errors import DataError

FILES = {"torch.json": "builds", "frameworks.json": "releases", "cuda.json": "toolkits"}
SCHEMA = 1
COMPLETE = ".complete"


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load(matrix_dir: Path) -> dict[str, dict[str, Any]]:
    """The committed documents by file name; a missing file reads as an empty document."""
    out = {}
    for name, key in FILES.items():
        path = Path(matrix_dir) / "harvested" / name
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            doc = {"schema": SCHEMA, key: []}
        except ValueError as exc:
            raise DataError(
                f"{path}: invalid JSON ({exc})", hint="git checkout the file, then re-run"
            ) from exc
        if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
            raise DataError(f"{path}: no {key!r} list", hint="git checkout the file, then re-run")
        out[name] = doc
    return out


def recover(matrix_dir: Path) -> None:
    """Finish or undo an interrupted write (see the module docstring)."""
    matrix_dir = Path(matrix_dir)
    target, old = matrix_dir / "harvested", matrix_dir / ".harvested.old"
    if not target.exists() and (old / COMPLETE).exists():
        os.rename(old, target)
    for stray in matrix_dir.glob(".harvested.*"):
        shutil.rmtree(stray, ignore_errors=True)
    (target / COMPLETE).unlink(missing_ok=True)


def write(matrix_dir: Path, texts: dict[str, str]) -> None:
    """Replace ``matrix/harvested/`` with exactly ``texts`` (file name → content)."""
    matrix_dir = Path(matrix_dir)
    recover(matrix_dir)
    target = matrix_dir / "harvested"
    staging = matrix_dir / f".harvested.new-{os.getpid()}"
    staging.mkdir()
    delay = float(
        os.environ.get("ENVGEN_TEST_WRITE_DELAY", "0") or 0
    )  # test hook: widen the window
    keep = (
        [p for p in target.iterdir() if p.name not in texts and not p.name.startswith(".")]
        if target.exists()
        else []
    )
    for path in keep:  # other files someone put in harvested/ (e.g. a README) travel along
        shutil.copy2(path, staging / path.name)
    for name in sorted(texts):
        with open(staging / name, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(texts[name])
            handle.flush()
            os.fsync(handle.fileno())
        if delay:
            time.sleep(delay)
    (staging / COMPLETE).touch()
    fsync_dir(staging)
    if target.exists() and exchange(staging, target):
        fsync_dir(matrix_dir)
        shutil.rmtree(staging)
    else:
        old = matrix_dir / ".harvested.old"
        if target.exists():
            (target / COMPLETE).touch()
            os.rename(target, old)
        os.rename(staging, target)
        fsync_dir(matrix_dir)
        shutil.rmtree(old, ignore_errors=True)
    (target / COMPLETE).unlink(missing_ok=True)
    fsync_dir(target)
