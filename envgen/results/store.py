"""Result records on disk: one file per record, named by its content.

``<results>/<combination id>/<finished as YYYYMMDDTHHMMSSZ>-<first 12 hex of record id>.json``

Inputs: record files (``add``), results directories (``load``, ``load_many``). Outputs:
:class:`StoredRecord` values (a record's :class:`~envgen.results.index.RecordSummary`, its
path, and the record itself, parsed on first use), and the lock hashes verified
(``verified_lock_hashes``).

Two kinds of record live side by side: verify records (``"schema": 1``, written by ``envgen
verify`` on a GPU or CPU, :mod:`envgen.results.record`) and attempt records (``"schema":
"attempt/1"``, lock and build attempts, :mod:`envgen.results.attempt`). Reading a file
dispatches on its ``schema``; both kinds share the surface the status and the table use
(:class:`~envgen.results.index.RecordSummary`).

A record's name follows from its content, so two branches that each add records merge in git
without conflicts (they add different files), and the same record can never be stored twice
(it would have the same name). Files are pretty JSON with a trailing newline, written to a
temporary file, fsynced and renamed into place. Loading validates each file's bytes and hashes
its record once; bytes already validated are known by their sha256
(:mod:`envgen.results.index`), so loading an unchanged store parses no JSON.
"""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from envgen.errors import DataError, UsageError
from envgen.results.index import RecordSummary, digest, open_index
from envgen.userfile import read_bytes

if TYPE_CHECKING:
    from envgen.results.attempt import AttemptRecord
    from envgen.results.record import Problem, ResultRecord

Record: TypeAlias = "ResultRecord | AttemptRecord"


class StoredRecord:
    """A record (either kind) and the file it is stored in.

    ``summary`` is what the status, the tiers, the table and the CI matrix read; ``record`` is
    the full record: given, or (for a record :func:`load` found already validated) parsed from
    ``path`` on first use. Immutable; equal when path and record id are.
    """

    __slots__ = ("_file", "_path", "_record", "summary")

    summary: RecordSummary

    def __init__(self, record: Record | None, path: Path | str, *,
                 summary: RecordSummary | None = None) -> None:
        if record is None and summary is None:
            raise TypeError("StoredRecord needs a record or its summary")
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "_file", str(path))  # a Path is made on first use (they
        object.__setattr__(self, "_path", path if isinstance(path, Path) else None)  # cost)
        object.__setattr__(self, "summary", summary if summary is not None
                           else RecordSummary.of(record))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"StoredRecord is immutable (cannot set {name})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredRecord):
            return NotImplemented
        return self.path == other.path and self.summary.id == other.summary.id

    def __hash__(self) -> int:
        return hash((self.path, self.summary.id))

    def __repr__(self) -> str:
        return f"StoredRecord({self._file}, id={self.summary.id[:12]})"

    @property
    def path(self) -> Path:
        """The file the record is stored in."""
        if self._path is None:
            object.__setattr__(self, "_path", Path(self._file))
        return self._path

    @property
    def name(self) -> str:
        """The file's name (``<finished>-<id prefix>.json``)."""
        return os.path.basename(self._file)

    @property
    def id(self) -> str:
        return self.summary.id

    @property
    def record(self) -> Record:
        """The full record (parsed from ``path`` the first time when loaded by summary);
        DataError if the file no longer holds it."""
        if self._record is None:
            record, problems = read_record_file(self.path)
            if problems:
                from envgen.results.record import RecordError

                raise RecordError({str(self.path): problems},
                                  hint="the file changed while envgen was reading the results; "
                                  "restore it from git, or run the command again")
            if record.id != self.summary.id:
                raise DataError(f"{self.path} changed while envgen was reading the results",
                                hint="run the command again")
            object.__setattr__(self, "_record", record)
        return self._record


class AddOutcome(namedtuple("AddOutcome", "record path added")):
    """record: Record, path: Path, added: bool (False: an identical record was already stored,
    "already recorded")."""

    __slots__ = ()


ADD_COMMAND = "envgen results add"


