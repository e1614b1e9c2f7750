"""The compatibility rules. Each returns ``None`` (ok) or a reason; memoized per request.

Every rule reads its facts from matrix/ (harvested from the releases' own files, or curated
with a citation); none states a version fact itself. Versions are compared as versions
(:func:`envgen.versions.parse_version` / :func:`dotted_key`), never as strings.
"""

from __future__ import annotations

import re

from envgen.facts.model import (
    CudaToolkit,
    Facts,
    FrameworkRelease,
    OSBase,
    Toolchain,
    TorchBuild,
)
from envgen.facts.release_model import Breakage
from envgen.resolve.request import Request
from envgen.versions import dotted_key, parse_version, python_version, spec_contains

_PLAIN = re.compile(r"\d+(?:\.\d+)*")


def _newer(a: str, b: str) -> bool:
    """Version ``a`` > ``b``; plain release numbers are compared without packaging."""
    if _PLAIN.fullmatch(a) and _PLAIN.fullmatch(b):
        return _release(a) > _release(b)
    return parse_version(a) > parse_version(b)


def _release(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 2.5.0 == 2.5, as PEP 440 compares
        parts.pop()
    return tuple(parts)


def cc_of(arch: str) -> tuple[int, int]:
    """``sm_90a`` → (9, 0); ``sm_120`` → (12, 0); ``8.6`` → (8, 6)."""
    if arch.startswith("sm_"):
        digits = arch[3:].rstrip("af")
        return int(digits[:-1]), int(digits[-1])
    major, minor = arch.split("+")[0].rstrip("af").split(".")
    return int(major), int(minor)


def arch_base(arch: str) -> str:
    return arch.rstrip("af")


def arch_list_entry(arch: str) -> str:
    """``sm_90a`` → ``9.0a``: the TORCH_CUDA_ARCH_LIST spelling of an arch."""
    major, minor = cc_of(arch)
    return f"{major}.{minor}{arch[len(arch.rstrip('af')):]}"


def arch_entry_text(entry) -> str:
    """What a framework's op builder does with an entry (an ``ArchEntry``), in words."""
    if entry.result == "fails":
        return f"it raises {entry.detail}"
    if entry.result == "misread":
        return f"it makes {entry.detail}"
    if entry.result == "dropped":
        return f"it compiles without the suffix: {entry.detail}"
    return f"it compiles for it: {entry.detail}"


def runs_on(build: TorchBuild, arch: str) -> tuple[bool, bool]:
    """(SASS, PTX): whether the build has machine code a GPU of ``arch`` runs (same major,
    minor ≤ the GPU's; CUDA's binary compatibility), and PTX it can JIT-compile (a virtual
    architecture ≤ the GPU's)."""
    major, minor = cc_of(arch)
    sass = any(cc_of(a)[0] == major and cc_of(a)[1] <= minor for a in build.archs or ())
    ptx = any(cc_of("sm_" + p.removeprefix("compute_")) <= (major, minor)
              for p in build.archs_ptx)
    return sass, ptx


class Checks:
    """The compatibility rules for one request (facts are immutable, so results are cached)."""

    def __init__(self, request: Request, facts: Facts) -> None:
        self.request = request
        self.facts = facts
        self._nvcc: dict[tuple, tuple[CudaToolkit | None, str | None]] = {}
        self._os: dict[tuple, tuple[int, str] | tuple[str, str]] = {}
        self._gcc: dict[tuple, tuple[int, str]] = {}
        self._wheel: dict[tuple, object] = {}
        self._fw_constraints: dict[tuple[str, str], list] = {}
        self._fw_torch: dict[tuple[int, str], str | None] = {}
        self._torch_profile: dict[int, tuple] = {}
        self._torch_ok: dict[tuple, bool] = {}
        self._fw_cuda: dict[tuple[int, str], str | None] = {}
        self._fw_breakages: dict[str, list[Breakage]] = {}
        self.assembled: tuple | None = None  # make_combination's memo of the shared part
        self.os_toolkit = (facts.os_toolkits.get(request.os or "")
                           if request.flavor in Toolchain.OS_FLAVORS else None)
        self.system = self._system_toolkit()

    # -------------------------------------------------------------- framework vs torch / CUDA

    def _constraints(self, fw: FrameworkRelease):
        key = (fw.framework, fw.version)
        hit = self._fw_constraints.get(key)
        if hit is None:
            hit = self._fw_constraints[key] = [
                c for c in self.facts.constraints
                if c.framework == fw.framework and spec_contains(c.versions or "", fw.version)]
        return hit

    def framework_torch(self, fw: FrameworkRelease, version: str) -> str | None:
        key = (id(fw), version)  # fw is held by the facts, which outlive this object
        try:
            return self._fw_torch[key]
        except KeyError:
            why = self._fw_torch[key] = self._framework_torch(fw, version)
            return why

    def torch_ok(self, fw: FrameworkRelease, version: str) -> bool:
        """``framework_torch(fw, version) is None``, shared by the releases whose torch
        requirements are the same (most of them): the walk checks every release against
        every torch build, and needs the reason only when it is explaining."""
        profile = self._torch_profile.get(id(fw))
        if profile is None:
            build = fw.build
            profile = self._torch_profile[id(fw)] = (
                fw.framework, fw.requires_torch or "",
                build.requires_torch if build and build.read else None,
                tuple(c.requires_torch for c in self._constraints(fw) if c.requires_torch))
        key = (profile, version)
        ok = self._torch_ok.get(key)
        if ok is None:
            ok = self._torch_ok[key] = self.framework_torch(fw, version) is None
        return ok

    def _framework_torch(self, fw: FrameworkRelease, version: str) -> str | None:
        spec = fw.requires_torch or ""
        if not spec_contains(spec, version):
            return f"{fw.framework} {fw.version} requires torch{spec}, not {version}"
        build = fw.build
        if build and build.read and build.requires_torch and not spec_contains(
                build.requires_torch, version):
            return (f"{fw.framework} {fw.version}'s build checks torch{build.requires_torch} "
                    f"(read from its files), not {version}")
        for c in self._constraints(fw):
            if c.requires_torch and not spec_contains(c.requires_torch, version):
                return (f"{fw.framework} {fw.version} needs torch{c.requires_torch} "
                        f"(curated: {c.source})")
        return None

    def framework_cuda(self, fw: FrameworkRelease, cuda: str) -> str | None:
        key = (id(fw), cuda)
        try:
            return self._fw_cuda[key]
        except KeyError:
            why = self._fw_cuda[key] = self._framework_cuda(fw, cuda)
            return why

    def _framework_cuda(self, fw: FrameworkRelease, cuda: str) -> str | None:
        build = fw.build
        if build and build.read and build.requires_cuda and not spec_contains(
                build.requires_cuda, cuda):
            return (f"{fw.framework} {fw.version}'s build checks CUDA{build.requires_cuda} "
                    f"(read from its files), not {cuda}")
        for c in self._constraints(fw):
            if c.requires_cuda and not spec_contains(c.requires_cuda, cuda):
                return (f"{fw.framework} {fw.version} needs CUDA{c.requires_cuda} "
                        f"(curated: {c.source})")
        return None

    def _breakages(self, fw: FrameworkRelease) -> list[Breakage]:
        hit = self._fw_breakages.get(fw.framework)
        if hit is None:
            hit = self._fw_breakages[fw.framework] = [
                b for b in self.facts.breakages if b.framework == fw.framework]
        return hit

    def breakage(self, fw: FrameworkRelease, torch: str, cuda: str, python: str) -> str | None:
        for b in self._breakages(fw):
            if spec_contains(b.versions, fw.version) and b.matches_env(torch, cuda, python):
                return f"{fw.framework} {fw.version} with torch {torch}, CUDA {cuda}, " \
                       f"Python {python}: {b.what} (curated: {b.source})"
        return None

    def unchecked_breakages(self, fw: FrameworkRelease, torch: str, cuda: str,
                            python: str) -> list[str]:
        """Known breakages of older releases whose fix in ``fw`` nobody checked."""
        out = []
        for b in self._breakages(fw):
            if (b.checked_through and not spec_contains(b.versions, fw.version)
                    and _newer(fw.version, b.checked_through)
                    and b.matches_env(torch, cuda, python)):
                out.append(f"a known breakage of {fw.framework}{b.versions} with these "
                           f"versions ({b.what}; {b.source}) was checked through "
                           f"{b.checked_through}; {fw.version} is newer and was not checked, so "
                           f"it is not known to be fixed")
        return out

    # -------------------------------------------------------------- nvcc

    def _system_toolkit(self) -> CudaToolkit | None:
        """The fixed nvcc: --nvcc, or the OS's own toolkit for --flavor os-package (with the
        max gcc and archs NVIDIA's nvcc of that minor has: the OS repackages that release)."""
        nvcc = self.request.nvcc
        if self.os_toolkit is not None:
            nvcc = self.os_toolkit.cuda
        if nvcc is None:
            return None
        known = self.facts.toolkits.get(nvcc)
        return known if known is not None else CudaToolkit(
            cuda=nvcc, nvcc_package=None, nvcc_version=None, max_gcc=None, archs=())

    def nvcc(self, fw: FrameworkRelease, cuda: str) -> tuple[CudaToolkit | None, str | None]:
        """The toolkit whose nvcc builds the ops: the given system nvcc, torch's CUDA exactly,
        else a minor the release's own check accepts."""
        key = (fw.framework, fw.version, cuda)
        hit = self._nvcc.get(key)
        if hit is None:
            hit = self._nvcc[key] = self._select_nvcc(fw, cuda)
        return hit

    def accepts(self, fw: FrameworkRelease, nvcc: str, cuda: str) -> tuple[bool, str]:
        if nvcc == cuda:
            return True, "same CUDA minor"
        if fw.build is None or not fw.build.read:
            return False, (f"{fw.framework} {fw.version}'s build files were not read, so only "
                           f"an nvcc equal to torch's CUDA {cuda} is known to pass its check")
        ok, why = fw.build.nvcc_accepts(nvcc, cuda)
        if ok is None:
            return False, (f"{fw.framework} {fw.version}: {why}; only an nvcc equal to torch's "
                           f"CUDA {cuda} is known to pass")
        verb = "accepts" if ok else "refuses"
        return ok, (f"{fw.framework} {fw.version}'s op build {verb} nvcc {nvcc} for torch's "
                    f"CUDA {cuda}: {why}")

    def _select_nvcc(self, fw: FrameworkRelease, cuda: str):
        if self.system is not None:
            ok, why = self.accepts(fw, self.system.cuda, cuda)
            if ok:
                return self.system, None
            skip = fw.build.skip_cuda_check if fw.build and fw.build.read else None
            tail = (f"; {skip}=1 turns the refusal into a warning, at your own risk" if skip
                    else "")
            return None, f"{why}{tail}"
        toolkits = self.facts.toolkits
        if cuda in toolkits:
            return toolkits[cuda], None
        usable = [c for c in toolkits if c.split(".")[0] == cuda.split(".")[0]
                  and self.accepts(fw, c, cuda)[0]]
        if usable:  # the nearest minor; between two equally near, the newer
            minor = dotted_key(cuda)[1]
            best = min(usable, key=lambda c: (abs(dotted_key(c)[1] - minor), -dotted_key(c)[1]))
            return toolkits[best], None
        return None, f"no nvcc for CUDA {cuda} in the matrix, and {self._no_minor(fw, cuda)}"

    def _no_minor(self, fw: FrameworkRelease, cuda: str) -> str:
        if fw.build is None or not fw.build.read:
            return (f"{fw.framework} {fw.version}'s build files were not read, so no other "
                    f"minor is known to pass its check")
        return f"{fw.framework} {fw.version}'s build accepts no other minor the matrix has"

    # -------------------------------------------------------------- C++ standard

    @staticmethod
    def against_torch(fw: FrameworkRelease) -> bool:
        """Whether the release compiles code against torch's headers (torch's C++ extension
        machinery). A release whose build code states it compiles no CUDA code (Megatron-Core:
        one pybind11 helper) is not held to torch's header rules."""
        return not (fw.build is not None and fw.build.read and fw.build.nvcc_check == "none")

    def cxx_std(self, fw: FrameworkRelease, build: TorchBuild,
                toolkit: CudaToolkit) -> str | None:
        """The framework's -std flags must be at least what torch's headers require."""
        headers, facts = build.headers, fw.build
        if headers is None or headers.cxx_std is None or facts is None or not facts.read:
            return None
        if not self.against_torch(fw):
            return None
        need = int(headers.cxx_std)
        for kind, rules in (("host compiler", facts.cxx_std), ("nvcc", facts.nvcc_std)):
            rule = facts.std(rules, build.version, toolkit.cuda)
            if rule is not None and int(rule.std) < need:
                return (f"{fw.framework} {fw.version} compiles its ops with -std=c++{rule.std} "
                        f"for the {kind} ({rule.where}), but torch {build.version}'s headers "
                        f"require C++{need} ({headers.cxx_std_where})")
        return None

    def needed_std(self, fw: FrameworkRelease, build: TorchBuild, cuda: str) -> str | None:
        """The highest C++ standard the op build uses: torch's headers' or the framework's."""
        stds = []
        if build.headers and build.headers.cxx_std and self.against_torch(fw):
            stds.append(int(build.headers.cxx_std))
        if fw.build and fw.build.read:
            for rules in (fw.build.cxx_std, fw.build.nvcc_std):
                rule = fw.build.std(rules, build.version, cuda)
                if rule is not None:
                    stds.append(int(rule.std))
        return str(max(stds)) if stds else None

    # -------------------------------------------------------------- GPU and driver

    def gpu(self, build: TorchBuild, toolkit: CudaToolkit) -> str | None:
        arch = self.request.gpu_arch
        if not arch:
            return None
        # the GPU under this toolkit's name for it (CUDA 13 calls sm_101 sm_110)
        asked, (arch, renamed) = arch, self.facts.arch_for(arch, toolkit.cuda)
        name = f"{self.request.gpu} ({arch})" if self.request.gpu else arch
        if renamed is not None:
            name += f", which CUDA {toolkit.cuda} calls what CUDA < {renamed.cuda} called {asked}"
        if toolkit.archs and arch not in toolkit.archs:
            return (f"nvcc {toolkit.cuda} cannot target {name}: its ptxas knows "
                    f"{toolkit.archs[0]} … {toolkit.archs[-1]}")
        if build.archs is None:
            if not build.cuda:
                return None
            why = build.archs_unknown or "no source in the matrix states it"
            return (f"unknown: the GPU archs torch {build.pin.split('==')[1]} was compiled for "
                    f"are not known ({why}), so whether it runs on {name} cannot be told")
        sass, ptx = runs_on(build, arch)
        if not sass and not ptx:
            targets = ", ".join((*build.archs, *build.archs_ptx))
            return (f"torch {build.pin.split('==')[1]} was compiled for {targets}: no "
                    f"kernel runs on {name} ({build.archs_from}: {build.archs_source})")
        return None

    def framework_arch(self, fw: FrameworkRelease, toolkit: CudaToolkit) -> str | None:
        """The framework's op builder must read the GPU's arch in TORCH_CUDA_ARCH_LIST (what
        envgen's image and env set it to) as that arch: DeepSpeed before 0.16.4 reads
        ``10.0`` as ``compute_1.`` and 0.19.x raises on ``9.0a`` (read from each release's
        builder.py, ``arch_entries``)."""
        arch = self.request.gpu_arch
        if not arch or fw.build is None or not fw.build.read:
            return None
        arch = self.facts.arch_for(arch, toolkit.cuda)[0]
        bad: dict[str, list] = {}  # result → [(entry, when)]
        for mode, when in (("aot", "ahead of time"), ("jit", "in a JIT load")):
            entry = fw.build.arch_entry(arch, mode)
            if entry is not None and entry.result in ("fails", "misread"):
                bad.setdefault(entry.result, []).append((entry, when))
        if not bad:
            return None
        parts = []
        for group in bad.values():
            first = group[0][0]
            if all(e.detail == first.detail for e, _ in group):
                parts.append(f"{arch_entry_text(first)} "
                             + " and ".join(f"{w} ({e.where})" for e, w in group))
            elif all(e.where == first.where for e, _ in group):
                parts.append(f"{arch_entry_text(first)} "
                             + " and ".join(w for _, w in group) + f" ({first.where})")
            else:
                parts += [f"{arch_entry_text(e)} {w} ({e.where})" for e, w in group]
        entry = next(iter(bad.values()))[0][0].entry
        return (f"{fw.framework} {fw.version}'s op builder cannot compile for {arch}: with "
                f"TORCH_CUDA_ARCH_LIST={entry} {'; '.join(parts)}")

    def driver(self, build: TorchBuild, toolkit: CudaToolkit) -> str | None:
        driver = self.request.driver
        if not driver:
            return None
        runtime = self.facts.toolkits.get(build.cuda or "")
        floor = runtime.min_driver if runtime else None
        if floor is None:
            return f"no minimum driver known for CUDA {build.cuda}"
        if dotted_key(driver) < dotted_key(floor):
            return (f"CUDA {build.cuda} needs driver ≥ {floor} even under minor-version "
                    f"compatibility; have {driver}")
        return None

    # -------------------------------------------------------------- files, Python, OS

    def framework_files(self, fw: FrameworkRelease, python: str) -> str | None:
        files = fw.files
        if files is None:
            return None
        platform = self.request.platform
        if files.sdist or self.wheel(fw, python) is not None:
            return None
        return (f"{fw.framework} {fw.version} publishes no file for Python {python} on "
                f"{platform} ({files.describe(platform)})")

    def framework_python(self, fw: FrameworkRelease, python: str) -> str | None:
        num = python_version(python)
        if fw.requires_python and not spec_contains(fw.requires_python, num):
            return f"{fw.framework} {fw.version} requires Python{fw.requires_python}"
        for c in self._constraints(fw):
            if c.requires_python and not spec_contains(c.requires_python, num):
                return f"{fw.framework} {fw.version} needs Python{c.requires_python} (curated)"
        return None

    def gcc_floor(self, fw: FrameworkRelease, build: TorchBuild,
                  toolkit: CudaToolkit) -> tuple[int, str]:
        """The lowest host gcc major the op build needs, and why."""
        key = (fw.framework, fw.version, build.version, toolkit.cuda)
        hit = self._gcc.get(key)
        if hit is None:
            hit = self._gcc[key] = self._gcc_floor(fw, build, toolkit)
        return hit

    def _gcc_floor(self, fw, build, toolkit) -> tuple[int, str]:
        best, why = 0, ""
        h = build.headers if self.against_torch(fw) else None
        if h is not None and h.min_gcc:
            best, why = h.min_gcc, f"torch {build.version}'s headers ({h.min_gcc_where})"
        if h is not None and h.extension_min_gcc:
            major = int(h.extension_min_gcc.split(".")[0])
            if major > best:
                best, why = major, f"torch {build.version}'s cpp_extension"
        std = self.needed_std(fw, build, toolkit.cuda)
        row = self.facts.cxx_std(std) if std else None
        if row is not None and row.min_gcc and row.min_gcc > best:
            best, why = row.min_gcc, f"C++{std} ({row.source})"
        return best, why

    def wheel(self, fw: FrameworkRelease, python: str):
        """The framework's wheel pip would install for ``python``, or None (sdist / unknown)."""
        key = (fw.framework, fw.version, python)
        if key not in self._wheel:
            self._wheel[key] = (fw.files.wheel_for(python, self.request.platform)
                                if fw.files else None)
        return self._wheel[key]

    def os(self, build: TorchBuild, wheel, os: OSBase, toolkit: CudaToolkit,
           floor: tuple[int, str]):
        """(gcc, where it comes from) or (constraint, reason); ``wheel`` from :meth:`wheel`,
        ``floor`` from :meth:`gcc_floor` (both computed once per Python, not per OS)."""
        key = (build.glibc, wheel.glibc if wheel else None, os.id, toolkit.cuda, floor[0])
        hit = self._os.get(key)
        if hit is None:
            hit = self._os[key] = self._check_os(build, wheel, os, toolkit, *floor)
        return hit

    def _os_toolkit_gcc(self, toolkit: CudaToolkit, floor: int, floor_why: str, top: int):
        """The OS toolkit's own g++ (its nvidia-cuda-toolkit-gcc wrapper's): the op build must
        accept it, since that is the host compiler the OS's nvcc is set up with."""
        t = self.os_toolkit
        if t.gcc is None:
            return ("gcc", f"{t.os}'s {t.package} {t.version} names no g++ (harvested/"
                           "os_toolkits.json), so its host compiler is unknown")
        if floor <= t.gcc <= top:
            return (t.gcc, "os-toolkit")
        need = f"≥ {floor} for {floor_why}" if t.gcc < floor else f"≤ {top} for nvcc {toolkit.cuda}"
        return ("gcc", f"{t.os}'s {t.package} {t.version} compiles with g++-{t.gcc}; the op build "
                       f"needs gcc {need}")

    def _check_os(self, build, wheel, os: OSBase, toolkit: CudaToolkit, floor: int,
                  floor_why: str):
        if build.glibc and dotted_key(os.glibc) < dotted_key(build.glibc):
            return ("glibc", f"{os.id} has glibc {os.glibc}; torch {build.version} wheels "
                             f"need ≥ {build.glibc}")
        if wheel is not None and wheel.glibc and dotted_key(os.glibc) < dotted_key(wheel.glibc):
            return ("glibc", f"{os.id} has glibc {os.glibc}; {wheel.filename} needs "
                             f"≥ {wheel.glibc}")
        top = toolkit.max_gcc if toolkit.max_gcc is not None else 999
        if self.os_toolkit is not None:
            return self._os_toolkit_gcc(toolkit, floor, floor_why, top)
        if floor <= os.gcc <= top:
            return (os.gcc, "os")
        packaged = [g for g in os.gcc_available if floor <= g <= top]
        if packaged:
            return (max(packaged), "os-package")
        conda = [g for g in self.facts.policy.conda_gcc if floor <= g <= top]
        if conda:
            return (max(conda), "conda-forge")
        low = f"≥ {floor} for {floor_why}" if floor else ""
        high = f"≤ {toolkit.max_gcc} for nvcc {toolkit.cuda}" if toolkit.max_gcc else ""
        return ("gcc", f"{os.id} offers gcc {os.gcc} (packages: "
                       f"{', '.join(map(str, os.gcc_available))}); the op build needs gcc "
                       f"{' and '.join(x for x in (low, high) if x)}")
