"""The resolver core: enumerate feasible combinations in rank order.

Ranking (documented in README "Ranking") is lexicographic: newest framework release, then
newest torch, then newest CUDA among those requested, then the Python preference in
policy.toml, then the OS preference. The domains are sorted in that order once and walked as
nested loops, so combinations come out already ranked and a request for the top N stops
after N. Every compatibility check is a small function returning ``None`` (ok) or a reason;
the same loop, given a ``Tally``, counts which check removed how many candidates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from envgen.facts.model import CudaToolkit, Facts, FrameworkRelease, OSBase, TorchBuild
from envgen.resolve.request import Request, cuda_matches, matcher
from envgen.versions import dotted_key, parse_version, python_key, python_version, spec_contains

# constraint name → what it means, in the order checks run
CONSTRAINTS = {
    "framework-torch": "the framework release's torch requirement",
    "framework-cuda": "the framework's CUDA requirement (curated)",
    "nvcc": "an nvcc for torch's CUDA (exact, or a minor mismatch the framework accepts)",
    "gpu-arch": "the GPU architecture supported by that nvcc",
    "driver": "the driver ≥ the CUDA runtime's minimum",
    "flavor": "a toolchain for torch's CUDA in the requested lock flavor (toolchain.toml)",
    "framework-python": "the framework release's Python requirement",
    "glibc": "the OS's glibc ≥ the torch wheel's manylinux glibc",
    "gcc": "a gcc for the OS within nvcc's maximum host compiler",
}


@dataclass
class Tally:
    """Removed-candidate counts per constraint, with one example reason each."""

    removed: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, count: int, reason: str) -> None:
        if count:
            self.removed[name] += count
            self.examples.setdefault(name, reason)


@dataclass(frozen=True, slots=True)
class BuildGroup:
    """All builds of one torch version for one CUDA: (python, build) pairs, best Python first."""

    version: str
    cuda: str
    entries: tuple[tuple[str, TorchBuild], ...]


@dataclass(frozen=True, slots=True)
class Domains:
    frameworks: tuple[FrameworkRelease, ...]
    groups: tuple[BuildGroup, ...]
    oses: tuple[OSBase, ...]


@dataclass(frozen=True, slots=True)
class Feasible:
    framework: FrameworkRelease
    build: TorchBuild
    python: str
    os: OSBase
    toolkit: CudaToolkit
    gcc: int
    gcc_source: str


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


def _neg_version(v: str):
    key = _NEG.get(v)
    if key is None:
        pv = parse_version(v)
        key = _NEG[v] = (tuple(-x for x in pv.release), pv.is_prerelease)
    return key


class Checks:
    """The compatibility rules, memoized per request (facts are immutable)."""

    def __init__(self, request: Request, facts: Facts) -> None:
        self.request = request
        self.facts = facts
        self._nvcc: dict[tuple, tuple[CudaToolkit | None, str | None]] = {}
        self._os: dict[tuple, tuple[int, str] | str] = {}

    def _constraints(self, fw: FrameworkRelease):
        return [c for c in self.facts.constraints
                if c.framework == fw.framework and spec_contains(c.versions or "", fw.version)]

    def framework_torch(self, fw: FrameworkRelease, version: str) -> str | None:
        spec = fw.requires_torch or ""
        if not spec_contains(spec, version):
            return f"{fw.framework} {fw.version} requires torch{spec}, not {version}"
        for c in self._constraints(fw):
            if c.requires_torch and not spec_contains(c.requires_torch, version):
                return (f"{fw.framework} {fw.version} needs torch{c.requires_torch} "
                        f"(curated: {c.source})")
        return None

    def framework_cuda(self, fw: FrameworkRelease, cuda: str) -> str | None:
        for c in self._constraints(fw):
            if c.requires_cuda and not spec_contains(c.requires_cuda, cuda):
                return (f"{fw.framework} {fw.version} needs CUDA{c.requires_cuda} "
                        f"(curated: {c.source})")
        return None

    def nvcc(self, fw: FrameworkRelease, cuda: str) -> tuple[CudaToolkit | None, str | None]:
        """The toolkit whose nvcc builds the ops: torch's CUDA exactly, else an accepted minor."""
        key = (fw.framework, fw.version, cuda)
        hit = self._nvcc.get(key)
        if hit is None:
            hit = self._nvcc[key] = self._select_nvcc(fw, cuda)
        return hit

    def _select_nvcc(self, fw: FrameworkRelease, cuda: str):
        toolkits = self.facts.toolkits
        if cuda in toolkits:
            return toolkits[cuda], None
        major = int(cuda.split(".")[0])
        for rule in self.facts.mismatch_rules:
            if (rule.framework == fw.framework and rule.major == major and cuda in rule.ok
                    and spec_contains(rule.versions or "", fw.version)):
                usable = [c for c in rule.ok if c in toolkits]
                if usable:  # the nearest minor; between two equally near, the newer
                    minor = dotted_key(cuda)[1]
                    best = min(usable, key=lambda c: (abs(dotted_key(c)[1] - minor),
                                                      -dotted_key(c)[1]))
                    return toolkits[best], None
        return None, f"no nvcc for CUDA {cuda} in the matrix, and {fw.framework} {fw.version} " \
                     f"accepts no other minor version"

    def toolkit(self, toolkit: CudaToolkit, cuda: str) -> tuple[str, str] | None:
        """(constraint, reason) if the GPU arch or the driver rules the toolkit/runtime out."""
        arch = self.request.gpu_arch
        if arch and arch not in toolkit.archs:
            return "gpu-arch", f"nvcc {toolkit.cuda} cannot target {arch}"
        driver = self.request.driver
        if driver:
            runtime = self.facts.toolkits.get(cuda)
            need = runtime.min_driver if runtime else None
            if need is None:
                return "driver", f"no minimum driver known for CUDA {cuda}"
            if dotted_key(driver) < dotted_key(need):
                return "driver", f"CUDA {cuda} needs driver ≥ {need}, have {driver}"
        return None

    def framework_python(self, fw: FrameworkRelease, python: str) -> str | None:
        num = python_version(python)
        if fw.requires_python and not spec_contains(fw.requires_python, num):
            return f"{fw.framework} {fw.version} requires Python{fw.requires_python}"
        for c in self._constraints(fw):
            if c.requires_python and not spec_contains(c.requires_python, num):
                return f"{fw.framework} {fw.version} needs Python{c.requires_python} (curated)"
        return None

    def os(self, build: TorchBuild, os: OSBase, toolkit: CudaToolkit):
        """(gcc, where it comes from) or (constraint, reason)."""
        key = (build.glibc, os.id, toolkit.cuda)
        hit = self._os.get(key)
        if hit is None:
            hit = self._os[key] = self._check_os(build, os, toolkit)
        return hit

    def _check_os(self, build: TorchBuild, os: OSBase, toolkit: CudaToolkit):
        if build.glibc and dotted_key(os.glibc) < dotted_key(build.glibc):
            return ("glibc", f"{os.id} has glibc {os.glibc}; torch {build.version} wheels "
                             f"need ≥ {build.glibc}")
        top = toolkit.max_gcc
        if top is None or os.gcc <= top:
            return (os.gcc, "os")
        packaged = [g for g in os.gcc_available if g <= top]
        if packaged:
            return (max(packaged), "os-package")
        conda = [g for g in self.facts.policy.conda_gcc if g <= top]
        if conda:
            return (max(conda), "conda-forge")
        return ("gcc", f"{os.id} offers gcc {os.gcc}; nvcc {toolkit.cuda} accepts gcc ≤ {top}")