def record_name(record: Record | RecordSummary) -> str:
    """The record's file name within its combination's directory."""
    stamp = record.finished.split(".")[0].rstrip("Z").replace("-", "").replace(":", "")
    return f"{stamp}Z-{record.id[:12]}.json"


def record_path(results_dir: Path, record: Record | RecordSummary) -> Path:
    return Path(results_dir) / record.combination / record_name(record)


def render(record: Record) -> bytes:
    """A stored record's exact bytes: pretty JSON in schema field order, trailing newline."""
    import json  # (only when writing or reading a record the index does not hold)

    text = json.dumps(record.to_dict(), indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def load_many(dirs: list[Path] | tuple[Path, ...]) -> list[StoredRecord]:
    """The records of several results directories (the shipped matrix's and the data
    directory's), each record once, in :func:`load`'s order."""
    if len(dirs) == 1:
        return load(dirs[0])
    seen: set[str] = set()
    found: list[StoredRecord] = []
    for folder in dirs:
        for stored in load(folder):
            if stored.summary.id not in seen:
                seen.add(stored.summary.id)
                found.append(stored)
    found.sort(key=_order)
    return found


def verified_lock_hashes(dirs: list[Path] | tuple[Path, ...]) -> frozenset[str]:
    """The lock hashes that have at least one verify record (either status) in ``dirs``;
    attempt records (lock, build) use no GPU and do not count."""
    return frozenset(s.summary.lock_hash for s in load_many(dirs)
                     if s.summary.kind == "verify" and s.summary.lock_hash)


def parse_any(data: Any) -> tuple[Record | None, list[Problem]]:
    """A verify record or an attempt record, by ``data["schema"]``: a string (``"attempt/1"``)
    is an attempt record's, anything else is read as a verify record's (which names a wrong
    schema). The record and no problems, or None and every problem."""
    if isinstance(data, dict) and isinstance(data.get("schema"), str) \
            and data["schema"].startswith("attempt/"):
        from envgen.results.attempt import parse as parse_attempt

        return parse_attempt(data)
    from envgen.results.record import parse

    return parse(data)


def _problem(path: str, message: str) -> Problem:
    from envgen.results.record import Problem

    return Problem(path, message)


def read_record_file(path: Path) -> tuple[Record | None, list[Problem]]:
    """Parse and validate one record file of either kind; the problems instead when it is not
    valid."""
    try:
        raw = read_bytes(path, "record")
    except FileNotFoundError:
        return None, [_problem("$", "no such file")]
    except UsageError as exc:  # not a regular file, or larger than a record can be
        return None, [_problem("$", exc.message)]
    except OSError as exc:
        return None, [_problem("$", f"cannot read: {exc.strerror or exc}")]
    return _parse_bytes(raw)


def _parse_bytes(raw: bytes) -> tuple[Record | None, list[Problem]]:
    import json

    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, [_problem("$", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except json.JSONDecodeError as exc:
        return None, [_problem("$", f"not JSON: {exc.msg} (line {exc.lineno}, column "
                                    f"{exc.colno})")]
    record, problems = parse_any(data)
    return (None, problems) if problems else (record, [])


def add(results_dir: Path, paths: list[Path] | tuple[Path, ...], *,
        source: str | None = None) -> list[AddOutcome]:
    """Store the records (either kind) in ``paths`` under ``results_dir``; one outcome per
    input, in order.

    Every input is validated first: if any is invalid, nothing is written and the error lists
    every problem of every file. A record already stored (same content) is skipped; a
    different file at the name a record would get is refused, also before anything is written.
    The results directory's write lock (:mod:`envgen.writelock`) is held from looking for
    stored records to the last rename: a concurrent add refuses (BusyError, exit 4).
    """
    from envgen.atomic import write_files
    from envgen.results.record import RecordError
    from envgen.writelock import holding

    if not paths:
        raise UsageError("no result files given",
                         hint="name the record files a verify run or an evidence run wrote, "
                         "e.g. `envgen results add result.json`")
    results_dir = Path(results_dir)
    records: list[Record] = []
    bad: dict[str, list[Problem]] = {}
    for path in map(Path, paths):
        record, problems = read_record_file(path)
        if problems:
            bad[str(path)] = problems
        else:
            records.append(record)
    if bad:
        raise RecordError(bad, total=len(paths),
                          hint="nothing was written; fix or drop the files named, then run it "
                          "again (matrix/results/README.md describes the record)")
    plan: list[tuple[Record, Path, bytes, bool]] = []
    planned: set[Path] = set()
    with holding(results_dir, ADD_COMMAND, source=source):  # a second add refuses meanwhile
        for origin, record in zip(map(Path, paths), records, strict=True):
            target, data = record_path(results_dir, record), render(record)
            exists = target in planned or _already_stored(target, record, data, origin)
            plan.append((record, target, data, not exists))
            planned.add(target)
        write_files({target: data for _, target, data, new in plan if new}, durable=True,
                    source=source)
    return [AddOutcome(record, target, new) for record, target, _, new in plan]


def _already_stored(target: Path, record: Record, data: bytes, origin: Path) -> bool:
    """True if ``target`` holds this record; DataError if it holds anything else."""
    try:
        existing = read_bytes(target, "record")
    except FileNotFoundError:
        return False
    if existing == data:
        return True
    stored, _ = read_record_file(target)
    if stored is not None and stored.id == record.id:
        return True  # the same record, formatted differently
    raise DataError(
        f"{target} already exists with different content than the record in {origin}; "
        "nothing was written",
        hint="a stored record was edited or damaged: compare the two files and restore the "
        "stored one from git (`git checkout -- <file>`)",
    )


def _order(s: StoredRecord) -> tuple:
    # the file name ends in the record id's first 12 hex digits: ordering by it orders by id
    # without hashing every record a second time
    return (s.summary.combination, s.summary.finished_at, s.name)


def _files(results_dir: Path) -> list[tuple[str, str]]:
    """(combination folder, file name) of every ``*.json`` in the folders of ``results_dir``
    (neither starting with "."), sorted."""
    out: list[tuple[str, str]] = []
    with os.scandir(results_dir) as folders:
        names = sorted(e.name for e in folders if not e.name.startswith(".") and e.is_dir())
    for folder in names:
        with os.scandir(os.path.join(results_dir, folder)) as entries:
            out += [(folder, n) for n in sorted(e.name for e in entries)
                    if n.endswith(".json") and not n.startswith(".")]
    return out


def load(results_dir: Path) -> list[StoredRecord]:
    """Every record under ``results_dir``, validated, ordered by combination, time and id.

    A missing directory has no records. Any invalid or misplaced file is a DataError naming
    every such file and its problems. A file whose bytes were validated before is known by
    their sha256 and not parsed again
    (:mod:`envgen.results.index`); its record is parsed on first use.
    """
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    index = open_index(results_dir)
    found: list[StoredRecord] = []
    bad: dict[str, list[Problem]] = {}
    files = _files(results_dir)
    base = str(results_dir)
    for folder, name in files:
        path = os.path.join(base, folder, name)
        try:
            raw = read_bytes(path, "record")
        except FileNotFoundError:
            bad[path] = [_problem("$", "no such file")]
            continue
        except UsageError as exc:
            bad[path] = [_problem("$", exc.message)]
            continue
        except OSError as exc:
            bad[path] = [_problem("$", f"cannot read: {exc.strerror or exc}")]
            continue
        key = digest(raw)
        summary, record = index.get(key), None
        if summary is None:
            record, problems = _parse_bytes(raw)
            if problems:
                bad[path] = problems
                continue
            summary = RecordSummary.of(record)
            index.add(key, summary)
        if folder != summary.combination or name != record_name(summary):
            bad[path] = [_problem("$", "stored under the wrong name; this record belongs "
                                       f"at {summary.combination}/{record_name(summary)}")]
            continue
        found.append(StoredRecord(record, path, summary=summary))
    index.save()
    if bad:
        from envgen.results.record import RecordError

        raise RecordError(bad, total=len(files),
                          hint="stored records are written by `envgen results add` and never "
                          "edited; restore the files named from git, or remove them")
    found.sort(key=_order)
    return found
