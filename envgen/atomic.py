"""Crash-safe file-system primitives: every write envgen makes goes through here.

The promises, for every writer:

- a file or directory is replaced whole or not at all (temporary sibling, fsync, rename);
- a user's file is never destroyed or hidden: a path envgen would replace must be what envgen
  writes there (a directory it made, a regular file), else :class:`~envgen.errors.
  FilesystemError` before anything is written;
- an OS error (read-only, disk full, permission, name too long, a file where a folder
  belongs) becomes a FilesystemError naming the path and the fix, after removing the
  temporaries;
- SIGINT/SIGTERM during the commit (the renames) are deferred until it is done
  (:func:`deferred_signals`), so an interrupt leaves the old state or the new one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from envgen.errors import FilesystemError, filesystem_error, note_rollback

_RENAME_EXCHANGE = 2


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, text: str) -> None:
    """``text`` into a new file of a staging folder, UTF-8 with ``\n`` line ends, on disk
    before the folder is committed."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


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


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Deferred:
    def __init__(self) -> None:
        self.signum: int | None = None


@contextlib.contextmanager
def deferred_signals() -> Iterator[_Deferred]:
    """Hold SIGINT and SIGTERM while the block runs (a commit that must not be torn), then
    deliver the first one that arrived as the usual exception. In other threads (where Python
    cannot install handlers) it is a no-op."""
    state = _Deferred()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def record(signum, _frame):
        if state.signum is None:
            state.signum = signum

    saved = {s: signal.signal(s, record) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield state
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    if state.signum is not None:
        handler = saved[state.signum]
        if callable(handler):
            handler(state.signum, None)  # raises KeyboardInterrupt / errors.Interrupted
        elif handler == signal.SIG_DFL:
            raise KeyboardInterrupt


def _wrap(exc: OSError, action: str, path: Path, source: str | None) -> FilesystemError:
    err = filesystem_error(exc, action, path, source=source)
    err.__cause__ = None
    return err


def check_replaceable_file(path: Path, source: str | None = None) -> None:
    """``path`` may be (re)written as a file: it is absent or a regular file (or a link to
    one). A directory, a device or a socket there is refused, not replaced."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _wrap(exc, "checking", path, source) from None
    import stat

    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise FilesystemError(f"{path} is {kind}; envgen writes a file there and never "
                              "replaces anything else", source=source,
                              hint="move it away, or choose another output path")


def _mkdir_parent(path: Path, source: str | None) -> list[Path]:
    """Create ``path``'s missing parent folders; the ones created, outermost first."""
    missing = []
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:  # a file where a parent folder belongs
        raise FilesystemError(f"cannot create the folder {path.parent}: a file is in the way "
                              f"({exc.filename})", hint="move that file away, or choose "
                              "another output path", source=source) from None
    except OSError as exc:
        raise _wrap(exc, "creating the folder", path.parent, source) from None
    return list(reversed(missing))


def _remove_folders(created: list[Path]) -> None:
    """Undo :func:`_mkdir_parent`: remove the folders it created, if still empty."""
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _temp_prefix(path: Path, pid: int | str) -> str:
    return f".{path.name[:180]}.envgen-{pid}-"


def _clear_stale_temps(path: Path) -> None:
    """Remove temporaries an envgen process that died (SIGKILL) left beside ``path``."""
    with contextlib.suppress(OSError):
        for stray in path.parent.glob(f"{_temp_prefix(path, '*')}*.tmp"):
            pid = stray.name[len(f".{path.name[:180]}.envgen-"):].split("-", 1)[0]
            if pid.isdigit() and not alive(int(pid)):
                stray.unlink(missing_ok=True)


def _mode_for(path: Path) -> int:
    """The mode the file has, or a new file's under the umask (as ``open()`` would give)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def _temp_file(path: Path, data: bytes, durable: bool, source: str | None) -> str:
    """``data`` in a new temporary file beside ``path``; its name."""
    _clear_stale_temps(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path, os.getpid()),
                                   suffix=".tmp")
    except OSError as exc:
        raise _wrap(exc, "writing", path, source) from None
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp's 0600 would make every output private
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _wrap(exc, "writing", path, source) from None
        raise
    return tmp


def write_file(path: Path, data: bytes, durable: bool = True, *,
               source: str | None = None) -> None:
    """Write ``path`` whole or not at all: a temp file in the same folder, then a rename.
    ``durable``: fsync the file and the folder too (records; not needed for caches).
    ``source``: the option that named the path, for error messages."""
    write_files({Path(path): data}, durable=durable, source=source)


def write_files(files: dict[Path, bytes], durable: bool = True, *,
                source: str | None = None) -> None:
    """Write several files as one change: every file is written to a temporary sibling
    first (where a full disk or a read-only folder shows up, and nothing is replaced yet),
    then all are renamed into place with signals deferred. A failure or an interrupt before
    the renames removes the temporaries and leaves every target as it was."""
    staged: list[tuple[str, Path]] = []
    created: list[Path] = []
    try:
        for path in files:
            check_replaceable_file(Path(path), source)
        for path, data in files.items():
            path = Path(path)
            created += _mkdir_parent(path, source)
            staged.append((_temp_file(path, data, durable, source), path))
        delay = float(os.environ.get("ENVGEN_TEST_COMMIT_DELAY", "0") or 0)
        if delay:  # test hook: a window in which the temporaries exist, nothing is renamed
            time.sleep(delay)
        with deferred_signals():
            for tmp, path in staged:
                try:
                    os.replace(tmp, path)
                except OSError as exc:
                    raise _wrap(exc, "writing", path, source) from None
            staged = []
    except BaseException as exc:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _remove_folders(created)
        if staged and isinstance(exc, KeyboardInterrupt):
            note_rollback(exc, "removed the partly written files; nothing was replaced")
        raise
    if durable:
        for folder in {Path(p).parent for p in files}:
            with contextlib.suppress(OSError):
                fsync_dir(folder)


def writable_dir(path: Path, what: str, source: str | None = None) -> Path:
    """``path`` exists (created if missing) and a file can be written in it: checked before
    tools that would fail there with a misleading message (uv, rattler). FilesystemError
    naming ``what`` (e.g. "the cache directory") and ``source`` otherwise."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".envgen-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise filesystem_error(exc, "", source=source, message=f"{what} {path} is not "
                               f"writable: {exc.strerror or exc}") from None
    return path


def clear_debris(parent: Path, name: str) -> list[Path]:
    """Remove ``.<name>.tmp-<pid>`` folders left in ``parent`` by envgen runs that died
    (the pid no longer runs); the paths removed."""
    removed = []
    with contextlib.suppress(OSError):
        for stray in parent.glob(f".{name}.tmp-*"):
            pid = stray.name.rsplit("-", 1)[-1]
            if not pid.isdigit() or not alive(int(pid)):
                shutil.rmtree(stray, ignore_errors=True)
                removed.append(stray)
    return removed


def _commit_dir(staging: Path, target: Path, parent: Path) -> bool:
    """Put ``staging`` in ``target``'s place: an atomic exchange when ``target`` exists (the
    old one is removed), else a rename. Another writer of the same target may create it
    between the check and the rename (two `envgen make` of one combination): then theirs is
    replaced like any existing one."""
    for attempt in range(3):
        if target.exists() and exchange(staging, target):
            fsync_dir(parent)
            shutil.rmtree(staging)  # now the old directory
            return True
        try:
            if target.exists():
                old = parent / f".{target.name}.tmp-old-{os.getpid()}"
                os.rename(target, old)
                os.rename(staging, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(staging, target)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT) and attempt < 2:
                continue  # the other writer moved the target meanwhile: look again
            raise
        fsync_dir(parent)
        return True
    return False


def _users_files(target: Path, ours: set[str], files: dict[str, str],
                 source: str | None) -> list[tuple[str, bool]]:
    """What in ``target`` is not envgen's (not in ``ours``): (relative path, is a folder) of
    each file, symbolic link and empty folder of the user's, to carry into the new directory.
    FilesystemError if one is where a new file of ``files`` goes."""
    ours_dirs = {str(Path(name).parent) for name in ours} | {"."}
    theirs: list[tuple[str, bool]] = []
    for root, dirs, names in os.walk(target):
        rel_root = os.path.relpath(root, target)
        for name in sorted(names) + sorted(d for d in dirs if os.path.islink(Path(root, d))):
            rel = os.path.normpath(os.path.join(rel_root, name))
            if rel not in ours:
                theirs.append((rel, False))
        if not dirs and not names and rel_root not in ours_dirs:
            theirs.append((rel_root, True))
    for rel, _ in theirs:
        if rel in files or any(name.startswith(rel + "/") for name in files):
            raise FilesystemError(f"{target / rel} is not a file envgen wrote (the lock's "
                                  "manifest does not list it), and the new lock writes "
                                  f"{rel}; envgen never replaces a file of yours; nothing "
                                  "was written", hint="move it out of the folder (or rename "
                                  "it), then run this again", source=source)
    return theirs


def _carry(target: Path, staging: Path, theirs: list[tuple[str, bool]]) -> None:
    """The user's files of ``target`` into ``staging``: hard links (no copy, no extra space)
    where the filesystem allows them, copies elsewhere; links stay links."""
    for rel, is_dir in theirs:
        dest = staging / rel
        if is_dir:
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(target / rel, dest, follow_symlinks=False)
        except OSError:
            shutil.copy2(target / rel, dest, follow_symlinks=False)


def write_dir(target: Path, files: dict[str, str], *,
              owned: Callable[[Path], bool] | None = None, source: str | None = None,
              on_debris: Callable[[Path], None] | None = None,
              ours: Callable[[Path], set[str]] | None = None) -> None:
    """Make ``target`` a directory holding ``files`` (name → text), atomically.

    The files are written and fsynced in a sibling ``.<name>.tmp-<pid>`` directory, which then
    replaces ``target`` with one rename (an atomic exchange when ``target`` exists). A reader
    sees the old directory or the new one, never a mix; a kill leaves at most a stray
    temporary directory, removed by the next write (``on_debris`` hears of it).

    ``target`` is only replaced when it is a directory that ``owned`` accepts (e.g. it holds
    an envgen manifest); a file, or a directory of someone else's, is refused before anything
    is written. ``ours``: the relative paths of the existing ``target`` that envgen wrote
    there (e.g. the files its manifest lists); every other file, link and empty folder in it is
    the user's and is carried into the new directory unchanged, and one where a new file goes
    is refused before anything is written. Without ``ours`` the new directory holds exactly
    ``files``. ``ENVGEN_TEST_WRITE_DELAY`` (seconds per file) widens the window for the
    interruption tests.
    """
    target = Path(target)
    parent = target.parent
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise FilesystemError(f"{target} exists and is not a directory; envgen writes a "
                              "directory there and never replaces a file",
                              hint="move it away, or choose another output folder",
                              source=source)
    if target.is_dir() and owned is not None and not owned(target):
        raise FilesystemError(f"{target} exists and was not written by envgen; envgen never "
                              "replaces a folder it did not make",
                              hint="move it away, or choose another output folder",
                              source=source)
    created = _mkdir_parent(target, source)
    for stray in clear_debris(parent, target.name):
        if on_debris:
            on_debris(stray)
    staging = parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    delay = float(os.environ.get("ENVGEN_TEST_WRITE_DELAY", "0") or 0)
    committed = False
    try:
        try:
            staging.mkdir()
            if ours is not None and target.is_dir():
                _carry(target, staging, _users_files(target, set(ours(target)), files, source))
            for name in sorted(files):
                if "/" in name:  # a file in a subdirectory ("image/base.lock.txt")
                    (staging / name).parent.mkdir(parents=True, exist_ok=True)
                write_synced(staging / name, files[name])
                if delay:
                    time.sleep(delay)
            fsync_dir(staging)
        except OSError as exc:
            raise _wrap(exc, "writing", target, source) from None
        with deferred_signals():
            try:
                committed = _commit_dir(staging, target, parent)
            except OSError as exc:
                raise _wrap(exc, "writing", target, source) from None
    except BaseException as exc:
        if not committed:
            with contextlib.suppress(OSError):
                shutil.rmtree(staging)
            _remove_folders(created)
            if isinstance(exc, KeyboardInterrupt):
                note_rollback(exc, f"removed the partly written {target}; "
                              + ("the previous one is unchanged" if target.exists()
                                 else "nothing was written"))
        elif isinstance(exc, KeyboardInterrupt):
            note_rollback(exc, f"{target} had been written completely before the interrupt")
        raise
