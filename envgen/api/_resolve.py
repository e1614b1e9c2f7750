"""``resolve()``: a request → the ranked combinations that satisfy it, the torch builds it
admits (each accepted or excluded, with the rule's reason), and for the best one what decided
each of its versions (envgen.resolve.why). Pure over the matrix's facts; nothing is printed.

When nothing fits it raises InfeasibleError carrying the Explanation (which constraint removed
what, the nearest feasible requests).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from envgen.facts.matrix import Matrix
from envgen.progress import Progress, quiet
from envgen.resolve import Combination, Request, iter_resolve, torch_verdicts
from envgen.resolve.request import validate
from envgen.resolve.why import Decision, decisions


@dataclass(frozen=True, slots=True)
class ResolveResult:
    """The best combination (``best``, with ``why``), and all the ranked ones. With no limit,
    ``combinations`` is a one-shot iterator (streamed: never all in memory at once)."""

    request: Request  # as checked: --gpu turned into its arch, names normalised
    best: Combination
    why: tuple[Decision, ...]
    combinations: Iterable[Combination] = field(repr=False)
    _facts: object = field(repr=False, compare=False, default=None)

    def torch_builds(self) -> list[dict]:
        """Every torch build the request admits, accepted or excluded with the reason."""
        return torch_verdicts(self.request, self._facts)


def resolve(request: Request, *, limit: int | None = 10, matrix: Matrix | None = None,
            progress: Progress = quiet) -> ResolveResult:
    """The best ``limit`` combinations for ``request`` (all when None). Raises UsageError for a
    malformed request, InfeasibleError (with its explanation) when nothing fits."""
    matrix = matrix or Matrix.locate()
    facts = matrix.facts
    found: Iterator[Combination] = iter(iter_resolve(request, facts, limit=limit))
    best = next(found)  # iter_resolve raised InfeasibleError if there is none
    checked = validate(request, facts)
    rest: Iterable[Combination] = itertools.chain([best], found)
    if limit is not None:
        rest = tuple(rest)
    return ResolveResult(request=checked, best=best, why=decisions(checked, facts, best),
                         combinations=rest, _facts=facts)
