"""Every file a user hands envgen is read here: hostfiles, reports, snapshots, locks, configs,
records, matrix data, launcher environment files.

The promises, for every reader:

- only a regular file is read: it is opened non-blocking (a FIFO cannot hang the open) and
  checked with ``fstat`` before a byte is read (a FIFO, a device such as ``/dev/zero``, a
  socket or a directory is a usage error naming the path and what it is);
- at most the cap for its kind is read (:data:`CAPS`): a larger file is a usage error naming
  the file, its size and the cap, checked before reading and again while reading (a file that
  grows);
- JSON nested deeper than Python can parse is a usage error, not a RecursionError;
- standard input is read the same way, bounded, and a closed one is a usage error.

Errors other than these (a missing file, a permission problem) propagate as the OSError the
caller already handles with its own words.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any

from envgen.errors import UsageError

_MiB = 1024 * 1024

#: The most envgen reads of each kind of file, in bytes. Each is far above what a real one
#: holds (a 20,000-node hostfile is ~0.4 MiB; collect_env + ds_report + pip list ~0.1 MiB; the
#: largest lock file, conda-lock.yml of a CUDA image, ~2 MiB; the largest matrix file ~1.2 MiB)
#: and far below what would take minutes or gigabytes to parse.
CAPS: dict[str, int] = {
    "hostfile": 16 * _MiB,
    "report": 8 * _MiB,
    "snapshot": 16 * _MiB,
    "lock": 64 * _MiB,
    "config": 4 * _MiB,
    "record": 16 * _MiB,
    "matrix": 64 * _MiB,
    "launcher": 1 * _MiB,
    "certificate": 4 * _MiB,
    "cache": 256 * _MiB,
}

_WHAT = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}

_FIX = {
    "hostfile": "trim the hostfile to the job's hosts",
    "report": "paste only the environment part (collect_env, ds_report, pip list, the error)",
    "snapshot": "give the JSON file `envgen doctor --save FILE` wrote",
    "lock": "give the folder `envgen make` wrote, or make the lock again",
    "config": "trim the configuration file",
    "record": "give the record file `envgen verify --record` wrote",
    "matrix": "restore the matrix file from the repository, or refresh it",
    "launcher": "trim the launcher's environment file",
    "certificate": "give a PEM bundle with your proxy's CA",
}


def _size(n: int) -> str:
    return f"{n / _MiB:.1f} MiB" if n >= _MiB else f"{n:,} bytes"


def _too_large(shown: str, kind: str, size: int | None) -> UsageError:
    cap = CAPS[kind]
    how = f"is {_size(size)}" if size is not None else "holds more than that"
    return UsageError(f"{shown} {how}; envgen reads at most {_size(cap)} of a {kind} file",
                      hint=_FIX[kind])


def _not_regular(shown: str, kind: str, mode: int) -> UsageError:
    what = _WHAT.get(stat.S_IFMT(mode), "not a regular file")
    return UsageError(f"{shown} is {what}, not a regular file: envgen reads a {kind} only from "
                      "a file", hint=f"give the path of a regular {kind} file (save a pipe's "
                      "output to a file first)")


def _read_bounded(fd: int, cap: int) -> bytes | None:
    """Up to ``cap`` bytes from ``fd``; None when there is more."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 * _MiB, cap + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            return None


def read_bytes(path: str | os.PathLike[str], kind: str, *, shown: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``CAPS[kind]``. ``shown`` is how to name
    the file in an error (default: the path)."""
    name = shown or os.fspath(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(name, kind, info.st_mode)
        if info.st_size > CAPS[kind]:
            raise _too_large(name, kind, info.st_size)
        data = _read_bounded(fd, CAPS[kind])
    finally:
        os.close(fd)
    if data is None:
        raise _too_large(name, kind, None)
    return data


def read_text(path: str | os.PathLike[str], kind: str, *, encoding: str = "utf-8",
              errors: str = "strict", shown: str | None = None) -> str:
    """:func:`read_bytes` decoded (a UnicodeDecodeError propagates when ``errors`` is strict)."""
    return read_bytes(path, kind, shown=shown).decode(encoding, errors)


def loads_json(text: str | bytes, what: str, kind: str) -> Any:
    """``json.loads`` with nesting deeper than Python can parse as a usage error naming
    ``what``; a JSONDecodeError propagates to the caller's own message."""
    import json  # (not at start-up: most commands read no JSON file)

    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{what}: JSON nested too deeply to read", hint=_FIX[kind]) from None


def read_json(path: str | os.PathLike[str], kind: str, *, shown: str | None = None) -> Any:
    """The JSON document in ``path`` (bounded, regular file, depth-checked)."""
    name = shown or os.fspath(path)
    return loads_json(read_bytes(path, kind, shown=name), name, kind)


def read_stdin(kind: str) -> bytes:
    """Standard input, at most ``CAPS[kind]`` bytes; a closed standard input is a usage
    error. (A stream with no file descriptor, as an embedding program may set, is read
    through its own ``read``, bounded the same way.)"""
    closed = UsageError(f"standard input is closed: there is no {kind} to read",
                        hint=f"pipe the {kind} in (`... | envgen ...`), or give a file path "
                        "instead of -")
    stream, cap = sys.stdin, CAPS[kind]
    if stream is None:
        raise closed
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is both
        fd = None
    if fd is None:
        text = stream.read(cap + 1)
        data: bytes | None = text.encode("utf-8", "surrogateescape") if isinstance(text, str) \
            else text
        data = data if len(data) <= cap else None
    else:
        try:
            os.fstat(fd)
        except OSError:
            raise closed from None
        data = _read_bounded(fd, cap)
    if data is None:
        raise _too_large("standard input", kind, None)
    return data


def _private(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read_private_cache(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of a cache file envgen wrote (a pickle, a marshal), or None unless the file
    and its folder belong to this user and no one else can write them: such a file is
    trusted code-wise, so one another user could have planted is never read."""
    try:
        if not _private(os.stat(os.path.dirname(os.path.abspath(path)))):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not _private(info):
            return None
        return _read_bounded(fd, CAPS["cache"])
    except OSError:
        return None
    finally:
        os.close(fd)


__all__ = ["CAPS", "loads_json", "read_bytes", "read_json", "read_private_cache",
           "read_stdin", "read_text"]
