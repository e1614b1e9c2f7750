"""The resolver core: enumerate feasible combinations in rank order.

Ranking (documented in docs/commands.md, "Ranking") is lexicographic: newest framework release, then
newest torch, then newest CUDA among those requested, then the Python preference in
policy.toml, then the OS preference. The domains are sorted in that order once and walked as
nested loops, so combinations come out already ranked and a request for the top N stops
after N. Every compatibility check is a small function returning ``None`` (ok) or a reason;
the same loop, given a ``Tally``, counts which check removed how many candidates.
"""

from __future__ import annotations

import re
from collections import Counter, namedtuple
from collections.abc import Callable, Iterable, Iterator

from envgen.facts.model import CudaToolkit, Facts, FrameworkRelease, TorchBuild
from envgen.resolve.checks import Checks
from envgen.resolve.request import Request, cuda_matches, matcher
from envgen.versions import dotted_key, parse_version, python_key

# constraint name → what it means, in the order checks run
CONSTRAINTS = {
    "framework-torch": "the framework release's torch requirement (metadata, build code, "
                       "curated)",
    "framework-cuda": "the framework's CUDA requirement (build code, curated)",
    "nvcc": "an nvcc the release's own check accepts for torch's CUDA (equal, or a minor "
            "mismatch its allow-list names)",
    "cxx-std": "the framework's -std=c++NN flags ≥ the C++ standard torch's headers require",
    "gpu-arch": "the GPU architecture in nvcc's list, in the torch build's arch list and read "
                "as that arch by the framework's op builder",
    "driver": "the driver ≥ the CUDA runtime's minor-version-compatibility floor",
    "flavor": "a toolchain for torch's CUDA in the requested lock flavor (toolchain.toml)",
    "framework-python": "the framework release's Python requirement",
    "framework-files": "a file of the framework release for the Python and platform (a "
                       "fitting wheel, or its sdist)",
    "breakage": "a known-broken combination of framework, torch, CUDA and Python (curated)",
    "glibc": "the OS's glibc ≥ what the torch and framework wheels need",
    "gcc": "a gcc for the OS between the op build's minimum and nvcc's maximum",
    "target-python": "a Python the target has (venv flavors: this machine's Pythons, or the "
                     "base image's with --image)",
}


# The types below are internal to the resolver and made per candidate: a namedtuple is
# defined ~10x faster than a dataclass or typing.NamedTuple (import time; no typing import)
# and made faster (per row); Tally is a plain class for the same reason.

class Tally:
    """Removed-candidate counts per constraint, with one example reason each; and per torch
    build (version, CUDA) the first reason per constraint that removed any of its candidates,
    and which builds made it into a feasible combination."""

    __slots__ = ("accepted", "by_build", "examples", "removed")

    def __init__(self) -> None:
        self.removed: Counter = Counter()
        self.examples: dict[str, str] = {}
        self.by_build: dict[tuple[str, str], dict[str, str]] = {}
        self.accepted: set[tuple[str, str]] = set()

    def add(self, name: str, count: int, reason: str, group: BuildGroup | None = None) -> None:
        if count:
            self.removed[name] += count
            self.examples.setdefault(name, reason)
            if group is not None:
                self.by_build.setdefault((group.version, group.cuda), {}).setdefault(name,
                                                                                     reason)


class BuildGroup(namedtuple("BuildGroup", "version cuda entries")):
    """All builds of one torch version for one CUDA: (python, build) pairs, best Python first.
    version: str, cuda: str, entries: tuple[tuple[str, TorchBuild], ...]."""

    __slots__ = ()


class Domains(namedtuple("Domains", "frameworks groups oses")):
    """The candidate values of each axis, each in rank order: frameworks:
    tuple[FrameworkRelease, ...], groups: tuple[BuildGroup, ...], oses: tuple[OSBase, ...]."""

    __slots__ = ()


