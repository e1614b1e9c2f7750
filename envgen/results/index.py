"""What the status, the tiers, the table and the CI matrix read of a stored record, and a cache
of it keyed by the record file's bytes.

Input: a record of either kind (or the bytes of a record file). Output: a
:class:`RecordSummary` (id, kind, combination, status, tier, times, lock hash, the machine and
the error as shown), and :class:`RecordIndex`, which maps the sha256 of a record file's bytes
to the summary of the record those bytes validated to, one index per results directory.

A stored record is named by its content and never edited, so once a file's bytes have been
validated and their record id computed, the same bytes need neither again: the index keeps
``sha256(bytes) → summary`` for the records of one results directory in
``<cache>/records/<key>.marshal`` (``<cache>``: ``$ENVGEN_CACHE_DIR`` or
``~/.cache/envgen``). Hashing a file's bytes costs a few microseconds; parsing, validating and
re-hashing its canonical JSON ~50 times more. The key covers the directory, envgen's version,
the Python version, and the size and modification time of the record schemas and of the
modules that validate records, so an upgrade or an edit of the rules starts a new index.
Hand-written (no library caches validation verdicts by content digest); marshal is safe here
because envgen reads only what it wrote into the user's own cache directory. Anything wrong
with the index file (missing, corrupt, unreadable, read-only) is ignored: it only ever saves
time. ``ENVGEN_RECORDS_CACHE=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sys
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from envgen.userfile import read_private_cache

FORMAT = 1  # bump when RecordSummary's fields change
KEEP_FILES = 32  # index files kept (results directories × envgen versions); older ones go


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordSummary:
    """The surface both record kinds share, as the status, the table and the CI matrix read
    it. ``lock_hash``: the verify record's lock hash, or the attempt record's ``lock.hash``
    (None when it has no lock)."""

    id: str  # sha256 (hex) of the record's canonical JSON
    kind: str  # "verify" | "attempt"
    combination: str
    status: str  # "pass" | "fail"
    tier: str  # T1 .. T4: what the record attempted (and proves if it passed)
    flavor: str | None  # conda | venv | os-package; None for a verify record
    finished: str  # "YYYY-MM-DDTHH:MM:SS[.f]Z"
    lock_hash: str | None
    envgen_version: str | None
    machine_summary: str
    error: str | None
    log_digest: str
    seconds: float | None
    image_size_bytes: int | None
    on_gpu: bool
    finished_at: datetime = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "finished_at", _parse_time(self.finished))

    @classmethod
    def of(cls, record: Any, record_id: str | None = None) -> RecordSummary:
        """The summary of a record of either kind (``record_id``: its id when known)."""
        if record.kind == "verify":
            lock_hash = record.lock_hash
        else:
            lock_hash = record.lock.hash if record.lock is not None else None
        return cls(id=record_id or record.id, kind=record.kind,
                   combination=record.combination, status=record.status, tier=record.tier,
                   flavor=record.flavor, finished=record.finished, lock_hash=lock_hash,
                   envgen_version=record.envgen_version,
                   machine_summary=record.machine_summary, error=record.error,
                   log_digest=record.log_digest, seconds=record.seconds,
                   image_size_bytes=record.image_size_bytes, on_gpu=record.on_gpu)

    def to_tuple(self) -> tuple:
        """The fields in order, without ``finished_at`` (what the index stores)."""
        return tuple(getattr(self, name) for name in _STORED)

    @classmethod
    def from_tuple(cls, values: tuple) -> RecordSummary:
        return cls(**dict(zip(_STORED, values, strict=True)))


_STORED = tuple(f.name for f in fields(RecordSummary) if f.init)  # finished_at: __post_init__


def _parse_time(text: str) -> datetime:
    """``envgen.results.record.parse_time`` (not imported: it pulls in the validators)."""
    main, _, frac = text[:-1].partition(".")
    stamp = datetime.fromisoformat(main + "+00:00")
    return stamp.replace(microsecond=int((frac + "000000")[:6])) if frac else stamp


def enabled() -> bool:
    return os.environ.get("ENVGEN_RECORDS_CACHE", "1") != "0"


def digest(data: bytes) -> bytes:
    """The index key of a record file's bytes (SHA-256)."""
    return hashlib.sha256(data).digest()


def _key() -> str:
    """The index file's name: envgen's version, Python's, and the rules' files."""
    import envgen

    here = Path(__file__).resolve().parent
    rules = [here / "index.py", here / "record.py", here / "attempt.py",
             here.parent / "schemas" / "check.py",
             *sorted((here.parent / "schemas").glob("*record*.schema.json"))]
    stamps = []
    for p in rules:
        try:
            st = p.stat()
        except OSError:
            continue
        stamps.append((p.name, st.st_mtime_ns, st.st_size))
    raw = repr((FORMAT, envgen.__version__, sys.version_info[:2], _STORED, stamps)).encode()
    return hashlib.sha256(raw).hexdigest()[:32]


class RecordIndex:
    """``sha256(record file bytes) → RecordSummary`` for the bytes of one results directory
    that validated; loaded once, written back by :meth:`save` with exactly the entries used
    since it was loaded (the directory's records now) when they changed."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[bytes, tuple] = {}
        self._seen: set[bytes] = set()
        self._added = False
        if path is not None:
            try:
                raw = read_private_cache(path)  # only a file of this user's own
                entries = marshal.loads(raw) if raw is not None else None
                if isinstance(entries, dict):
                    self._entries = entries
            except Exception:  # missing, corrupt, another format: start empty
                self._entries = {}

    def get(self, key: bytes) -> RecordSummary | None:
        values = self._entries.get(key)
        if values is None:
            return None
        try:
            summary = RecordSummary.from_tuple(values)
        except (TypeError, ValueError):
            return None
        self._seen.add(key)
        return summary

    def add(self, key: bytes, summary: RecordSummary) -> None:
        self._entries[key] = summary.to_tuple()
        self._seen.add(key)
        self._added = True

    def save(self) -> None:
        """Keep the entries used since the last save (those of records gone are dropped) and
        write them if that changed anything; never fails (the index only saves time)."""
        changed = self._added or len(self._seen) != len(self._entries)
        self._entries = {k: v for k, v in self._entries.items() if k in self._seen}
        self._seen, self._added = set(), False
        if not changed or self.path is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                marshal.dump(self._entries, fh)
            os.replace(tmp, self.path)
            others = sorted(self.path.parent.glob("*.marshal"), reverse=True,
                            key=lambda p: p.stat().st_mtime_ns)
            for old in others[KEEP_FILES:]:
                old.unlink(missing_ok=True)
        except Exception:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


_OPEN: dict[str, RecordIndex] = {}


def open_index(results_dir: Path) -> RecordIndex:
    """The index of ``results_dir`` (one per directory, so a small store reads a small
    index); an empty one that is never written when the cache is off."""
    if not enabled():
        return RecordIndex(None)
    from envgen.config import cache_root

    try:
        where = os.path.realpath(results_dir)
        name = hashlib.sha256(f"{_key()}\0{where}".encode()).hexdigest()[:32]
        path = cache_root() / "records" / f"{name}.marshal"
    except Exception:  # e.g. a bad ENVGEN_CACHE_DIR: the commands that use it say so
        return RecordIndex(None)
    found = _OPEN.get(str(path))
    if found is None:
        found = _OPEN[str(path)] = RecordIndex(path)
    return found
