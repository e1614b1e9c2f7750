"""A combination's status, derived from its result records through the evidence tiers
(:mod:`envgen.results.tiers`, which holds the rules):

- **known-bad**: its newest record (by ``finished``, either kind) failed.
- **known-good**: its tier is T3 or T4 (a passing verify record on real GPUs) and its newest
  record passed.
- **untested**: otherwise — no GPU evidence yet; the tier (T0 resolves … T2 built) says how far
  it got (note "CPU only" when records passed, none of them on a GPU).

``CombinationStatus`` is the per-combination evidence (tier, the record proving it, the newest
failed attempt above it), so the status and the tier can never disagree.
"""

from __future__ import annotations

from envgen.results.tiers import (
    KNOWN_BAD,
    KNOWN_GOOD,
    STATUSES,
    UNTESTED,
    CombinationEvidence,
    evidence,
    evidence_of,
)

CombinationStatus = CombinationEvidence
status_of = evidence_of
statuses = evidence

__all__ = ["KNOWN_BAD", "KNOWN_GOOD", "STATUSES", "UNTESTED", "CombinationStatus", "status_of",
           "statuses"]
