"""Which combinations an evidence run tries, and at which tier.

- **T1 (lock)**: for every framework and every CUDA minor of torch, the newest combination
  that one of the given lock flavors can provide (the resolver's rank: newest framework
  release, then newest torch). The os-package flavor is tried on every OS that ships a CUDA
  toolkit package, each with its own nvcc.
- **T2 (build)**: for every framework and every build target (a flavor on an OS, with the base
  image to build on), the newest combination that target can provide.

Pure: facts in, cells out. Each cell says why it was chosen, so a run's plan can be printed
before anything slow happens (``envgen evidence --plan``).
"""

from __future__ import annotations

from dataclasses import dataclass

from envgen.errors import InfeasibleError, UsageError
from envgen.facts.model import Facts, Toolchain
from envgen.resolve import Combination, Request
from envgen.resolve.assemble import make_combination
from envgen.resolve.engine import iter_feasible
from envgen.resolve.request import validate
from envgen.versions import dotted_key, parse_version

PLATFORM = "linux-x86_64"


@dataclass(frozen=True, slots=True)
class BuildTarget:
    """Where T2 builds happen: a lock flavor on an OS, built FROM ``base``."""

    flavor: str
    os: str
    base: str

    @classmethod
    def parse(cls, text: str) -> BuildTarget:
        """``FLAVOR:OS=BASE`` (e.g. ``os-package:debian-13=local/debian:trixie``)."""
        head, sep, base = text.partition("=")
        flavor, colon, os_id = head.partition(":")
        if not (sep and colon and flavor and os_id and base):
            raise UsageError(f"--build {text!r} is not FLAVOR:OS=BASE_IMAGE",
                             hint="e.g. --build os-package:debian-13=local/debian:trixie or "
                             "--build venv:debian-12=docker.io/library/debian:12",
                             source="--build")
        return cls(flavor=flavor.strip(), os=os_id.strip(), base=base.strip())


@dataclass(frozen=True, slots=True)
class Cell:
    combination: Combination
    flavor: str
    tier: str  # "T1" lock, "T2" build
    base: str | None = None  # T2: the base image
    why: str = ""

    @property
    def id(self) -> str:
        return self.combination.id


def _requests(facts: Facts, framework: str, flavor: str, os_id: str | None) -> list[Request]:
    if flavor not in Toolchain.FLAVORS:
        raise UsageError(f"unknown flavor {flavor!r}",
                         hint=f"use one of: {', '.join(Toolchain.FLAVORS)}", source="--flavor")
    if flavor in Toolchain.OS_FLAVORS and os_id is None:
        return [Request(framework=framework, flavor=flavor, os=o, platform=PLATFORM)
                for o in sorted(facts.os_toolkits) if o in facts.oses]
    return [Request(framework=framework, flavor=flavor, os=os_id, platform=PLATFORM)]


def _newest_per_cuda(request: Request, facts: Facts, indexes: tuple[str, ...] | None
                     ) -> dict[str, Combination]:
    """The first (best-ranked) feasible combination per torch CUDA minor, with torch from
    one of ``indexes`` (None: any)."""
    request = validate(request, facts)
    found: dict[str, Combination] = {}
    for f in iter_feasible(request, facts):
        if indexes is not None and f.build.index not in indexes:
            continue
        if f.build.cuda not in found:
            found[f.build.cuda] = make_combination(f, request)
    return found


def lock_cells(facts: Facts, frameworks: tuple[str, ...], flavors: tuple[str, ...],
               indexes: tuple[str, ...] | None = None) -> list[Cell]:
    """T1: the newest combination per framework × CUDA minor, in the first flavor (in the
    order given) that provides it; torch only from ``indexes`` (names in sources.toml) when
    given, e.g. ("pypi",) where download.pytorch.org is unreachable. Among the OSes of the
    os-package flavor, the one whose toolkit is nearest torch's CUDA wins."""
    cells: list[Cell] = []
    for framework in frameworks:
        seen: set[str] = set()
        for flavor in flavors:
            best: dict[str, tuple[tuple, Combination, str]] = {}
            for request in _requests(facts, framework, flavor, None):
                for cuda, combo in _newest_per_cuda(request, facts, indexes).items():
                    key = _rank(combo)
                    if cuda not in best or key < best[cuda][0]:
                        best[cuda] = (key, combo, request.os or "")
            for cuda in sorted(best, key=dotted_key, reverse=True):
                if cuda in seen:
                    continue
                seen.add(cuda)
                _, combo, os_id = best[cuda]
                where = f" on {os_id}" if os_id else ""
                cells.append(Cell(combo, flavor, "T1",
                                  why=f"newest {framework} × CUDA {cuda} the {flavor} flavor"
                                  f"{where} can lock"))
    return cells


def _rank(c: Combination) -> tuple:
    """Newest framework release, then newest torch, then the nvcc nearest torch's CUDA."""
    nvcc, cuda = dotted_key(c.nvcc), dotted_key(c.cuda)
    distance = abs(nvcc[1] - cuda[1]) if nvcc[0] == cuda[0] else 100 + abs(nvcc[0] - cuda[0])
    return (tuple(-x for x in parse_version(c.framework_version).release),
            tuple(-x for x in parse_version(c.torch.split("+")[0]).release), distance, c.os)


def build_cells(facts: Facts, frameworks: tuple[str, ...], targets: tuple[BuildTarget, ...],
                pythons: dict[str, tuple[str, ...]], indexes: tuple[str, ...] | None = None
                ) -> list[Cell]:
    """T2: the newest combination per framework × build target. ``pythons``: OS id → the
    Pythons its base image has (curated/images.toml); the venv and os-package flavors build
    on the OS's Python, so only those are tried."""
    cells: list[Cell] = []
    for framework in frameworks:
        for target in targets:
            best = None
            # the venv and os-package flavors build on the base's Python; conda brings its own
            choices = (pythons.get(target.os, (None,)) if target.flavor != "conda" else (None,))
            for python in choices:
                request = Request(framework=framework, flavor=target.flavor, os=target.os,
                                  python=python, platform=PLATFORM)
                try:
                    request = validate(request, facts)
                    feasible = next((f for f in iter_feasible(request, facts)
                                     if indexes is None or f.build.index in indexes), None)
                except InfeasibleError:
                    feasible = None
                if feasible is not None:
                    best = make_combination(feasible, request)
                    break
            if best is None:
                continue
            combo = best
            cells.append(Cell(combo, target.flavor, "T2", base=target.base,
                              why=f"newest {framework} the {target.flavor} flavor on "
                              f"{target.os} can build"))
    return cells