class Feasible(namedtuple("Feasible", "framework build python os toolkit gcc gcc_source "
                                      "checks")):
    """A candidate every rule accepted: what make_combination turns into a Combination.
    framework: FrameworkRelease, build: TorchBuild, python: str, os: OSBase,
    toolkit: CudaToolkit, gcc: int, gcc_source: str, checks: Checks."""

    __slots__ = ()


def _python_rank(facts: Facts):
    pref = {p: i for i, p in enumerate(facts.policy.python_preference)}

    def key(tag: str) -> tuple:
        major, minor, free = python_key(tag)
        return (free, pref.get(tag, len(pref)), -major, -minor)

    return key


def prepare(request: Request, facts: Facts) -> Domains:
    """The candidate values of each axis that the request admits, each in rank order."""
    fw_version = matcher("--framework-version", request.framework_version)
    order = {n: i for i, n in enumerate(facts.framework_names)}
    frameworks = sorted(
        (r for r in facts.frameworks
         if (request.framework is None or r.framework == request.framework)
         and (fw_version is None or fw_version(r.version))),
        key=lambda r: (order.get(r.framework, len(order)), _neg_version(r.version)),
    )
    torch_match = matcher("--torch", request.torch)
    nccl_match = matcher("--nccl", request.nccl)
    pykey = _python_rank(facts)
    by_group: dict[tuple[str, str], dict[str, TorchBuild]] = {}
    # harvested PyPI first, then other harvested indexes, then curated: first one wins a slot
    for b in sorted(facts.torch_builds, key=lambda b: (b.curated, b.index != "pypi", b.index)):
        if (b.cuda is None or b.platform != request.platform
                or not cuda_matches(request.cuda, b.cuda)
                or (torch_match and not torch_match(b.version))
                or (nccl_match and not (b.nccl and nccl_match(b.nccl)))):
            continue
        slot = by_group.setdefault((b.version, b.cuda), {})
        for py in b.python:
            if request.python is None or py == request.python:
                slot.setdefault(py, b)
    groups = [
        BuildGroup(v, c, tuple(sorted(slot.items(), key=lambda e: pykey(e[0]))))
        for (v, c), slot in by_group.items() if slot
    ]
    groups.sort(key=lambda g: (_neg_version(g.version), tuple(-x for x in dotted_key(g.cuda))))
    arch = request.platform.split("-", 1)[1]
    os_pref = {o: i for i, o in enumerate(facts.policy.os_preference)}
    oses = sorted(
        (o for o in facts.oses.values()
         if (request.os is None or o.id == request.os) and arch in o.archs),
        key=lambda o: (os_pref.get(o.id, len(os_pref)), o.id),
    )
    return Domains(tuple(frameworks), tuple(groups), tuple(oses))


_NEG: dict[str, tuple] = {}
_PLAIN = re.compile(r"\d+(?:\.\d+)*")


def _neg_version(v: str):
    key = _NEG.get(v)
    if key is None:
        if _PLAIN.fullmatch(v):  # a plain release: what packaging would say, without it
            key = _NEG[v] = (tuple(-int(x) for x in v.split(".")), False)
        else:
            pv = parse_version(v)
            key = _NEG[v] = (tuple(-x for x in pv.release), pv.is_prerelease)
    return key


