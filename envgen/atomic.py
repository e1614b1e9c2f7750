"""Crash-safe file-system primitives shared by the matrix snapshot and the lock writer."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import tempfile
import time
from pathlib import Path

_RENAME_EXCHANGE = 2


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (Linux renameat2); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return result == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_file(path: Path, data: bytes, durable: bool = True) -> None:
    """Write ``path`` whole or not at all: a temp file in the same folder, then a rename.
    ``durable``: fsync the file and the folder too (records; not needed for caches)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def write_dir(target: Path, files: dict[str, str]) -> None:
    """Make ``target`` a directory holding exactly ``files`` (name → text), atomically.

    The files are written and fsynced in a sibling ``.<name>.tmp-<pid>`` directory, which then
    replaces ``target`` with one rename (an atomic exchange when ``target`` exists). A reader
    sees the old directory or the new one, never a mix; a kill leaves at most a stray
    temporary directory, removed by the next write. ``ENVGEN_TEST_WRITE_DELAY`` (seconds per
    file) widens the window for the interruption tests.
    """
    target = Path(target)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    for stray in parent.glob(f".{target.name}.tmp-*"):
        pid = stray.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or not _alive(int(pid)):
            shutil.rmtree(stray, ignore_errors=True)
    staging = parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    delay = float(os.environ.get("ENVGEN_TEST_WRITE_DELAY", "0") or 0)
    try:
        for name in sorted(files):
            if "/" in name:  # a file in a subdirectory ("image/base.lock.txt")
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
            with open(staging / name, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(files[name])
                handle.flush()
                os.fsync(handle.fileno())
            if delay:
                time.sleep(delay)
        fsync_dir(staging)
        if target.exists() and exchange(staging, target):
            fsync_dir(parent)
            shutil.rmtree(staging)  # now the old directory
        else:
            if target.exists():
                old = parent / f".{target.name}.tmp-old-{os.getpid()}"
                os.rename(target, old)
                os.rename(staging, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(staging, target)
            fsync_dir(parent)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise
