"""Why a request has no solution, and the nearest requests that do have one."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations, islice

from envgen.facts.model import Facts, Toolchain
from envgen.resolve.engine import CONSTRAINTS, Domains, Tally, iter_feasible, prepare
from envgen.resolve.request import Request, cuda_matches, matcher
from envgen.versions import dotted_key, parse_version


@dataclass(frozen=True, slots=True)
class Removal:
    constraint: str
    meaning: str
    count: int
    example: str


@dataclass(frozen=True, slots=True)
class Alternative:
    relaxed: tuple[str, ...]          # request axes dropped to find it
    changes: dict[str, tuple[str, str]]  # axis → (asked, got)
    combination: object               # a Combination


@dataclass(frozen=True, slots=True)
class Explanation:
    request: Request
    empty: tuple[str, ...] = ()       # axes no candidate matched at all, with what exists
    removed: tuple[Removal, ...] = ()
    nearest: tuple[Alternative, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {
            "request": self.request.given(),
            "no_candidates": list(self.empty),
            "removed": [{"constraint": r.constraint, "meaning": r.meaning, "count": r.count,
                         "example": r.example} for r in self.removed],
            "nearest": [{"relaxed": list(a.relaxed),
                         "changes": {k: {"asked": v[0], "got": v[1]} for k, v in a.changes.items()},
                         "combination": a.combination.to_dict()} for a in self.nearest],
        }


def _empty_axes(request: Request, facts: Facts, d: Domains) -> list[str]:
    out = []
    if not d.frameworks:
        names = [request.framework] if request.framework else list(facts.framework_names)
        known = sorted({r.version for r in facts.frameworks if r.framework in names},
                       key=parse_version)
        out.append(f"no {request.framework or 'framework'} release matches "
                   f"--framework-version {request.framework_version} "
                   f"(known: {', '.join(known[:3])} … {', '.join(known[-3:])})")
    if not d.groups:
        builds = [b for b in facts.torch_builds if b.cuda and b.platform == request.platform]
        cudas = sorted({b.cuda for b in builds}, key=dotted_key)
        if request.cuda and not any(cuda_matches(request.cuda, b.cuda) for b in builds):
            out.append(f"no torch build for CUDA {request.cuda} on {request.platform} "
                       f"(known CUDA: {', '.join(cudas)})")
        elif request.torch and not any(matcher("--torch", request.torch)(b.version)
                                       for b in builds):
            versions = sorted({b.version for b in builds}, key=parse_version)
            out.append(f"no torch {request.torch} CUDA build on {request.platform} "
                       f"(known: {versions[0]} … {versions[-1]})")
        elif request.python and not any(request.python in b.python for b in builds):
            pys = sorted({p for b in builds for p in b.python})
            out.append(f"no torch CUDA build has a wheel for Python {request.python} "
                       f"(known: {', '.join(pys)})")
        else:
            out.append("no torch build matches the combination of --torch / --cuda / --python "
                       "/ --nccl / --platform given")
    if not d.oses:
        out.append(f"no OS base matches --os {request.os} on {request.platform}")
    return out


def _changes(request: Request, combo, relaxed: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    got = combo.to_dict()
    got["framework_version"], got["torch"] = combo.framework_version, combo.torch
    out = {}
    for axis, asked in request.given().items():
        if axis not in relaxed:  # still honoured by the alternative
            continue
        value = got.get(axis)
        if axis == "driver":
            value = f"≥ {combo.min_driver}"
        elif axis == "flavor":
            value = "conda"
        elif axis == "gpu_arch":
            value = "any of " + ", ".join(combo.cuda_archs[-3:]) if combo.cuda_archs else "?"
        if value is not None and str(value) != str(asked):
            out[axis] = (str(asked), str(value))
    return out


def explain(request: Request, facts: Facts, make) -> Explanation:
    """Count which constraint removed how many candidates; find the nearest feasible requests.

    ``make`` turns a ``Feasible`` into a ``Combination`` (passed in to avoid an import cycle).
    """
    d = prepare(request, facts)
    empty = _empty_axes(request, facts, d)
    tally = Tally()
    if not empty:
        for _ in iter_feasible(request, facts, tally, d):
            break
    removed = tuple(
        Removal(name, CONSTRAINTS[name], tally.removed[name], tally.examples[name])
        for name in CONSTRAINTS if tally.removed[name]
    )
    return Explanation(request, tuple(empty), removed, tuple(nearest(request, facts, make)))


def nearest(request: Request, facts: Facts, make, limit: int = 3) -> list[Alternative]:
    """Requests with one given axis dropped (then two) that do resolve, best first."""
    given = [a for a in request.given() if a != "platform"]
    out: list[Alternative] = []
    for size in (1, 2):
        for axes in combinations(reversed(given), size):
            if "os" in axes and request.flavor in Toolchain.OS_FLAVORS and "flavor" not in axes:
                continue  # the OS is the toolkit of --flavor os-package: drop both or neither
            relaxed = request.without(*axes)
            hit = next(islice(iter_feasible(relaxed, facts), 1), None)
            if hit is not None:
                combo = make(hit, relaxed)
                out.append(Alternative(axes, _changes(request, combo, axes), combo))
        if out:
            break
    return out[:limit]
