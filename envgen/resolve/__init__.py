"""The resolve stage: a request and the facts → ranked, complete combinations. Pure: facts
in, values out, no I/O.

Inputs: a :class:`Request` (any subset of the axes) and ``Facts`` (envgen.facts). Outputs:
:func:`iter_resolve` / :func:`resolve` (combinations, best first), :func:`count_feasible`,
:func:`torch_verdicts` (every torch build the request admits, accepted or excluded, with the
rule's reason), :func:`decisions` (what decided each value of a combination), and
``InfeasibleError`` carrying an :class:`Explanation` when nothing fits.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, islice, repeat

from envgen.errors import InfeasibleError
from envgen.facts.model import Facts
from envgen.resolve.assemble import make_combination
from envgen.resolve.combination import Combination
from envgen.resolve.engine import CONSTRAINTS, iter_feasible, torch_verdicts
from envgen.resolve.request import Request, validate

__all__ = ["CONSTRAINTS", "Combination", "Decision", "Explanation", "Request", "count_feasible",
           "decisions", "iter_resolve", "resolve", "torch_verdicts"]


def iter_resolve(request: Request, facts: Facts, limit: int | None = None
                 ) -> Iterator[Combination]:
    """The best ``limit`` combinations for ``request`` (all when ``limit`` is None), best
    first, each built only when it is reached (a caller streaming them holds one at a time).

    Checks run at the call, not at the first ``next()``: raises UsageError for a malformed
    request and InfeasibleError, carrying an ``Explanation``, when nothing satisfies it.
    """
    request = validate(request, facts)
    feasible = islice(iter_feasible(request, facts), limit)
    first = next(feasible, None)
    if first is None:
        from envgen.resolve.explain import explain

        why = explain(request, facts, make_combination)
        raise InfeasibleError(
            f"no combination satisfies {request.flags() or 'the request'}",
            hint="relax one of the options; the nearest feasible requests are listed above",
            explanation=why,
        )
    return map(make_combination, chain((first,), feasible), repeat(request))


def resolve(request: Request, facts: Facts, *, limit: int | None = 10) -> list[Combination]:
    """The best ``limit`` combinations for ``request`` (all when ``limit`` is None), as a
    list; see :func:`iter_resolve`."""
    return list(iter_resolve(request, facts, limit))


def count_feasible(request: Request, facts: Facts) -> int:
    """How many combinations satisfy ``request`` (walks them all; no objects are built)."""
    return sum(1 for _ in iter_feasible(validate(request, facts), facts))


def __getattr__(name: str):
    """The explanation and decision parts load on first use (most runs need neither)."""
    if name == "Explanation":
        from envgen.resolve import explain

        return getattr(explain, name)
    if name in ("Decision", "decisions"):
        from envgen.resolve import why

        return getattr(why, name)
    raise AttributeError(f"module 'envgen.resolve' has no attribute {name!r}")