def iter_feasible(request: Request, facts: Facts, tally: Tally | None = None,
                  domains: Domains | None = None, *, checks: Checks | None = None,
                  once_per_group: bool = False) -> Iterator[Feasible]:
    """Yield every feasible combination for a validated request, best first.

    With ``once_per_group`` (needs ``tally``) nothing is yielded: each torch build group is
    walked only until its first feasible combination, which marks it accepted in the tally
    (a group accepted for one framework release is skipped for the others); groups that are
    never accepted are walked in full, so their reasons are exactly those of a full walk.
    """
    d = domains or prepare(request, facts)
    checks = checks or Checks(request, facts)
    n_os = len(d.oses)
    accepted = tally.accepted if tally is not None else set()
    for fw in d.frameworks:
        for g in d.groups:
            key = (g.version, g.cuda)
            if once_per_group and key in accepted:
                continue
            weight = len(g.entries) * n_os
            if tally is None and not checks.torch_ok(fw, g.version):
                continue  # as _group_check would say, without building the reason
            name, why, toolkit = _group_check(checks, request, facts, fw, g)
            if why is not None:
                if tally is not None:
                    tally.add(name, weight, why, g)
                continue
            for py, build in g.entries:
                name, why = "target-python", request.target_python(py)
                if why is None:
                    name, why = "framework-python", checks.framework_python(fw, py)
                if why is None:
                    name, why = "framework-files", checks.framework_files(fw, py)
                if why is None:
                    name, why = "breakage", checks.breakage(fw, g.version, toolkit.cuda, py)
                if why is not None:
                    if tally is not None:
                        tally.add(name, n_os, why, g)
                    continue
                wheel = checks.wheel(fw, py)
                floor = checks.gcc_floor(fw, build, toolkit)
                for os in d.oses:
                    if request.os_pythons:
                        why = request.target_python(py, os.id)
                        if why is not None:
                            if tally is not None:
                                tally.add("target-python", 1, why, g)
                            continue
                    gcc, src = checks.os(build, wheel, os, toolkit, floor)
                    if isinstance(gcc, str):
                        if tally is not None:
                            tally.add(gcc, 1, src, g)
                        continue
                    if tally is not None:
                        accepted.add(key)
                    if once_per_group:
                        break
                    yield Feasible(fw, build, py, os, toolkit, gcc, src, checks)
                if once_per_group and key in accepted:
                    break


def _group_check(checks: Checks, request: Request, facts: Facts, fw: FrameworkRelease,
                 g: BuildGroup) -> tuple[str, str | None, CudaToolkit | None]:
    """The first rule that rules out every build of ``g`` for ``fw``: (name, reason, None);
    else ("", None, the toolkit whose nvcc builds the ops)."""
    why = checks.framework_torch(fw, g.version)
    if why is not None:
        return "framework-torch", why, None
    why = checks.framework_cuda(fw, g.cuda)
    if why is not None:
        return "framework-cuda", why, None
    toolkit, why = checks.nvcc(fw, g.cuda)
    if why is not None or toolkit is None:
        return "nvcc", why or "no nvcc", None
    build = g.entries[0][1]
    why = checks.cxx_std(fw, build, toolkit)
    if why is not None:
        return "cxx-std", why, None
    why = checks.gpu(build, toolkit) or checks.framework_arch(fw, toolkit)
    if why is not None:
        return "gpu-arch", why, None
    why = checks.driver(build, toolkit)
    if why is not None:
        return "driver", why, None
    if request.flavor and facts.toolchain and request.nvcc is None:
        why = facts.toolchain.why_not(request.flavor, g.cuda)
        if why is not None:
            return "flavor", why, None
    return "", None, toolkit


def torch_verdicts(request: Request, facts: Facts) -> list[dict]:
    """Every torch build (version, CUDA) the request admits, best first: accepted (some
    feasible combination uses it) or excluded, with the first reason per rule that removed
    its candidates. ``request`` must be validated."""
    d = prepare(request, facts)
    tally = Tally()
    for _ in iter_feasible(request, facts, tally, d, once_per_group=True):
        pass  # nothing is yielded: the walk only fills the tally
    out = []
    for g in d.groups:
        key = (g.version, g.cuda)
        row: dict = {"torch": g.version, "cuda": g.cuda, "accepted": key in tally.accepted}
        if not row["accepted"]:
            reasons = tally.by_build.get(key, {})
            row["excluded_by"] = [{"constraint": name, "reason": reasons[name]}
                                  for name in CONSTRAINTS if name in reasons]
        out.append(row)
    return out


# --- finding given combinations in the resolver's order (the ranking policy's input) -------

class Located(namedtuple("Located", "rank feasible")):
    """A feasible candidate and its place in the resolver's order: rank is (framework,
    torch build group, Python, OS) indexes into the domains, compared as a tuple — smaller is
    better, exactly the order iter_feasible yields in."""

    __slots__ = ()


