"""The harvested snapshot on disk: ``matrix/harvested/{torch,frameworks,cuda}.json``.

Writing is safe to interrupt at any moment (SIGKILL included). Scheme:

1. every file of the new snapshot is written into a fresh directory
   ``matrix/.harvested.new-<pid>/`` and fsynced;
2. that directory and ``matrix/harvested/`` are swapped with one atomic
   ``renameat2(RENAME_EXCHANGE)`` — so the path ``matrix/harvested`` always names a complete
   directory, the old one before the call and the new one after it;
3. the old directory (now under the temporary name) is deleted.

Ctrl-C or SIGTERM during 1 removes the staging directory before the interrupt propagates (the
rollback is noted on the exception, :func:`envgen.errors.note_rollback`); during 2-3 they are
deferred until the commit is done (:func:`envgen.atomic.deferred_signals`), so an interrupt
never tears the commit, and the exception then says the write had completed. A SIGKILL
during 1 leaves ``harvested/`` untouched plus a stray temporary directory; after 2 it leaves
the new snapshot plus the stray old one. :func:`recover` (run before every write) deletes the
strays of processes that no longer run and says which. Where RENAME_EXCHANGE is unavailable
(not Linux, old kernel, some file systems) the fallback renames ``harvested`` →
``.harvested.old`` then the new directory into place; a kill between those two renames leaves
no ``harvested/`` for an instant, and :func:`recover` restores ``.harvested.old`` (complete,
marked by its ``.complete`` file) first. A reader that must see one consistent snapshot opens
the directory once and reads files relative to that handle (or simply reads all its files
after :func:`recover`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from envgen.atomic import alive, deferred_signals, exchange, fsync_dir, write_synced
from envgen.errors import DataError, filesystem_error, note_rollback
from envgen.userfile import loads_json, read_text

FILES = {"torch.json": "builds", "frameworks.json": "releases", "cuda.json": "toolkits"}
SCHEMA = 1
COMPLETE = ".complete"
RESTORE_HINT = "git checkout the file (or regenerate it with `envgen matrix update --write`)"

# The fields every record of a file must have for a refresh to match and sort it.
_REQUIRED: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "torch.json": (
        ("version", str),
        ("platform", str),
        ("wheel_tag", str),
        ("index", str),
        ("python", list),
    ),
    "frameworks.json": (("framework", str), ("version", str), ("source", dict)),
    "cuda.json": (("cuda", str), ("source", dict)),
}


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _record_problem(name: str, record: Any) -> str | None:
    if not isinstance(record, dict):
        return f"is a JSON {type(record).__name__}, not an object"
    for key, kind in _REQUIRED[name]:
        if not isinstance(record.get(key), kind):
            return f"has no {key!r} of the right type"
    if name != "torch.json" and not isinstance(record["source"].get("index"), str):
        return "has no source.index"
    if name == "cuda.json" and not all(p.isdigit() for p in record["cuda"].split(".")):
        return f"has a bad cuda version {record['cuda']!r}"
    return None


def load(matrix_dir: Path) -> dict[str, dict[str, Any]]:
    """The committed documents by file name; a missing file reads as an empty document. A file
    that is not a schema-1 object with a list of well-formed records raises DataError."""
    out = {}
    for name, key in FILES.items():
        path = Path(matrix_dir) / "harvested" / name
        try:
            doc = loads_json(read_text(path, "matrix"), str(path), "matrix")
        except FileNotFoundError:
            doc = {"schema": SCHEMA, key: []}
        except ValueError as exc:  # bad JSON, or bytes that are not UTF-8
            raise DataError(f"{path}: invalid JSON ({exc})", hint=RESTORE_HINT) from exc
        except OSError as exc:
            raise filesystem_error(exc, "reading", path) from exc
        if not isinstance(doc, dict):
            raise DataError(
                f"{path}: the file is a JSON {type(doc).__name__}, not an object with a "
                f"{key!r} list",
                hint=RESTORE_HINT,
            )
        if not isinstance(doc.get(key), list):
            raise DataError(f"{path}: no {key!r} list", hint=RESTORE_HINT)
        for n, record in enumerate(doc[key]):
            problem = _record_problem(name, record)
            if problem:
                raise DataError(f"{path}: {key}[{n}] {problem}", hint=RESTORE_HINT)
        out[name] = doc
    return out


def _owner_alive(stray: Path) -> bool:
    """Whether ``.harvested.new-<pid>`` belongs to another process that still runs."""
    pid = stray.name.rsplit("-", 1)[-1]
    return (
        stray.name.startswith(".harvested.new-")
        and pid.isdigit()
        and int(pid) != os.getpid()
        and alive(int(pid))
    )


def recover(matrix_dir: Path) -> list[Path]:
    """Finish or undo an interrupted write (see the module docstring); the leftover paths it
    removed (or restored), for the caller to report."""
    matrix_dir = Path(matrix_dir)
    target, old = matrix_dir / "harvested", matrix_dir / ".harvested.old"
    done = []
    if not target.exists() and (old / COMPLETE).exists():
        os.rename(old, target)
        done.append(old)
    for stray in sorted(matrix_dir.glob(".harvested.*")):
        if _owner_alive(stray):
            continue  # a concurrent write in progress: not debris
        shutil.rmtree(stray, ignore_errors=True)
        done.append(stray)
    (target / COMPLETE).unlink(missing_ok=True)
    return done


def _swap(matrix_dir: Path, staging: Path, target: Path) -> Path:
    """Put ``staging`` in place of ``target``; the path now holding the old directory."""
    if target.exists() and exchange(staging, target):
        fsync_dir(matrix_dir)
        return staging  # now the old directory
    old = matrix_dir / ".harvested.old"
    if target.exists():
        (target / COMPLETE).touch()
        os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        if old.exists() and not target.exists():
            os.rename(old, target)  # put the old snapshot back
        raise
    fsync_dir(matrix_dir)
    return old


def write(matrix_dir: Path, texts: dict[str, str]) -> list[Path]:
    """Replace ``matrix/harvested/`` with exactly ``texts`` (file name → content); the
    leftovers of earlier interrupted writes that were cleaned up first (see :func:`recover`).

    Any failure or interrupt before the commit removes the staging directory and leaves
    ``matrix/harvested/`` as it was; an OS error becomes a FilesystemError."""
    matrix_dir = Path(matrix_dir)
    target = matrix_dir / "harvested"
    staging = matrix_dir / f".harvested.new-{os.getpid()}"
    try:
        matrix_dir.mkdir(parents=True, exist_ok=True)  # a new data directory
        removed = recover(matrix_dir)
    except OSError as exc:
        raise filesystem_error(exc, "writing into", matrix_dir) from None
    delay = float(
        os.environ.get("ENVGEN_TEST_WRITE_DELAY", "0") or 0
    )  # test hook: widen the window
    committed = False
    try:
        staging.mkdir()
        keep = (
            [p for p in target.iterdir() if p.name not in texts and not p.name.startswith(".")]
            if target.exists()
            else []
        )
        for path in keep:  # other files someone put in harvested/ (e.g. a README) travel along
            shutil.copy2(path, staging / path.name)
        for name in sorted(texts):
            write_synced(staging / name, texts[name])
            if delay:
                time.sleep(delay)
        (staging / COMPLETE).touch()
        fsync_dir(staging)
        with deferred_signals():  # the commit is not torn by Ctrl-C / SIGTERM
            previous = _swap(matrix_dir, staging, target)
            committed = True
            shutil.rmtree(previous, ignore_errors=True)  # else recover() removes it later
            (target / COMPLETE).unlink(missing_ok=True)
            fsync_dir(target)
    except BaseException as exc:
        if committed:
            if isinstance(exc, KeyboardInterrupt):
                note_rollback(exc, f"{target} had been written completely before the interrupt")
            if isinstance(exc, OSError):
                raise filesystem_error(exc, "writing", target) from exc
            raise
        shutil.rmtree(staging, ignore_errors=True)
        note_rollback(
            exc, f"removed the partly written snapshot {staging}; {target} is unchanged"
        )
        if isinstance(exc, OSError):
            raise filesystem_error(exc, "writing", staging) from exc
        raise
    return removed
