"""One error hierarchy for envgen; the CLI maps each class to an exit code.

Library code raises these; only ``envgen.cli`` prints them or exits. Every error says what
went wrong (``message``), what to do next (``hint``, shown as "fix") and, when a value the
user gave caused it, where that value came from (``source``: ``--flag``, ``ENV_VAR`` or
``file:key``).

Exit codes (documented in docs/errors.md, the README and every command's ``--help``):

====  ==========================================================================
0     success
1     failure, or problems found (a failed check, bad matrix data, a failed build)
2     usage: a bad flag, config value or environment variable
3     infeasible: a well-formed request that no combination satisfies
4     environment: an index, the Docker daemon, a registry or the filesystem failed
130   interrupted by SIGINT (Ctrl-C); 143 by SIGTERM — after rolling back
====  ==========================================================================
"""

from __future__ import annotations

import errno
import os
from typing import Any


class EnvgenError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with; ``kind`` names the class of
    failure in ``--json`` output."""

    exit_code = 1
    kind = "failure"
    extra: dict[str, Any] | None = None  # more fields of the --json error object ("machine")

    def __init__(self, message: str, *, hint: str | None = None,
                 source: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.source = source

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    def to_dict(self) -> dict[str, Any]:
        """The ``{"error": ...}`` object ``--json`` prints on stdout."""
        return {"kind": self.kind, "message": self.message, "fix": self.hint,
                "source": self.source, **(self.extra or {})}


class UsageError(EnvgenError):
    """The request itself is malformed: an unknown name, a bad version, a bad option, a bad
    config value or environment variable."""

    exit_code = 2
    kind = "usage"


class InfeasibleError(EnvgenError):
    """A well-formed request that no combination in the matrix satisfies."""

    exit_code = 3
    kind = "infeasible"

    def __init__(self, message: str, *, hint: str | None = None, explanation: object = None,
                 source: str | None = None) -> None:
        super().__init__(message, hint=hint, source=source)
        self.explanation = explanation

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.explanation is not None and hasattr(self.explanation, "to_dict"):
            out["explanation"] = self.explanation.to_dict()
        return out


class DataError(EnvgenError):
    """matrix/ data (or a lock, a record) is missing, malformed or inconsistent."""

    exit_code = 1
    kind = "data"


class EnvironmentProblem(EnvgenError):
    """Something outside envgen failed: an index, the Docker daemon, a registry, the
    filesystem. Exit code 4."""

    exit_code = 4
    kind = "environment"


class NetworkError(EnvironmentProblem):
    """A package index or file could not be fetched (after retries)."""

    kind = "network"


class HarvestError(EnvironmentProblem):
    """An index answered, but with something envgen will not use: a page that is not an
    index, bytes that do not match the index's hash, a refresh that would drop known facts."""

    kind = "index"


class FilesystemError(EnvironmentProblem):
    """Reading or writing a file failed (permissions, read-only, disk full, name too long, a
    file where a directory belongs). Nothing was left half-written."""

    kind = "filesystem"


class BusyError(EnvironmentProblem):
    """Another envgen run is writing the same folder (it holds the folder's write lock,
    :mod:`envgen.writelock`); nothing was read for writing or written. Exit code 4."""

    kind = "busy"


class DaemonError(EnvironmentProblem):
    """The Docker daemon or a registry could not be reached or refused a request."""

    kind = "docker"


class Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into an exception so every ``except BaseException`` rollback runs as it
    does for Ctrl-C. A subclass of KeyboardInterrupt: code that handles one handles both."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_FS_FIXES = {
    errno.ENOSPC: "the disk is full: free space there, or write somewhere else",
    errno.EDQUOT: "the disk quota is used up: free space, or write somewhere else",
    errno.EROFS: "that filesystem is read-only: write somewhere else",
    errno.EACCES: "no permission: fix the ownership/permissions, or write somewhere else",
    errno.EPERM: "the operation is not permitted there: write somewhere else",
    errno.ENAMETOOLONG: "a path component is longer than the filesystem allows (usually 255 "
                        "bytes): use a shorter path",
    errno.ENOTDIR: "a parent of that path is a file, not a directory: choose another path or "
                   "move the file away",
    errno.EISDIR: "that path is a directory where a file belongs: choose another path",
    errno.EEXIST: "something already exists at that path: move it away or choose another path",
    errno.ENOENT: "a parent directory does not exist: create it or fix the path",
    errno.ELOOP: "too many symbolic links in that path: fix the path",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) and retry",
    errno.EIO: "an I/O error (a failing disk or network filesystem): check the device",
}


def filesystem_error(exc: OSError, action: str, path: os.PathLike[str] | str | None = None,
                     *, source: str | None = None, message: str | None = None
                     ) -> FilesystemError:
    """A FilesystemError for ``exc`` raised while ``action`` ("writing", "creating") ``path``:
    the path, the system's reason and a fix for that reason (``message`` replaces the
    first two)."""
    where = path if path is not None else (exc.filename or "")
    reason = exc.strerror or str(exc)
    fix = _FS_FIXES.get(exc.errno or 0, "check the path and the filesystem, then retry")
    return FilesystemError(message or f"{action} {where}: {reason}", hint=fix, source=source)


def note_rollback(exc: BaseException, what: str) -> None:
    """Record on an in-flight exception what was undone because of it ("removed the
    half-installed prefix /x"); the CLI says so when it reports the interruption."""
    notes = getattr(exc, "envgen_rollback", None)
    if notes is None:
        notes = []
        try:
            exc.envgen_rollback = notes  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - exceptions without a __dict__
            return
    notes.append(what)


def rollback_notes(exc: BaseException) -> list[str]:
    return list(getattr(exc, "envgen_rollback", []) or [])