def feasible_id(f: Feasible) -> str:
    """The combination id of ``f`` (= make_combination(f, ...).id, without building it)."""
    from envgen.resolve.combination import id_part, id_prefix

    arch = re.sub(r"[^A-Za-z0-9_.-]", "_", "-" + f.build.platform.split("-", 1)[-1])
    return (id_prefix(f.framework.framework, f.framework.version, f.build.version,
                      f.build.cuda, f.python) + id_part(f.os.id) + arch)[:128]


def rank_of(f: Feasible, d: Domains) -> tuple:
    """Where ``f`` stands in the resolver's order over domains ``d``."""
    g = next(i for i, g in enumerate(d.groups)
             if g.version == f.build.version and g.cuda == f.build.cuda)
    entry = next(i for i, (py, _) in enumerate(d.groups[g].entries) if py == f.python)
    return (_index(d.frameworks, f.framework), g, entry, _index(d.oses, f.os))


def _index(items: tuple, item: object) -> int:
    """``items.index(item)``, trying identity first (``item`` is one of ``items`` when it
    came from them; comparing the compiled facts' records field by field is slow)."""
    for i, x in enumerate(items):
        if x is item:
            return i
    return items.index(item)


def _first(request: Request, facts: Facts, checks: Checks, d: Domains, fi: int, gi: int,
           entries: tuple | None = None, oses: tuple | None = None) -> Located | None:
    g = d.groups[gi]
    narrow = Domains((d.frameworks[fi],), (BuildGroup(g.version, g.cuda, entries or g.entries),),
                     oses or d.oses)
    f = next(iter_feasible(request, facts, domains=narrow, checks=checks), None)
    return None if f is None else Located(rank_of(f, d), f)


def locate(request: Request, facts: Facts, ids: Iterable[str],
           cited: Iterable[tuple[Callable, Callable, Callable]] = ()
           ) -> tuple[dict[str, Located], list[Located]]:
    """For a validated request: which of ``ids`` satisfy it, each with its rank; and for each
    (framework predicate, torch-group predicate, Python predicate) of ``cited``, the best
    feasible candidate of every framework release × torch build it covers. Walks only
    those candidates (a handful), not the whole feasible set."""
    from envgen.ids import parse_combination_id

    d = prepare(request, facts)
    checks = Checks(request, facts)
    fw_at = {(fw.framework, fw.version): i for i, fw in enumerate(d.frameworks)}
    group_at = {(g.version, g.cuda): i for i, g in enumerate(d.groups)}
    os_at = {o.id: i for i, o in enumerate(d.oses)}
    found: dict[str, Located] = {}
    for cid in ids:
        p = parse_combination_id(cid)
        if p is None or p["platform"] != request.platform:
            continue
        fi, gi = fw_at.get((p["framework"], p["framework_version"])), \
            group_at.get((p["torch"], p["cuda"]))
        oi = os_at.get(p["os"])
        if fi is None or gi is None or oi is None:
            continue
        entries = tuple(e for e in d.groups[gi].entries if e[0] == p["python"])
        if not entries:
            continue
        hit = _first(request, facts, checks, d, fi, gi, entries, (d.oses[oi],))
        if hit is not None and feasible_id(hit.feasible) == cid:
            found[cid] = hit
    best: dict[tuple, Located] = {}
    for fw_ok, group_ok, python_ok in cited:
        fws = [i for i, fw in enumerate(d.frameworks) if fw_ok(fw)]
        if not fws:
            continue
        groups = [i for i, g in enumerate(d.groups) if group_ok(g)]
        for fi in fws:
            for gi in groups:
                entries = tuple(e for e in d.groups[gi].entries if python_ok(e[0]))
                hit = entries and _first(request, facts, checks, d, fi, gi, entries)
                if hit and ((fi, gi) not in best or hit.rank < best[(fi, gi)].rank):
                    best[(fi, gi)] = hit
    return found, sorted(best.values(), key=lambda h: h.rank)
