"""The recommendation policy: which of the combinations that satisfy a request comes first.

One function, :func:`policy_key`, orders combinations for the CLI, the API, ``envgen table``
and the selector's data. Its inputs: where the resolver puts the combination (newest framework
release, then torch, CUDA, Python, OS: ``envgen.resolve.engine``) and the combination's
:class:`Standing` (its records' tier and status, :mod:`envgen.results.tiers`, and the upstream
citations that cover it, matrix/curated/upstream.toml).

``--prefer verified`` (the default), best first:

1. known-good at T4, then at T3 (a GPU run whose newest record passed);
2. cited by upstream (the framework's CI, its containers, NVIDIA's release notes ran this
   framework release with this torch and CUDA on GPUs) with no record of envgen's above T2;
3. T2 built, then T1 locked (envgen built or locked exactly this combination, no GPU);
4. everything else (T0: nothing run), in the resolver's order;
5. known-bad last (its newest record failed): never first while anything else fits.

Within each step, the higher tier first (an upstream-cited combination envgen also built
comes before one it only locked), then the resolver's order. ``--prefer newest``: the
resolver's order, known-bad still last. ``--min-tier T2|T3|T4`` keeps only combinations
whose tier is at least that and whose newest record passed (upstream is not a tier).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from envgen.errors import InfeasibleError, UsageError
from envgen.results.tiers import (
    KNOWN_BAD,
    KNOWN_GOOD,
    LABELS,
    TIERS,
    UNTESTED,
    CombinationEvidence,
    evidence,
    rank,
)

if TYPE_CHECKING:
    from envgen.facts.model import Facts
    from envgen.resolve import Combination, Request
    from envgen.results.store import StoredRecord

PREFER = ("verified", "newest")
DEFAULT_PREFER = "verified"
MIN_TIERS = ("T2", "T3", "T4")

# --prefer verified: the evidence steps, best first (the module docstring says why)
STEPS = ("T4", "T3", "upstream", "T2", "T1", "T0", "known-bad")


@dataclass(frozen=True, slots=True)
class Standing:
    """What is known of one combination: envgen's records (tier, status, the record proving
    the tier, the newest failed one above it) and the upstream citations covering it."""

    combination: str
    evidence: CombinationEvidence | None  # None: no record
    upstream: tuple = ()  # envgen.facts.upstream.Upstream

    @property
    def tier(self) -> str:
        return self.evidence.tier if self.evidence else "T0"

    @property
    def status(self) -> str:
        return self.evidence.status if self.evidence else UNTESTED

    @property
    def step(self) -> str:
        """Its step in the verified policy (STEPS)."""
        if self.status == KNOWN_BAD:
            return "known-bad"
        if self.status == KNOWN_GOOD:
            return self.tier
        return "upstream" if self.upstream else self.tier

    def meets(self, min_tier: str | None) -> bool:
        return min_tier is None or (self.status != KNOWN_BAD and rank(self.tier) >= rank(min_tier))

    def line(self) -> str:
        """``T3 GPU, known-good: 2026-11-27 on 1× NVIDIA H200, … (record 247300c7c4b5)`` or
        ``T0 resolves: no evidence yet``; upstream citations and a failure after it."""
        head = f"{self.tier} {LABELS[self.tier]}, {self.status}"
        ev = self.evidence
        if ev is not None and ev.proof is not None:
            head += f": {_record(ev.proof)}"
        elif ev is None or ev.newest is None:
            head += ": no evidence yet"
        bad = None
        if ev is not None:
            bad = ev.failed or (ev.newest if ev.status == KNOWN_BAD else None)
        if bad is not None and bad is not ev.proof:
            head += f"; {bad.summary.tier} failed {_record(bad)}"
        if self.upstream:
            u = self.upstream[0]
            more = f" (+{len(self.upstream) - 1} more)" if len(self.upstream) > 1 else ""
            head += f"; upstream: {u.kind} ({u.observed}){more}"
        return head

    def to_dict(self) -> dict[str, Any]:
        """The JSON ``tier`` of a combination: separate from the facts' provenance."""
        ev = self.evidence
        records = [] if ev is None else [_record_dict(s) for s in ev.shown]
        return {"tier": self.tier, "label": f"{self.tier} {LABELS[self.tier]}",
                "status": self.status, "step": self.step, "records": records,
                "upstream": [u.to_dict() for u in self.upstream],
                "summary": self.line()}


def _record(s: StoredRecord) -> str:
    m = s.summary
    return f"{m.finished[:10]} on {m.machine_summary} (record {m.id[:12]})"


def _record_dict(s: StoredRecord) -> dict[str, Any]:
    m = s.summary
    return {"id": m.id, "kind": m.kind, "tier": m.tier, "status": m.status,
            "date": m.finished[:10], "finished": m.finished, "machine": m.machine_summary,
            "envgen_version": m.envgen_version, "path": str(s.path)}


def policy_key(standing: Standing, order: tuple, prefer: str = DEFAULT_PREFER) -> tuple:
    """THE ranking policy: sort combinations by this key, smallest first. ``order``: the
    combination's place in the resolver's order (any tuple that sorts the same way)."""
    if prefer == "newest":
        return (standing.status == KNOWN_BAD, order)
    return (STEPS.index(standing.step), -rank(standing.tier), order)


