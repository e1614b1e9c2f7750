"""Resolve a request to ranked, complete combinations. Pure: facts in, values out, no I/O."""

from __future__ import annotations

from itertools import islice

from envgen.errors import InfeasibleError
from envgen.facts.model import Facts
from envgen.resolve.assemble import make_combination
from envgen.resolve.combination import Combination
from envgen.resolve.engine import CONSTRAINTS, iter_feasible
from envgen.resolve.explain import Explanation, explain, torch_verdicts
from envgen.resolve.request import Request, validate

__all__ = ["CONSTRAINTS", "Combination", "Explanation", "Request", "count_feasible", "resolve",
           "torch_verdicts"]


def resolve(request: Request, facts: Facts, *, limit: int | None = 10) -> list[Combination]:
    """The best ``limit`` combinations for ``request`` (all when ``limit`` is None).

    Raises UsageError for a malformed request and InfeasibleError, carrying an
    ``Explanation``, when nothing in the matrix satisfies it.
    """
    request = validate(request, facts)
    found = [make_combination(f, request)
             for f in islice(iter_feasible(request, facts), limit)]
    if not found:
        why = explain(request, facts, make_combination)
        raise InfeasibleError(
            f"no combination satisfies {request.flags() or 'the request'}",
            hint="relax one of the options; the nearest feasible requests are listed above",
            explanation=why,
        )
    return found


def count_feasible(request: Request, facts: Facts) -> int:
    """How many combinations satisfy ``request`` (walks them all; no objects are built)."""
    return sum(1 for _ in iter_feasible(validate(request, facts), facts))
