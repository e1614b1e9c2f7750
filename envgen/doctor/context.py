"""What a doctor rule reads: the :class:`Context` of one judged environment (the snapshot, the
matrix's facts, the catalog, the frameworks judged for, with memoized lookups) and the small
version helpers the rules share. Rules (``rules_*.py``) and the judge import it; it imports
neither.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envgen.doctor.catalog import Catalog
from envgen.doctor.findings import Finding, Need
from envgen.doctor.snapshot import UNKNOWN, Snapshot
from envgen.facts.model import CudaToolkit, Facts, FrameworkRelease, TorchBuild
from envgen.resolve.checks import Checks
from envgen.resolve.request import Request
from envgen.versions import parse_version

FRAMEWORK_ALIASES = {"megatron_core": "megatron-core", "megatron": "megatron-core",
                     "colossal-ai": "colossalai", "colossal_ai": "colossalai"}
_SPLIT = re.compile(r"[\s_-]+")


def major_minor(version: str) -> str:
    """``12.1.105`` → ``12.1``; ``13`` → ``13``."""
    return ".".join(version.split("+")[0].split(".")[:2])


def public(version: str) -> str:
    return version.split("+", 1)[0]


def known(value: Any) -> bool:
    return value is not UNKNOWN and value is not None


@dataclass
class Context:
    """Everything a rule reads; memoized lookups into the facts."""

    snapshot: Snapshot
    facts: Facts
    catalog: Catalog
    frameworks: dict[str, str | None]  # framework → version (None: unknown)
    ops: tuple[str, ...] = ()
    python: str = "python"  # the interpreter fix commands name
    index_urls: dict[str, str] = field(default_factory=dict)  # torch index name → URL
    findings: list[Finding] = field(default_factory=list)
    needs: list[Need] = field(default_factory=list)
    made: dict[str, Request] = field(default_factory=dict)  # `envgen make …` → its request
    # the build whose CUDA the snapshot's torch_cuda was taken from: an old torch release that
    # named no CUDA, judged as PyPI's default build of it, or a bare torch on Windows, judged
    # as PyPI's win_amd64 build (platform "windows-x86_64", CPU-only) (judge.py)
    assumed_build: TorchBuild | None = None
    # facts a pasted report states two values of (Report.disputed): fact → "value (where)", the
    # judged one first
    disputed: dict[str, tuple[str, ...]] = field(default_factory=dict)

    # ---------------------------------------------------------------- reporting

    def finding(self, kind: str, summary: str, *, evidence: dict[str, Any], fix: str,
                command: str | None = None, severity: str | None = None,
                source: str | None = None, explains: str | None = None) -> Finding:
        """A finding of ``kind``, its severity, citation and pattern from the catalog unless
        the rule gives a more specific ``source`` (the fact's own citation); ``explains``: the
        pasted error line it is the cause of, where the rule knows it (else the judge picks
        one by kind)."""
        k = self.catalog.kind(kind)
        sources = [s for s in (source, k.source) if s]
        f = Finding(kind=kind, severity=severity or k.severity, summary=summary,
                    evidence={n: v for n, v in evidence.items() if v is not UNKNOWN},
                    fix=fix, command=command, source=" ; ".join(dict.fromkeys(sources)),
                    pattern=k.pattern, make=self.made.get(command) if command else None,
                    explains=explains)
        self.findings.append(f)
        return f

    def need(self, fact: str, why: str, how: str) -> None:
        if not any(n.fact == fact for n in self.needs):
            self.needs.append(Need(fact=fact, why=why, how=how))

    @property
    def shell_python(self) -> str:
        """The interpreter as printed commands name it: quoted for the shell."""
        return shlex.quote(self.python)

    def pip(self, *args: str) -> str:
        return " ".join([shlex.quote(self.python), "-m", "pip", *map(shlex.quote, args)])

    # ---------------------------------------------------------------- facts

    @property
    def s(self) -> Snapshot:
        return self.snapshot

    @property
    def platform(self) -> str:
        p = self.s.platform
        return p if p in ("linux-x86_64", "linux-aarch64") else "linux-x86_64"

    @functools.cached_property
    def checks(self) -> Checks:
        return Checks(Request(platform=self.platform), self.facts)

    def releases(self, framework: str) -> tuple[FrameworkRelease, ...]:
        """The releases the snapshot's ``framework`` may be: its version's, else all."""
        version = self.frameworks.get(framework)
        every = tuple(r for r in self.facts.frameworks if r.framework == framework)
        if version is None:
            return every
        exact = tuple(r for r in every if r.version == public(version))
        if not exact:
            try:
                exact = tuple(r for r in every
                              if parse_version(r.version) == parse_version(public(version)))
            except Exception:  # an unparseable version: no release matches it
                exact = ()
        return exact

    @functools.cached_property
    def torch_builds(self) -> tuple[TorchBuild, ...]:
        """The matrix's builds of the snapshot's torch (same version; same CUDA when known):
        harvested ones, else the reference builds of older releases (curated rows only)."""
        torch = self.s.torch
        if not known(torch):
            return ()
        version = public(torch)
        same = [b for b in (*self.facts.torch_builds, *self.facts.reference_builds)
                if b.version == version and b.platform == self.platform]
        cuda = self.s.torch_cuda
        if cuda is not UNKNOWN:
            want = major_minor(cuda) if cuda else None
            same = [b for b in same if b.cuda == want]
        # the build whose wheels are for this Python first (a release's cp312 wheels can be
        # a build of their own, with their own glibc floor)
        python = major_minor(self.s.python) if known(self.s.python) else None
        same.sort(key=lambda b: (python is not None and python not in (b.python or ()),
                                 b.index != "pypi", b.curated))
        return tuple(same)

    @property
    def torch_build(self) -> TorchBuild | None:
        return self.torch_builds[0] if self.torch_builds else None

    def toolkit(self, cuda: str | None) -> CudaToolkit | None:
        return self.facts.toolkits.get(major_minor(cuda)) if cuda else None

    @functools.cached_property
    def gpu_archs(self) -> tuple[tuple[str, str | None], ...]:
        """(GPU name, sm_XY or None) for each GPU; the arch from its compute capability, else
        from its name in curated/gpus.toml."""
        if not known(self.s.gpus):
            return ()
        out = []
        for g in self.s.gpus:
            arch = None
            if g.compute_capability:
                major, minor = g.compute_capability.split(".")
                arch = f"sm_{major}{minor}"
            else:
                arch = gpu_arch_by_name(self.facts, g.name)
            out.append((g.name, arch))
        return tuple(dict.fromkeys(out))

    def os_family(self) -> str | None:
        """debian (Debian, Ubuntu) or rhel (RHEL, Rocky, Alma, CentOS, Fedora), from ``os``."""
        text = str(self.s.os).lower() if known(self.s.os) else ""
        if any(w in text for w in ("ubuntu", "debian", "mint", "pop!_os")):
            return "debian"
        if any(w in text for w in ("rocky", "red hat", "rhel", "centos", "alma", "fedora",
                                   "amazon linux", "oracle")):
            return "rhel"
        return None

    @functools.cached_property
    def os_base(self):
        """The matrix's OS base the snapshot's ``os`` names ("Ubuntu 22.04.3 LTS",
        "ubuntu-22.04", "Debian GNU/Linux 12 (bookworm)" → its OSBase), or None."""
        if not known(self.s.os):
            return None
        text = str(self.s.os).lower()
        for base in self.facts.oses.values():
            distro, _, version = base.id.partition("-")
            if distro in text and re.search(rf"(?<![\d.]){re.escape(version)}(?![\d])", text):
                return base
        return None

    @functools.cached_property
    def user_ops(self) -> tuple[str, ...]:
        """The ops the user builds or uses: ``--op``, the snapshot's ``ops``, DS_BUILD_*=1."""
        ops = list(self.ops)
        if known(self.s.ops):
            ops += list(self.s.ops)
        if known(self.s.env):
            from envgen.doctor.collect import ops_from_env

            ops += ops_from_env(self.s.env)
        return tuple(dict.fromkeys(ops))

    def over_releases(self, framework: str,
                      rule: Callable[[FrameworkRelease], Any]) -> tuple[Any, list[str]]:
        """``rule`` over the releases ``framework`` may be: (the first release's verdict when
        every release gives one, else None; the releases that gave one)."""
        releases = self.releases(framework)
        verdicts = [(r, rule(r)) for r in releases]
        hits = [r.version for r, v in verdicts if v]
        if verdicts and len(hits) == len(verdicts):
            return verdicts[0][1], hits
        if hits and self.frameworks.get(framework) is None:
            self.need(f"{framework} version",
                      f"{len(hits)} of the {len(verdicts)} {framework} releases in the matrix "
                      f"would fail a rule here ({', '.join(hits[:4])}"
                      f"{' …' if len(hits) > 4 else ''}); which one is installed decides",
                      f"`{self.python} -m pip show {framework}` (a source checkout: "
                      f"`git -C <checkout> describe --tags`)")
        return None, hits


def gpu_arch_by_name(facts: Facts, name: str) -> str | None:
    """The arch of a GPU model name as nvidia-smi prints it ("NVIDIA H100 80GB HBM3"): the
    longest curated name or alias contained in it."""
    def words(text: str) -> str:
        return " " + " ".join(_SPLIT.split(text.lower().replace("nvidia", " ")
                                           .replace("tesla", " ").strip())) + " "

    have = words(name)
    best = None
    for key, gpu in facts.gpus.items():
        k = words(key)
        if k.strip() and k in have and (best is None or len(k) > len(best[0])):
            best = (k, gpu.arch)
    return best[1] if best else None


