"""What decided each value of a resolved combination, derived from the resolver's own inputs.

Input: the (validated) request, the facts and a combination the resolver returned. Output:
one :class:`Decision` per axis — framework release, torch, CUDA, nvcc, Python, OS, gcc, NCCL,
driver — naming what decided it: the option that pinned it (``--python 3.10``), or the
ranking rule that picked it among the values that were feasible at that point (how many,
and the first reason that excluded each better-ranked value), or the fact that fixed it (the
release's nvcc check, the OS's gcc and nvcc's limit, the torch wheel's NCCL pin, the CUDA
runtime's driver floor), each with its source (a file in matrix/ or the URL the fact was
read from). Nothing is canned: every sentence is built from the walk the resolver makes.

The ranking is lexicographic (envgen/resolve/engine.py), so each axis is decided with the
earlier ones fixed: the release among the request's releases, torch among the builds that
fit that release, CUDA among that torch's builds, Python among that build's wheels, the OS
among the bases for all of those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envgen.facts.model import Facts, FrameworkRelease, Toolchain
from envgen.resolve.checks import Checks
from envgen.resolve.combination import Combination
from envgen.resolve.engine import BuildGroup, Domains, Tally, iter_feasible, prepare
from envgen.resolve.request import Request, validate

POLICY = "curated/policy.toml"
EXACT = 12  # longer lists of releases: those after the chosen one are not checked
EXCLUDED = "excluded"  # a value ranked before the best one (known not to fit)
_EVIDENCE = re.compile(r"\((\S+:\d+): .*\)$")


@dataclass(frozen=True, slots=True)
class Decision:
    """Why one axis of a combination has its value."""

    axis: str  # "framework", "torch", "cuda", "nvcc", "python", "os", "gcc", "nccl", "driver"
    value: str
    reason: str  # one line, built from the constraints that decided
    rule: str  # "request" (an option pinned it), "ranking:…", "policy:…", or the fact's rule
    source: str | None = None  # the matrix file or URL the deciding fact came from

    def to_dict(self) -> dict:
        return {"axis": self.axis, "value": self.value, "reason": self.reason,
                "rule": self.rule, "source": self.source}


def decisions(request: Request, facts: Facts, combo: Combination, *,
              best: bool = True) -> tuple[Decision, ...]:
    """One :class:`Decision` per axis of ``combo``, a combination ``request`` resolved to, in
    the order framework, torch, cuda, nvcc, python, os, gcc, nccl, driver (the last two only
    where the combination has them).

    ``best``: ``combo`` is the first combination the resolver returned. Then every value
    ranked before the chosen one is known to be excluded (the ranking is lexicographic), and
    only the best-ranked of them is walked, for the reason; with ``best=False`` each is
    checked (as costly as resolving again)."""
    return _Why(validate(request, facts), facts, combo, best).all()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _first(tally: Tally) -> str | None:
    """The reason of the first candidate the walk removed (the best-ranked one)."""
    return next(iter(tally.examples.values()), None)


class _Why:
    def __init__(self, request: Request, facts: Facts, combo: Combination, best: bool) -> None:
        self.request, self.facts, self.c, self.best = request, facts, combo, best
        self._gf: dict[tuple[str, str], str | None] = {}
        self.d = prepare(request, facts)
        self.checks = Checks(request, facts)
        self.fw = next(r for r in self.d.frameworks if r.framework == combo.framework
                       and r.version == combo.framework_version)
        self.group = next(g for g in self.d.groups
                          if g.version == combo.torch and g.cuda == combo.cuda)
        self.build = dict(self.group.entries)[combo.python]
        self.os = facts.oses[combo.os]
        self.toolkit, _ = self.checks.nvcc(self.fw, combo.cuda)

    def all(self) -> tuple[Decision, ...]:
        out = [self.framework(), self.torch(), self.cuda(), self.nvcc(), self.python(),
               self.os_base(), self.gcc()]
        if self.c.nccl:
            out.append(self.nccl())
        if self.c.min_driver:
            out.append(self.driver())
        return tuple(out)

    # ------------------------------------------------------------------ walks

    def _walk(self, frameworks: tuple[FrameworkRelease, ...],
              groups: tuple[BuildGroup, ...]) -> Tally:
        """Which of ``groups`` have a feasible combination with ``frameworks`` (each walked
        until its first), and the first reason per rule for the others."""
        tally = Tally()
        d = Domains(frameworks, groups, self.d.oses)
        for _ in iter_feasible(self.request, self.facts, tally, d, checks=self.checks,
                               once_per_group=True):
            pass
        return tally

    def _fits(self, fw: FrameworkRelease) -> tuple[bool, str | None]:
        """Whether ``fw`` has a feasible combination (the walk stops at the first), else the
        reason that removed its best-ranked candidate."""
        tally = Tally()
        d = Domains((fw,), self.d.groups, self.d.oses)
        hit = next(iter_feasible(self.request, self.facts, tally, d, checks=self.checks), None)
        return hit is not None, _first(tally)

    def _ranked(self, chosen: str, ranked: list[str], fits: dict[str, str | None],
                noun: tuple[str, str], rule_text: str) -> str:
        """"<rule_text>: first of N <nouns> that fit; K better-ranked ones excluded, X:
        <the reason that excluded X>". ``fits``: value → None (fits) or why not; values after
        the chosen one may be left out (long lists: only the admitted ones are counted)."""
        at = ranked.index(chosen)
        before = [v for v in ranked[:at] if fits.get(v) is not None]
        place = at - len(before)  # values ranked before it that fit too
        if all(v in fits for v in ranked):
            fitting = sum(1 for v in ranked if fits[v] is None)
            if fitting == 1:
                text = f"{rule_text}: the only {noun[0]} that fits"
            elif place == 0:
                text = f"{rule_text}: first of {fitting} {noun[1]} that fit"
            else:
                text = f"{rule_text}: number {place + 1} of {fitting} {noun[1]} that fit"
        elif place == 0:
            text = f"{rule_text}: the first that fits of {len(ranked)} admitted {noun[1]}"
        else:
            text = (f"{rule_text}: number {place + 1} that fits of {len(ranked)} admitted "
                    f"{noun[1]}")
        if before:
            text += (f"; {_plural(len(before), 'better-ranked one')} excluded, {before[0]}: "
                     f"{fits[before[0]]}")
        return text

    # ------------------------------------------------------------------ axes

    def framework(self) -> Decision:
        c, r = self.c, self.request
        value = f"{c.framework} {c.framework_version}"
        source = self.fw.source.url if self.fw.source else "harvested/frameworks.json"
        releases = [f for f in self.d.frameworks if f.framework == c.framework]
        at = releases.index(self.fw)
        fits: dict[str, str | None] = {c.framework_version: None}
        for i, f in enumerate(releases[:at]):
            fits[f.version] = EXCLUDED if self.best and i else self._release_fit(f)
        if len(releases) <= EXACT:  # few: count those after it that fit too
            for f in releases[at + 1:]:
                fits[f.version] = self._release_fit(f)
        versions = [f.version for f in releases]
        parts = []
        if r.framework is None:
            names = list(self.facts.framework_names)
            skipped = names[:names.index(c.framework)] if self.best else []
            parts.append(f"framework order {', '.join(names)} (policy.toml framework_order)"
                         + "".join(f"; no {n} release fits" for n in skipped))
        else:
            parts.append(f"--framework {r.framework}")
        if r.framework_version is not None and len(versions) == 1:
            parts.append(f"--framework-version {r.framework_version}")
            return Decision("framework", value, "; ".join(parts), "request", source)
        if r.framework_version is not None:
            parts.append(f"--framework-version {r.framework_version} admits "
                         f"{_plural(len(versions), 'release')}")
        parts.append(self._ranked(c.framework_version, versions, fits,
                                  ("release", "releases"), "newest release first"))
        return Decision("framework", value, "; ".join(parts), "ranking:newest-release", source)

    def _release_fit(self, fw: FrameworkRelease) -> str | None:
        ok, why = self._fits(fw)
        return None if ok else (why or "no candidate")

    def _group_fit(self, g: BuildGroup) -> str | None:
        """None if the chosen release has a feasible combination with torch build group
        ``g``, else the reason that removed its best-ranked candidate."""
        key = (g.version, g.cuda)
        if key not in self._gf:
            tally = self._walk((self.fw,), (g,))
            self._gf[key] = None if tally.accepted else (_first(tally) or "no candidate")
        return self._gf[key]

    def _version_fit(self, groups: list[BuildGroup]) -> str | None:
        """A torch release fits if one of its CUDA builds does; else its first reason."""
        reasons = []
        for g in groups:
            why = self._group_fit(g)
            if why is None:
                return None
            reasons.append(why)
        return reasons[0]

    def torch(self) -> Decision:
        c, r, b = self.c, self.request, self.build
        value = c.torch_pin.split("==", 1)[1]
        source = b.sources[0].url if b.sources else (b.pins_source or "curated/torch.toml")
        by_version: dict[str, list[BuildGroup]] = {}
        for g in self.d.groups:
            by_version.setdefault(g.version, []).append(g)
        versions = list(by_version)
        at = versions.index(c.torch)
        fits: dict[str, str | None] = {c.torch: None}
        for i, v in enumerate(versions[:at]):
            fits[v] = EXCLUDED if self.best and i else self._version_fit(by_version[v])
        if len(versions) <= EXACT:  # few: count those after it that fit too
            for v in versions[at + 1:]:
                fits[v] = self._version_fit(by_version[v])
        where = (f"from {b.index}" + (" (curated)" if b.curated else "")
                 + f"; {c.framework} {c.framework_version} requires torch"
                 f"{self.fw.requires_torch or ' (any)'}")
        if r.torch is not None and len(versions) == 1:
            return Decision("torch", value, f"--torch {r.torch}; {where}", "request", source)
        text = self._ranked(c.torch, versions, fits, ("torch release", "torch releases"),
                            "newest torch first")
        if r.torch is not None:
            text = f"--torch {r.torch} admits {_plural(len(versions), 'release')}; {text}"
        if r.nccl is not None:
            text = f"--nccl {r.nccl} keeps the builds that pin it; {text}"
        return Decision("torch", value, f"{text}; {where}", "ranking:newest-torch", source)

    def cuda(self) -> Decision:
        c, r = self.c, self.request
        b = self.build
        source = b.sources[0].url if b.sources else (b.pins_source or "curated/torch.toml")
        groups = [g for g in self.d.groups if g.version == c.torch]
        fits = {g.cuda: None if g.cuda == c.cuda else self._group_fit(g) for g in groups}
        cudas = [g.cuda for g in groups]
        if r.cuda is not None and "." in r.cuda:
            return Decision("cuda", c.cuda, f"--cuda {r.cuda}; torch {c.torch} has a CUDA "
                            f"{c.cuda} build", "request", source)
        text = self._ranked(c.cuda, cudas, fits, (f"CUDA build of torch {c.torch}",
                                                  f"CUDA builds of torch {c.torch}"),
                            "newest CUDA first")
        if r.cuda is not None:
            text = f"--cuda {r.cuda} admits CUDA {', '.join(cudas)}; {text}"
        return Decision("cuda", c.cuda, text, "ranking:newest-cuda", source)

    def nvcc(self) -> Decision:
        c, r, t, fw = self.c, self.request, self.toolkit, self.fw
        value = c.nvcc_version or c.nvcc
        ostk = self.checks.os_toolkit
        if ostk is not None:
            return Decision("nvcc", value, f"--flavor {r.flavor} --os {r.os}: the OS's "
                            f"{ostk.package} {ostk.version} (CUDA {ostk.cuda}); "
                            f"{self.checks.accepts(fw, ostk.cuda, c.cuda)[1]}", "request",
                            ostk.source_url)
        if r.nvcc is not None:
            return Decision("nvcc", value, f"--nvcc {r.nvcc} (a toolkit already installed); "
                            f"{self.checks.accepts(fw, t.cuda, c.cuda)[1]}", "request", None)
        source = t.source.url if t.source else "harvested/cuda.json"
        package = f" ({c.nvcc_package})" if c.nvcc_package else ""
        if t.cuda == c.cuda:
            return Decision("nvcc", value, f"nvcc {t.cuda}{package}: the same minor as torch's "
                            f"CUDA (an equal nvcc is taken when the matrix has one)",
                            "nvcc:equal", source)
        return Decision("nvcc", value, f"the matrix has no nvcc {c.cuda}; nvcc {t.cuda}"
                        f"{package} is the nearest minor the release's check accepts: "
                        f"{self.checks.accepts(fw, t.cuda, c.cuda)[1]}", "nvcc:minor-mismatch",
                        source)

    def python(self) -> Decision:
        c, r = self.c, self.request
        if r.python is not None:
            return Decision("python", c.python, f"--python {r.python}", "request", None)
        entries = self.group.entries
        fits: dict[str, str | None] = {}
        for py, _b in entries:
            tally = Tally()
            g = BuildGroup(self.group.version, self.group.cuda,
                           tuple(e for e in entries if e[0] == py))
            for _ in iter_feasible(r, self.facts, tally, Domains((self.fw,), (g,), self.d.oses),
                                   checks=self.checks, once_per_group=True):
                pass
            fits[py] = None if tally.accepted else (_first(tally) or "no candidate")
        pythons = [py for py, _ in entries]
        pref = ", ".join(self.facts.policy.python_preference)
        text = self._ranked(c.python, pythons, fits,
                            (f"Python torch {c.torch} has wheels for",
                             f"Pythons torch {c.torch} has wheels for"),
                            f"policy.toml python_preference ({pref})")
        return Decision("python", c.python, text, "policy:python_preference", POLICY)

    def os_base(self) -> Decision:
        c, r = self.c, self.request
        checks, fw, b, t = self.checks, self.fw, self.build, self.toolkit
        wheel = checks.wheel(fw, c.python)
        floor = checks.gcc_floor(fw, b, t)
        fits: dict[str, str | None] = {}
        for o in self.d.oses:
            gcc, src = checks.os(b, wheel, o, t, floor)
            fits[o.id] = (r.target_python(c.python, o.id) if r.os_pythons else None) or (
                src if isinstance(gcc, str) else None)
        if r.os is not None:
            pinned = f"--os {r.os}"
            if r.flavor in Toolchain.OS_FLAVORS:
                pinned += f" (--flavor {r.flavor}: its CUDA toolkit is the OS's)"
            return Decision("os", c.os, f"{pinned}; glibc {self.os.glibc} ≥ "
                            f"{c.torch_glibc or '?'} (torch wheel)", "request",
                            self.os.source or None)
        oses = [o.id for o in self.d.oses]
        text = self._ranked(c.os, oses, fits, (f"OS base on {r.platform}",
                                               f"OS bases on {r.platform}"),
                            "policy.toml os_preference")
        return Decision("os", c.os, f"{text}; glibc {self.os.glibc} ≥ {c.torch_glibc or '?'} "
                        f"(torch wheel)", "policy:os_preference", POLICY)

    def gcc(self) -> Decision:
        c, o, t = self.c, self.os, self.toolkit
        floor, floor_why = self.checks.gcc_floor(self.fw, self.build, t)
        floor_why = _EVIDENCE.sub(r"(\1)", floor_why)  # the file:line, not the line's text
        limits = []
        if floor:
            limits.append(f"≥ {floor} for {floor_why}")
        if t.max_gcc is not None:
            limits.append(f"≤ {t.max_gcc} for nvcc {t.cuda}")
        need = f"the op build needs gcc {' and '.join(limits)}" if limits else \
            "no gcc limit is known for the op build"
        if c.gcc_source == "os":
            return Decision("gcc", str(c.gcc), f"{o.id}'s default gcc; {need}", "gcc:os-default",
                            o.gcc_source or None)
        if c.gcc_source == "os-package":
            return Decision("gcc", str(c.gcc), f"{o.id}'s default gcc {o.gcc} is outside the "
                            f"limits ({need}); the newest gcc {o.id} packages within them",
                            "gcc:os-package", o.gcc_source or None)
        if c.gcc_source == "conda-forge":
            return Decision("gcc", str(c.gcc), f"{o.id} has no gcc within the limits ({need}; "
                            f"it packages {', '.join(map(str, o.gcc_available))}); the newest "
                            f"conda-forge gcc within them", "gcc:conda-forge",
                            f"{POLICY} [conda_gcc]")
        ostk = self.checks.os_toolkit
        return Decision("gcc", str(c.gcc), f"the g++ {o.id}'s CUDA toolkit package is set up "
                        f"with; {need}", "gcc:os-toolkit", ostk.source_url if ostk else None)

    def nccl(self) -> Decision:
        c, r, b = self.c, self.request, self.build
        source = b.sources[0].url if b.sources else b.pins_source
        if b.pins_from == "curated":
            how, rule, source = f"curated pin of {b.pin} ({b.pins_source})", "torch-pin:curated", \
                b.pins_source
        else:
            how, rule = f"pinned by the {b.pin} wheel's metadata", "torch-pin:wheel"
        if r.nccl is not None:
            return Decision("nccl", c.nccl, f"--nccl {r.nccl}: {how}", "request", source)
        return Decision("nccl", c.nccl, how, rule, source)

    def driver(self) -> Decision:
        c, r = self.c, self.request
        runtime = self.facts.toolkits.get(c.cuda)
        source = runtime.driver_source if runtime else None
        full = f"; {c.release_driver} for full support (PTX JIT)" if c.release_driver else ""
        if c.nvcc_driver and c.nvcc_driver != c.release_driver:
            full += f"; {c.nvcc_driver} to JIT the ops' PTX (nvcc {c.nvcc_version})"
        text = f"the CUDA {c.cuda} runtime's minor-version-compatibility floor{full}"
        if r.driver is not None:
            return Decision("driver", f"≥ {c.min_driver}", f"--driver {r.driver} meets {text}",
                            "request", source)
        return Decision("driver", f"≥ {c.min_driver}", text, "cuda:driver-floor", source)