def check_options(prefer: str, min_tier: str | None) -> None:
    if prefer not in PREFER:
        raise UsageError(f"--prefer {prefer!r} is not one of {', '.join(PREFER)}",
                         hint="--prefer verified (default) or --prefer newest",
                         source="--prefer")
    if min_tier is not None and min_tier not in MIN_TIERS:
        raise UsageError(f"--min-tier {min_tier!r} is not one of {', '.join(MIN_TIERS)}",
                         hint="--min-tier T2 (built), T3 (GPU) or T4 (multi-GPU)",
                         source="--min-tier")


class Evidence:
    """The records and citations of a matrix, indexed per combination."""

    def __init__(self, records: Iterable[StoredRecord] = (), upstream: Sequence = ()) -> None:
        self.by_id = evidence(records)
        self.upstream = tuple(upstream)

    def standing(self, cid: str, framework: str, version: str, torch: str, cuda: str,
                 python: str | None = None) -> Standing:
        cites = tuple(u for u in self.upstream
                      if u.matches(framework, version, torch, cuda, python))
        return Standing(cid, self.by_id.get(cid), cites)

    def of(self, c: Combination) -> Standing:
        return self.standing(c.id, c.framework, c.framework_version, c.torch, c.cuda,
                             c.python)

    def of_id(self, cid: str) -> Standing:
        """The standing of a combination known only by its id (a lock's, a record's)."""
        from envgen.ids import parse_combination_id

        p = parse_combination_id(cid)
        if p is None:
            return Standing(cid, self.by_id.get(cid))
        return self.standing(cid, p["framework"], p["framework_version"], p["torch"],
                             p["cuda"], p["python"])

    def citations(self) -> list[tuple]:
        """(framework, torch group, Python) predicates per citation, for engine.locate."""
        from envgen.versions import spec_contains

        def preds(u):
            return (lambda fw: fw.framework == u.framework  # (facts' names are canonical)
                    and u.covers_release(fw.framework, fw.version),
                    lambda g: u.covers_build(g.version, g.cuda),
                    lambda py: u.python is None or spec_contains(u.python, py.rstrip("t")))

        return [preds(u) for u in self.upstream]


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why ``--min-tier`` left nothing: the request's combinations nearest to that tier."""

    min_tier: str
    nearest: tuple  # (Combination, Standing), best evidence first

    def text(self) -> str:
        lines = [f"No combination for this request has evidence at {self.min_tier} or above "
                 "(its newest record passing)."]
        if self.nearest:
            lines.append("Nearest to verified (the request's best evidence first):")
            for c, s in self.nearest:
                lines += [f"  {c.id}", f"      {s.line()}"]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"min_tier": self.min_tier,
                "nearest": [{"id": c.id, "tier": s.to_dict()} for c, s in self.nearest]}


def ranked(request: Request, facts: Facts, known: Evidence, *, prefer: str = DEFAULT_PREFER,
           min_tier: str | None = None, limit: int | None = None
           ) -> Iterator[tuple[Combination, Standing]]:
    """The combinations satisfying ``request`` in the policy's order, each with its standing.
    Raises UsageError (a bad request or option), InfeasibleError (nothing fits; with
    ``min_tier``: nothing at that tier, explained by a :class:`Shortfall`)."""
    from envgen.resolve import iter_resolve
    from envgen.resolve.assemble import make_combination
    from envgen.resolve.engine import feasible_id, locate
    from envgen.resolve.request import validate

    check_options(prefer, min_tier)
    stream = iter_resolve(request, facts)  # raises when nothing fits at all
    checked = validate(request, facts)
    found, cited = locate(checked, facts, known.by_id, known.citations())
    special: dict[str, tuple] = {}
    for located in chain(found.values(), cited):
        f = located.feasible
        cid = feasible_id(f)
        st = known.standing(cid, f.framework.framework, f.framework.version, f.build.version,
                            f.build.cuda, f.python)
        special[cid] = (policy_key(st, located.rank, prefer), located, st)
    order = sorted(special.values(), key=lambda e: e[0])
    if min_tier is not None:
        head = [(make_combination(loc.feasible, checked), st) for _, loc, st in order
                if st.meets(min_tier)]
        if not head:
            nearest = tuple((make_combination(loc.feasible, checked), st)
                            for _, loc, st in order if st.status != KNOWN_BAD)[:5]
            raise InfeasibleError(
                f"nothing for {checked.flags() or 'the request'} has evidence at {min_tier}",
                hint="drop --min-tier (the best untested combination), or ask for one of the "
                     "combinations listed", explanation=Shortfall(min_tier, nearest))
        return islice(iter(head), limit)
    bad = [(loc, st) for _, loc, st in order if st.status == KNOWN_BAD]
    if prefer == "newest":
        head, skip = [], {st.combination for _, st in bad}
    else:
        head = [(loc, st) for _, loc, st in order
                if st.status != KNOWN_BAD and st.step != "T0"]
        skip = set(special)
    rest = ((c, known.of(c)) for c in stream if c.id not in skip)
    out = chain(((make_combination(loc.feasible, checked), st) for loc, st in head), rest,
                ((make_combination(loc.feasible, checked), st) for loc, st in bad))
    return islice(out, limit)


__all__ = ["DEFAULT_PREFER", "MIN_TIERS", "PREFER", "STEPS", "TIERS", "Evidence", "Shortfall",
           "Standing", "check_options", "policy_key", "ranked"]