def iter_feasible(request: Request, facts: Facts, tally: Tally | None = None,
                  domains: Domains | None = None) -> Iterator[Feasible]:
    """Yield every feasible combination for a validated request, best first."""
    d = domains or prepare(request, facts)
    checks = Checks(request, facts)
    n_os = len(d.oses)
    for fw in d.frameworks:
        for g in d.groups:
            weight = len(g.entries) * n_os
            why = checks.framework_torch(fw, g.version)
            name = "framework-torch"
            if why is None:
                why, name = checks.framework_cuda(fw, g.cuda), "framework-cuda"
            toolkit = None
            if why is None:
                toolkit, why = checks.nvcc(fw, g.cuda)
                name = "nvcc"
            if why is None:
                bad = checks.toolkit(toolkit, g.cuda)
                if bad:
                    name, why = bad
            if why is None and request.flavor and facts.toolchain:
                why, name = facts.toolchain.why_not(request.flavor, g.cuda), "flavor"
            if why is not None:
                if tally is not None:
                    tally.add(name, weight, why)
                continue
            for py, build in g.entries:
                why = checks.framework_python(fw, py)
                if why is not None:
                    if tally is not None:
                        tally.add("framework-python", n_os, why)
                    continue
                for os in d.oses:
                    gcc, src = checks.os(build, os, toolkit)
                    if isinstance(gcc, str):
                        if tally is not None:
                            tally.add(gcc, 1, src)
                        continue
                    yield Feasible(fw, build, py, os, toolkit, gcc, src)
