"""``resolve()``: a request → the combinations that satisfy it in the ranking policy's order
(envgen.results.ranking: the evidence of the result records and upstream citations, then the
resolver's newest-first order), each with its evidence (``standing``), the torch builds it
admits (each accepted or excluded, with the rule's reason), and for the best one what decided
each of its versions (envgen.resolve.why). Nothing is printed.

When nothing fits it raises InfeasibleError carrying the Explanation (which constraint removed
what, the nearest feasible requests).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from envgen.facts.matrix import Matrix
from envgen.progress import Progress, quiet
from envgen.resolve import Combination, Request, torch_verdicts
from envgen.resolve.request import validate
from envgen.resolve.why import Decision, decisions
from envgen.results.ranking import DEFAULT_PREFER, Evidence, Standing, ranked


@dataclass(frozen=True, slots=True)
class ResolveResult:
    """The best combination (``best``, with ``why``), and all the ranked ones. With no limit,
    ``combinations`` is a one-shot iterator (streamed: never all in memory at once)."""

    request: Request  # as checked: --gpu turned into its arch, names normalised
    best: Combination
    why: tuple[Decision, ...]
    combinations: Iterable[Combination] = field(repr=False)
    _facts: object = field(repr=False, compare=False, default=None)
    known: Evidence | None = field(repr=False, compare=False, default=None)
    prefer: str = DEFAULT_PREFER
    min_tier: str | None = None

    def standing(self, c: Combination) -> Standing:
        """The evidence of ``c``: its records' tier and status, the upstream citations."""
        return (self.known or Evidence()).of(c)

    def torch_builds(self) -> list[dict]:
        """Every torch build the request admits, accepted or excluded with the reason."""
        return torch_verdicts(self.request, self._facts)


def known_evidence(matrix: Matrix) -> Evidence:
    """The records of the shipped results and the user's data dir, and the upstream
    citations: what the ranking policy weighs."""
    from envgen.results.store import load_many

    return Evidence(load_many(matrix.results_dirs()), matrix.upstream)


def resolve(request: Request, *, limit: int | None = 10, matrix: Matrix | None = None,
            progress: Progress = quiet, prefer: str = DEFAULT_PREFER,
            min_tier: str | None = None) -> ResolveResult:
    """The best ``limit`` combinations for ``request`` (all when None), in the ranking
    policy's order (``prefer``: verified | newest; ``min_tier``: T2 | T3 | T4 keeps only
    those). Raises UsageError for a malformed request, InfeasibleError (with its explanation)
    when nothing fits."""
    matrix = matrix or Matrix.locate()
    facts = matrix.facts
    known = known_evidence(matrix)
    pairs = ranked(request, facts, known, prefer=prefer, min_tier=min_tier, limit=limit)
    found: Iterator[Combination] = (c for c, _ in pairs)
    best = next(found)  # ranked raised InfeasibleError if there is none
    checked = validate(request, facts)
    rest: Iterable[Combination] = itertools.chain([best], found)
    if limit is not None:
        rest = tuple(rest)
    return ResolveResult(request=checked, best=best, why=decisions(checked, facts, best),
                         combinations=rest, _facts=facts, known=known, prefer=prefer,
                         min_tier=min_tier)
