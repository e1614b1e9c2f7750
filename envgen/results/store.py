"""Result records on disk: one file per record, named by its content.

``<results>/<combination id>/<finished as YYYYMMDDTHHMMSSZ>-<first 12 hex of record id>.json``

Two kinds of record live side by side: verify records (``"schema": 1``, written by ``envgen
verify`` on a GPU or CPU, :mod:`envgen.results.record`) and attempt records (``"schema":
"attempt/1"``, lock and build attempts, :mod:`envgen.results.attempt`). Reading a file
dispatches on its ``schema``; both kinds share the surface the status and the table use
(``combination``, ``status``, ``finished``, ``finished_at``, ``id``, ``tier``, ``error``, …).

A record's name follows from its content, so two branches that each add records merge in git
without conflicts (they add different files), and the same record can never be stored twice
(it would have the same name). Files are pretty JSON with a trailing newline, written to a
temporary file, fsynced and renamed into place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

from envgen.atomic import write_file, write_files
from envgen.errors import DataError, UsageError
from envgen.results import attempt
from envgen.results.attempt import AttemptRecord
from envgen.results.record import Problem, RecordError, ResultRecord, parse

Record: TypeAlias = ResultRecord | AttemptRecord


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record (either kind) and the file it is stored in."""

    record: Record
    path: Path


class AddOutcome(NamedTuple):
    record: Record
    path: Path
    added: bool  # False: an identical record was already stored ("already recorded")


def record_name(record: Record) -> str:
    """The record's file name within its combination's directory."""
    stamp = record.finished.split(".")[0].rstrip("Z").replace("-", "").replace(":", "")
    return f"{stamp}Z-{record.id[:12]}.json"


def record_path(results_dir: Path, record: Record) -> Path:
    return Path(results_dir) / record.combination / record_name(record)


def render(record: Record) -> bytes:
    """A stored record's exact bytes: pretty JSON in schema field order, trailing newline."""
    text = json.dumps(record.to_dict(), indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, durably (envgen.atomic.write_file)."""
    write_file(path, data, durable=True)


def load_many(dirs: list[Path] | tuple[Path, ...]) -> list[StoredRecord]:
    """The records of several results directories (the shipped matrix's and the data
    directory's), each record once, in :func:`load`'s order."""
    seen: set[str] = set()
    found: list[StoredRecord] = []
    for folder in dirs:
        for stored in load(folder):
            if stored.record.id not in seen:
                seen.add(stored.record.id)
                found.append(stored)
    found.sort(key=lambda s: (s.record.combination, s.record.finished_at, s.path.name))
    return found


def parse_any(data: Any) -> tuple[Record | None, list[Problem]]:
    """A verify record or an attempt record, by ``data["schema"]``: a string (``"attempt/1"``)
    is an attempt record's, anything else is read as a verify record's (which names a wrong
    schema). The record and no problems, or None and every problem."""
    if isinstance(data, dict) and isinstance(data.get("schema"), str) \
            and data["schema"].startswith("attempt/"):
        return attempt.parse(data)
    return parse(data)


def read_record_file(path: Path) -> tuple[Record | None, list[Problem]]:
    """Parse and validate one record file of either kind; the problems instead when it is not
    valid."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None, [Problem("$", "no such file")]
    except OSError as exc:
        return None, [Problem("$", f"cannot read: {exc.strerror or exc}")]
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, [Problem("$", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except json.JSONDecodeError as exc:
        return None, [Problem("$", f"not JSON: {exc.msg} (line {exc.lineno}, column "
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
    """
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
    for source, record in zip(map(Path, paths), records, strict=True):
        target, data = record_path(results_dir, record), render(record)
        exists = target in planned or _already_stored(target, record, data, source)
        plan.append((record, target, data, not exists))
        planned.add(target)
    write_files({target: data for _, target, data, new in plan if new}, durable=True,
                source=source)
    return [AddOutcome(record, target, new) for record, target, _, new in plan]


def _already_stored(target: Path, record: Record, data: bytes, source: Path) -> bool:
    """True if ``target`` holds this record; DataError if it holds anything else."""
    try:
        existing = target.read_bytes()
    except FileNotFoundError:
        return False
    if existing == data:
        return True
    stored, _ = read_record_file(target)
    if stored is not None and stored.id == record.id:
        return True  # the same record, formatted differently
    raise DataError(
        f"{target} already exists with different content than the record in {source}; "
        "nothing was written",
        hint="a stored record was edited or damaged: compare the two files and restore the "
        "stored one from git (`git checkout -- <file>`)",
    )


def load(results_dir: Path) -> list[StoredRecord]:
    """Every record under ``results_dir``, validated, ordered by combination, time and id.

    A missing directory has no records. Any invalid or misplaced file is a DataError naming
    every such file and its problems.
    """
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    found: list[StoredRecord] = []
    bad: dict[str, list[Problem]] = {}
    total = 0
    for folder in sorted(results_dir.iterdir()):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        for path in sorted(folder.glob("*.json")):
            if path.name.startswith("."):
                continue
            total += 1
            record, problems = read_record_file(path)
            if record is not None:
                expected = record_path(results_dir, record)
                if path != expected:
                    problems = [Problem("$", f"stored under the wrong name; this record "
                                              f"belongs at {expected.relative_to(results_dir)}")]
                else:
                    found.append(StoredRecord(record, path))
            if problems:
                bad[str(path)] = problems
    if bad:
        raise RecordError(bad, total=total,
                          hint="stored records are written by `envgen results add` and never "
                          "edited; restore the files named from git, or remove them")
    # the file name ends in the record id's first 12 hex digits: ordering by it orders by id
    # without hashing every record a second time
    found.sort(key=lambda s: (s.record.combination, s.record.finished_at, s.path.name))
    return found
