"""Value types for the facts in matrix/: one frozen dataclass per kind of record.

Field meanings are documented in matrix/README.md; this module only gives them types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envgen.facts.release_model import (
    Breakage,
    BuildFacts,
    CxxStd,
    Gpu,
    ReleaseFiles,
    ToolkitRelease,
    TorchHeaders,
)
from envgen.versions import spec_contains

if TYPE_CHECKING:
    from envgen.facts.os_toolkit import OsToolkit


@dataclass(frozen=True, slots=True)
class Source:
    """Where a fact came from: a URL and, for harvested facts, dates and a file hash."""

    url: str
    sha256: str | None = None
    uploaded: str | None = None
    retrieved: str | None = None
    index: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchBuild:
    """One torch wheel build: version, CUDA variant, platform, Pythons and pinned libraries."""

    version: str
    cuda: str | None
    platform: str
    python: tuple[str, ...]
    glibc: str | None
    nccl: str | None = None
    cudnn: str | None = None
    triton: str | None = None
    cuda_runtime: str | None = None
    local: str | None = None
    wheel_tag: str | None = None
    requires_python: str | None = None
    index: str = "pypi"
    curated: bool = False  # synthesized from curated/torch.toml, not read from an index
    sources: tuple[Source, ...] = ()
    headers: TorchHeaders | None = None  # read from one wheel of the release
    archs: tuple[str, ...] | None = None  # GPU archs (SASS) it was compiled for
    archs_ptx: tuple[str, ...] = ()  # PTX targets it embeds (a newer GPU can JIT them)
    archs_source: str | None = None  # the wheel's CUDAConfig.h, or a curated row's citation
    archs_from: str = "unknown"  # "harvested" / "curated" / "unknown"
    archs_unknown: str | None = None  # why the arch list is unknown (a curated row's reason)
    pins_from: str = "harvested"  # "harvested" (wheel metadata), "curated" or "unknown"
    pins_source: str | None = None
    # (pin, why) for each pin (nccl, cudnn, triton) a curated build leaves out; a reason that
    # starts with "none:" says it requires no such wheel, "bundled:" that it carries the library
    pins_unknown: tuple[tuple[str, str], ...] = ()

    @property
    def pin(self) -> str:
        """The requirement that selects exactly this build, e.g. ``torch==2.5.1+cu121``."""
        return f"torch=={self.version}" + (f"+{self.local}" if self.local else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkRelease:
    """One framework release with its Python and torch requirements."""

    framework: str
    version: str
    requires_python: str | None
    requires_torch: str | None
    wheel_python: tuple[str, ...] | None = None
    wheel_glibc: str | None = None
    metadata_from: str | None = None
    source: Source | None = None
    files: ReleaseFiles | None = None
    build: BuildFacts | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaToolkit:
    """A CUDA toolkit: its nvcc package and the newest host gcc it accepts."""

    cuda: str
    nvcc_package: str | None
    nvcc_version: str | None
    max_gcc: int | None
    archs: tuple[str, ...]
    platforms: tuple[str, ...] = ()
    min_driver: str | None = None
    toolkit_driver: str | None = None
    source: Source | None = None
    driver_source: str | None = None
    max_clang: int | None = None
    releases: tuple[ToolkitRelease, ...] = ()  # every release of this minor (curated)

    def release_of(self, component: str, version: str | None) -> ToolkitRelease | None:
        """The toolkit release whose ``nvcc`` / ``cudart`` component is ``version``."""
        if version:
            for r in self.releases:
                if getattr(r, component) == version:
                    return r
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchRename:
    """A curated/cuda.toml [[arch_rename]] row: from CUDA ``cuda`` on, ``old`` is ``new``."""

    old: str
    new: str
    cuda: str
    source: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverFloor:
    """One curated/cuda.toml [[toolkit]] row's driver figures, for every CUDA it lists, also
    those older than the harvested toolkits (the doctor judges old reports against them)."""

    cuda: str
    min_driver: str
    toolkit_driver: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OSBase:
    """A base OS (curated/os.toml): its family, glibc, gcc and base image."""

    id: str
    name: str
    family: str
    glibc: str
    gcc: int
    gcc_available: tuple[int, ...]
    archs: tuple[str, ...]
    eol: str | None = None
    image: str | None = None
    source: str = ""
    gcc_source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkConstraint:
    """A requirement of a framework that its own package metadata does not state."""

    framework: str
    versions: str
    requires_torch: str | None = None
    requires_cuda: str | None = None
    requires_python: str | None = None
    source: str = ""
    note: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """The ranking preferences (curated/policy.toml)."""

    python_preference: tuple[str, ...]
    os_preference: tuple[str, ...]
    framework_order: tuple[str, ...]
    manylinux_aliases: dict[str, str] = field(default_factory=dict)
    conda_gcc: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaRule:
    """How one lock flavor gets the CUDA compiler and headers for a range of CUDA versions."""

    cuda: str  # PEP 440 specifier over torch's CUDA major.minor
    channels: tuple[str, ...] = ()  # conda: channels put before the default ones
    specs: tuple[str, ...] = ()  # conda match specs, with {cuda} {release} placeholders
    requirements: tuple[str, ...] = ()  # venv: pip requirements
    cuda_home: str | None = None  # venv: CUDA_HOME relative to site-packages
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolchain:
    """curated/toolchain.toml: what each lock flavor installs to build the framework's ops."""

    conda_channels: tuple[str, ...]
    channel_alias: str
    subdirs: dict[str, str]
    conda_specs: tuple[str, ...]
    conda_compiler: tuple[str, ...]
    linux_version: str
    conda_cuda: tuple[CudaRule, ...]
    conda_releases: dict[str, str]
    venv_cuda: tuple[CudaRule, ...]
    venv_os_packages: dict[str, tuple[str, ...]]
    # framework → Python packages its ops build needs, locked so builds skip build isolation
    build_requires: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # (torch specifier, requirements): what the ops build needs with those torch releases
    build_for_torch: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # os-package flavor: OS family → packages besides the toolkit's own, and its CUDA_HOME
    os_package_os_packages: dict[str, tuple[str, ...]] = field(default_factory=dict)
    os_package_home: dict[str, str] = field(default_factory=dict)
    # what an sdist without a [build-system] table is built with (pip's fallback: [sdist_build])
    sdist_fallback_requires: tuple[str, ...] = ()

    FLAVORS = ("conda", "venv", "os-package")
    # the flavors whose CUDA compiler comes with the OS, not per torch CUDA from a rule
    OS_FLAVORS = ("os-package",)

    def build_requirements(self, framework: str, torch: str) -> tuple[str, ...]:
        """The Python packages the framework's ops build needs with this torch release."""
        public = torch.split("+", 1)[0]
        extra = [r for spec, reqs in self.build_for_torch if spec_contains(spec, public)
                 for r in reqs]
        return tuple(dict.fromkeys((*self.build_requires.get(framework, ()), *extra)))

    def rule(self, flavor: str, cuda: str) -> CudaRule | None:
        """The rule that supplies CUDA ``cuda`` for ``flavor``, or None if it cannot (the
        os-package flavor has no rules: the OS's one toolkit is checked by the resolver)."""
        rules = {"conda": self.conda_cuda, "venv": self.venv_cuda}.get(flavor, ())
        return next((r for r in rules if spec_contains(r.cuda, cuda)), None)

    def why_not(self, flavor: str, cuda: str) -> str | None:
        """None when ``flavor`` can provide CUDA ``cuda``; otherwise the reason."""
        if flavor in self.OS_FLAVORS or self.rule(flavor, cuda) is not None:
            return None
        rules = self.conda_cuda if flavor == "conda" else self.venv_cuda
        ranges = ", ".join(r.cuda for r in rules) or "none"
        return (f"the {flavor} flavor has no CUDA {cuda} compiler (it covers CUDA {ranges}; "
                f"curated/toolchain.toml)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """Everything the resolver needs, loaded and validated from one matrix/ directory."""

    torch_builds: tuple[TorchBuild, ...]
    frameworks: tuple[FrameworkRelease, ...]
    toolkits: dict[str, CudaToolkit]
    oses: dict[str, OSBase]
    constraints: tuple[FrameworkConstraint, ...]
    policy: Policy
    toolchain: Toolchain | None = None
    generated: dict[str, Any] = field(default_factory=dict)
    gpus: dict[str, Gpu] = field(default_factory=dict)  # lower-case name or alias → GPU
    compilers: tuple[CxxStd, ...] = ()
    breakages: tuple[Breakage, ...] = ()
    os_toolkits: dict[str, OsToolkit] = field(default_factory=dict)  # OS id → its toolkit
    driver_floors: dict[str, DriverFloor] = field(default_factory=dict)  # CUDA → its floor
    arch_renames: tuple[ArchRename, ...] = ()
    # torch builds of releases older than every harvested one, known only from curated
    # [[variants]] / [[archs]] rows: what the doctor judges old reports by; never candidates
    reference_builds: tuple[TorchBuild, ...] = ()
    # PyPI's win_amd64 build of each release (curated [[pypi_windows]], cuda None: CPU-only):
    # what the doctor judges a bare torch on Windows by; never candidates
    windows_builds: tuple[TorchBuild, ...] = ()

    def arch_for(self, arch: str, cuda: str) -> tuple[str, ArchRename | None]:
        """``arch`` as CUDA ``cuda`` names it ("sm_101" → "sm_110" from 13.0 on), and the rename
        that applied (None: the name is the same)."""
        from envgen.versions import dotted_key

        for r in self.arch_renames:
            if r.old == arch and dotted_key(cuda) >= dotted_key(r.cuda):
                return r.new, r
        return arch, None

    def cxx_std(self, std: str) -> CxxStd | None:
        return next((c for c in self.compilers if c.std == std), None)

    @property
    def framework_names(self) -> tuple[str, ...]:
        seen = dict.fromkeys(self.policy.framework_order)
        seen.update(dict.fromkeys(r.framework for r in self.frameworks))
        return tuple(n for n in seen if any(r.framework == n for r in self.frameworks))


def to_jsonable(obj: Any) -> Any:
    """A dataclass (or nest of them) as plain JSON-able data, tuples as lists."""
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return {k: to_jsonable(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    return obj
