"""One writer per folder: a run that reads a folder's data and writes it back holds the
folder's write lock from the read to the last rename, so two runs at once never lose one's
additions. The second run refuses at once (:class:`~envgen.errors.BusyError`, exit 4), naming
the first: its pid, its command and when it started.

Taken by ``matrix update --write`` (the data directory), ``results add`` (the results
directory) and ``table --write`` (each folder it writes into).

The lock is ``fcntl.flock`` on ``<folder>/.envgen-write.lock``, never waited for. The file
holds the holder's pid, command, host and start time (JSON) for the refusal; the holder
removes it when it is done. The kernel releases a flock when its process dies (SIGKILL
included), so a file a killed run left behind blocks nobody: the next run takes the lock and
rewrites the file. The lock is re-entrant within one process (a command that holds it may
call library code that takes it again).

Where no file can be created at all (a read-only filesystem, no permission, a full disk) no
other run can write there either: the run goes on unlocked, and its own write (if it has one)
fails with the precise message.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from envgen.atomic import alive
from envgen.errors import BusyError, filesystem_error

NAME = ".envgen-write.lock"
_UNLOCKABLE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)
_WAIT_FOR_INFO = 2.0  # seconds a refusing run waits for the holder to say who it is
_held: dict[str, int] = {}  # folder (resolved) -> depth, in this process


@contextlib.contextmanager
def holding(folder: Path | str, command: str, *, source: str | None = None) -> Iterator[None]:
    """Hold ``folder``'s write lock for the ``with`` block (creating the folder if missing,
    and removing it again if it is still empty at the end). ``command`` names this run in
    another run's refusal (``envgen results add``). BusyError if another process holds it;
    FilesystemError if the folder cannot be made (a file in the way)."""
    folder = Path(folder)
    key = os.path.realpath(folder)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    created, makeable = _make(folder, source)
    try:
        fd = _acquire(folder, command, source) if makeable else None
    except BaseException:
        _remove(created)
        raise
    _held[key] = 1
    try:
        yield
    finally:
        del _held[key]
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(folder / NAME)  # while still locked: see _acquire
            os.close(fd)
        _remove(created)


def _remove(created: list[Path]) -> None:
    """Undo :func:`_make`: remove the folders it created, if they are still empty."""
    for made in reversed(created):
        with contextlib.suppress(OSError):
            made.rmdir()


def _make(folder: Path, source: str | None) -> tuple[list[Path], bool]:
    """Create ``folder`` and its missing parents: the ones created, outermost first, and
    False if nothing can be written there (see the module docstring). Nothing is created over
    a file (opening the lock file there then says "Not a directory")."""
    missing = []
    walk = folder
    while not os.path.lexists(walk) and walk != walk.parent:
        missing.append(walk)
        walk = walk.parent
    if not missing or not walk.is_dir():
        return [], True
    created = []
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue  # another run made it meanwhile
        except OSError as exc:
            if exc.errno in _UNLOCKABLE:
                return created, False  # the run's own write will say why
            _remove(created)
            raise filesystem_error(exc, "creating the folder", path, source=source) from None
        created.append(path)
    return created, True


def _acquire(folder: Path, command: str, source: str | None) -> int | None:
    """The locked file's descriptor (None: unlockable, see the module docstring)."""
    path = folder / NAME
    deadline = time.monotonic() + _WAIT_FOR_INFO
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno in _UNLOCKABLE:
                return None
            raise filesystem_error(exc, "writing into", folder, source=source) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise filesystem_error(exc, "locking", path, source=source) from None
            holder = _holder(path)
            if holder is None and time.monotonic() < deadline:
                time.sleep(0.05)  # it has the lock but has not written who it is yet
                continue
            raise _busy(folder, holder, source) from None
        # the previous holder removes the file before it lets go: if ours is no longer the
        # file at that path, the lock we got guards nothing; take the new file's
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except OSError:
            same = False
        if not same:
            os.close(fd)
            continue
        info = {"pid": os.getpid(), "command": command, "host": socket.gethostname(),
                "started": time.time()}
        with contextlib.suppress(OSError):  # who holds it is for messages only
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        return fd


def _holder(path: Path) -> dict | None:
    """What the lock file says about the run holding it, if that is a run that is alive
    (a file still holding a dead run's words is being rewritten by the new holder)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = json.loads(os.read(fd, 4096))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not (isinstance(info, dict) and isinstance(info.get("pid"), int)
            and isinstance(info.get("command"), str) and info["command"].isprintable()
            and isinstance(info.get("host"), str) and info["host"].isprintable()
            and isinstance(info.get("started"), (int, float))):
        return None
    if info.get("host") == socket.gethostname() and not alive(info["pid"]):
        return None
    return info


def _when(started: float) -> str:
    then = time.localtime(started)
    same_day = time.strftime("%Y-%m-%d", then) == time.strftime("%Y-%m-%d")
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", then)


def shown(folder: Path) -> str:
    """A folder as the user would type it: relative to the working directory when inside it,
    with a trailing slash."""
    try:
        rel = os.path.relpath(folder)
    except ValueError:
        rel = str(folder)
    text = str(folder) if rel.startswith("..") else rel
    return text.rstrip("/") + "/"


def _busy(folder: Path, holder: dict | None, source: str | None) -> BusyError:
    where = shown(folder)
    if holder is None:
        return BusyError(f"another process holds the write lock of {where} "
                         f"({folder / NAME}); nothing was written",
                         hint="wait for the other envgen run to finish, or stop it, then run "
                         "this again", source=source)
    host = holder["host"]
    on = f" on {host}" if host != socket.gethostname() else ""
    pid = holder["pid"]
    return BusyError(f"another envgen run (pid {pid}{on}, `{holder['command']}`, started "
                     f"{_when(holder['started'])}) is writing {where}; nothing was written",
                     hint=f"wait for it to finish or stop it (kill {pid}), then run this again",
                     source=source)
