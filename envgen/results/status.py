"""A combination's status, derived from its result records.

- **known-bad**: its newest record (by ``finished``) failed.
- **known-good**: its newest record passed, and at least one passing record ran on real GPUs
  (``gpu.count`` ≥ 1 and the smoke test over NCCL).
- **untested**: no records, or passes without that evidence (CPU / gloo runs: note "CPU only").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from envgen.results.store import StoredRecord

KNOWN_GOOD, KNOWN_BAD, UNTESTED = "known-good", "known-bad", "untested"
STATUSES = (KNOWN_GOOD, KNOWN_BAD, UNTESTED)


@dataclass(frozen=True, slots=True, kw_only=True)
class CombinationStatus:
    combination: str
    status: str  # known-good | known-bad | untested
    note: str | None  # why untested despite records, e.g. "CPU only"
    records: int
    newest: StoredRecord | None

    @property
    def date(self) -> str | None:
        """The newest record's date (YYYY-MM-DD, UTC)."""
        return self.newest.record.finished[:10] if self.newest else None

    @property
    def label(self) -> str:
        return f"{self.status} ({self.note})" if self.note else self.status


def _newest(records: list[StoredRecord]) -> StoredRecord:
    return max(records, key=lambda s: (s.record.finished_at, s.record.id))


def status_of(combination: str, records: Iterable[StoredRecord]) -> CombinationStatus:
    """The status of ``combination`` from its records (records of others are ignored)."""
    mine = [s for s in records if s.record.combination == combination]
    if not mine:
        return CombinationStatus(combination=combination, status=UNTESTED, note=None,
                                 records=0, newest=None)
    newest = _newest(mine)
    passes = [s.record for s in mine if s.record.status == "pass"]
    note = None
    if newest.record.status == "fail":
        status = KNOWN_BAD
    elif any(r.on_gpus for r in passes):
        status = KNOWN_GOOD
    else:
        status = UNTESTED
        note = ("CPU only" if all(r.gpu.count == 0 for r in passes)
                else "no NCCL smoke test on GPUs")
    return CombinationStatus(combination=combination, status=status, note=note,
                             records=len(mine), newest=newest)


def statuses(records: Iterable[StoredRecord]) -> dict[str, CombinationStatus]:
    """Status per combination that has records, ordered by combination id."""
    by_combination: dict[str, list[StoredRecord]] = defaultdict(list)
    for s in records:
        by_combination[s.record.combination].append(s)
    return {c: status_of(c, by_combination[c]) for c in sorted(by_combination)}
