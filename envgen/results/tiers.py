"""Evidence tiers: how far a combination is known to work, from its records.

=====  ==========  ==============================================================================
tier   label       proven by
=====  ==========  ==============================================================================
T0     resolves    nothing run: the resolver picks it from the facts (every row starts here)
T1     locked      a passing attempt record of tier T1: the lock solves for the target
T2     built       a passing attempt record of tier T2 (the image builds, the framework's ops
                   compile for the target GPU architectures and import; no GPU), or a passing
                   verify record that ran without a GPU
T3     GPU         a passing verify record that ran on ≥ 1 GPU and checked the ops (or ran the
                   NCCL smoke test) there
T4     multi-GPU   a passing verify record on ≥ 2 GPUs whose NCCL smoke test (collectives and the
                   framework's engine steps) ran with world_size ≥ 2
=====  ==========  ==============================================================================

A combination's tier is the highest tier of its passing records. ``failed`` is the newest
failed record at a tier above that (known-bad evidence: what was tried and did not work).
The status keeps its three values, defined through the tiers:

- **known-good**: tier ≥ T3 and the newest record (by ``finished``) passed;
- **known-bad**: the newest record failed;
- **untested**: otherwise — no GPU evidence yet; the tier says how far it got.

Upstream citations (another project's CI running the combination) are shown next to the tier
but never count as one: they are not envgen's evidence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envgen.results.store import StoredRecord

TIERS = ("T0", "T1", "T2", "T3", "T4")
LABELS = {"T0": "resolves", "T1": "locked", "T2": "built", "T3": "GPU", "T4": "multi-GPU"}
MEANINGS = {
    "T0": "the resolver picks it from the facts; nothing has been run",
    "T1": "the lock solves for the target: every package pinned, with hashes",
    "T2": "the image builds, and the framework's ops compile for the target GPU architectures "
          "and import (no GPU used)",
    "T3": "on a GPU, the framework's ops run and match a reference",
    "T4": "on ≥ 2 GPUs, the NCCL smoke test (collectives and the framework's engine steps) "
          "passes",
}
GPU_TIER = "T3"  # the lowest tier that is GPU evidence (known-good needs it)

KNOWN_GOOD, KNOWN_BAD, UNTESTED = "known-good", "known-bad", "untested"
STATUSES = (KNOWN_GOOD, KNOWN_BAD, UNTESTED)


def rank(tier: str) -> int:
    """0 for T0 … 4 for T4."""
    return TIERS.index(tier)


def tier_label(tier: str) -> str:
    """``T2 built``."""
    return f"{tier} {LABELS[tier]}"


def verify_tier(record: Any) -> str:
    """The tier a verify record (schema 1) attempted — and proves, if it passed:
    T4 on ≥ 2 GPUs with an NCCL smoke test of world_size ≥ 2; T3 on ≥ 1 GPU with an op checked
    (not skipped) or an NCCL smoke test; T2 otherwise (a CPU run: ops built and loaded)."""
    gpus, smoke = record.gpu.count, record.smoke
    nccl = smoke is not None and smoke.backend == "nccl"
    if gpus >= 2 and nccl and smoke.world_size >= 2:
        return "T4"
    if gpus >= 1 and (nccl or any(op.status != "skip" for op in record.ops)):
        return "T3"
    return "T2"


@dataclass(frozen=True, slots=True, kw_only=True)
class CombinationEvidence:
    """What the records of one combination prove."""

    combination: str
    tier: str  # T0..T4: the highest tier of a passing record
    proof: StoredRecord | None  # the newest passing record of that tier (None at T0)
    failed: StoredRecord | None  # the newest failed record at a tier above ``tier``
    status: str  # known-good | known-bad | untested
    note: str | None  # why a verify run is not GPU evidence: "CPU only", "no GPU check"
    records: int
    newest: StoredRecord | None

    @property
    def tier_label(self) -> str:
        return LABELS[self.tier]

    @property
    def date(self) -> str | None:
        """The newest record's date (YYYY-MM-DD, UTC)."""
        return self.newest.summary.finished[:10] if self.newest else None

    @property
    def label(self) -> str:
        return f"{self.status} ({self.note})" if self.note else self.status

    @property
    def flavor(self) -> str | None:
        """The flavor (conda, venv, os-package) of the record that proves the tier; None when
        nothing proves it or a verify record does (it does not say)."""
        return self.proof.summary.flavor if self.proof else None

    @property
    def shown(self) -> tuple[StoredRecord, ...]:
        """The records a table row links: the proof, the failed attempt above it, and the
        newest record when it failed (known-bad) and is neither."""
        out = [s for s in (self.proof, self.failed) if s is not None]
        if self.newest is not None and self.newest.summary.status == "fail" \
                and all(s.summary.id != self.newest.summary.id for s in out):
            out.append(self.newest)
        return tuple(out)


def _key(s: StoredRecord) -> tuple:
    return (s.summary.finished_at, s.summary.id)


def evidence_of(combination: str, records: Iterable[StoredRecord]) -> CombinationEvidence:
    """The evidence of ``combination`` from its records (records of others are ignored)."""
    mine = [s for s in records if s.summary.combination == combination]
    if not mine:
        return CombinationEvidence(combination=combination, tier="T0", proof=None, failed=None,
                                   status=UNTESTED, note=None, records=0, newest=None)
    newest = max(mine, key=_key)
    passes = [s for s in mine if s.summary.status == "pass"]
    tier = max((s.summary.tier for s in passes), key=rank, default="T0")
    proof = max((s for s in passes if s.summary.tier == tier), key=_key, default=None)
    above = [s for s in mine if s.summary.status == "fail" and rank(s.summary.tier) > rank(tier)]
    failed = max(above, key=_key, default=None)
    note = None
    if newest.summary.status == "fail":
        status = KNOWN_BAD
    elif rank(tier) >= rank(GPU_TIER):
        status = KNOWN_GOOD
    else:
        status = UNTESTED
        # a verify run says why it is not GPU evidence; lock/build attempts never are (the
        # tier says how far they got)
        verified = [s for s in passes if s.summary.kind == "verify"]
        note = ("no GPU check" if any(s.summary.on_gpu for s in verified)
                else "CPU only" if verified else None)
    return CombinationEvidence(combination=combination, tier=tier, proof=proof, failed=failed,
                               status=status, note=note, records=len(mine), newest=newest)


def evidence(records: Iterable[StoredRecord]) -> dict[str, CombinationEvidence]:
    """Evidence per combination that has records, ordered by combination id."""
    by_combination: dict[str, list[StoredRecord]] = defaultdict(list)
    for s in records:
        by_combination[s.summary.combination].append(s)
    return {c: evidence_of(c, by_combination[c]) for c in sorted(by_combination)}
