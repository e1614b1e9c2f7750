"""Value types for facts read from each release's own files, and the curated rules beside them.

- :class:`ReleaseFiles`: the real files a framework release publishes (wheel tags, sdist).
- :class:`BuildFacts`: what a framework release's build code states (DeepSpeed's
  ``op_builder/``, Colossal-AI's extension checks, Megatron-Core's setup): how it compares
  the system nvcc with torch's CUDA, its ``-std=c++NN`` flags, default GPU archs, per-op floors.
- :class:`TorchHeaders`: the C++ standard and host compiler minimums torch's headers enforce.
- Curated: :class:`ToolkitRelease` (every CUDA release with its driver), :class:`Gpu`,
  :class:`CxxStd`, :class:`Breakage` (a combination of conditions that is known broken).

Field meanings are documented in matrix/README.md; this module only gives them types.
"""

from __future__ import annotations

from dataclasses import dataclass

from envgen.versions import python_key, python_version, spec_contains


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelFile:
    """One wheel a release publishes, by its file tags."""

    filename: str
    python: tuple[str, ...]  # "3.11", "3.13t"; empty: any Python 3 (py3 / abi3 tags)
    abi: str
    platform: str  # "linux-x86_64", "linux-aarch64" or "any"
    glibc: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseFiles:
    """The files a framework release publishes: an sdist or not, and its wheels."""

    sdist: bool
    wheels: tuple[WheelFile, ...]
    windows: tuple[str, ...] | None = None  # Pythons of its win_amd64 wheels; None: not read

    def wheel_for(self, python: str, platform: str) -> WheelFile | None:
        """The wheel pip would take for ``python`` on ``platform`` (a platform wheel first),
        or None."""
        fitting = [w for w in self.wheels
                   if w.platform in (platform, "any")
                   and (not w.python or python in w.python
                        or (w.abi == "abi3" and _abi3_covers(w.python, python)))]
        fitting.sort(key=lambda w: (w.platform == "any", w.filename))
        return fitting[0] if fitting else None

    def describe(self, platform: str) -> str:
        tags = sorted({p for w in self.wheels if w.platform in (platform, "any")
                       for p in (w.python or ("py3",))})
        what = f"wheels for {', '.join(tags)}" if tags else f"no wheel for {platform}"
        return what + (" and an sdist" if self.sdist else ", no sdist")


def _abi3_covers(minimums: tuple[str, ...], python: str) -> bool:
    if python.endswith("t"):  # free-threaded builds have no stable ABI
        return False
    return any(python_key(python) >= python_key(m) for m in minimums)


@dataclass(frozen=True, slots=True, kw_only=True)
class StdRule:
    """``-std=c++<std>`` passed when torch and CUDA satisfy the (possibly empty) specifiers."""

    std: str
    torch: str = ""
    cuda: str = ""
    where: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpFacts:
    """One native op as a release's build code declares it (builder, compute capabilities,
    its own -std= flags, the libraries its compatibility probe links)."""

    name: str
    builder: str | None = None
    min_cc: str | None = None
    max_cc: str | None = None
    requires_cuda: str | None = None
    requires_torch: str | None = None
    evidence: tuple[str, ...] = ()
    needs_gpu: bool | None = None  # its ahead-of-time build needs a visible GPU
    gpu_override: str | None = None  # env var that lets that build proceed without one
    optional: bool | None = None  # a failed compile is skipped, not an error
    build_var: str | None = None  # the env var that turns its ahead-of-time build on or off
    cxx_std: tuple[StdRule, ...] = ()  # its own -std= flags (empty: builder.py's)
    nvcc_std: tuple[StdRule, ...] = ()
    libraries: tuple[str, ...] = ()  # what its is_compatible() links a probe against ("aio")
    refuses_platforms: tuple[str, ...] = ()  # sys.platform values it is not built on


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchEntry:
    """What a release's op builder makes of one ``TORCH_CUDA_ARCH_LIST`` entry (``9.0a``):
    ``kept`` (compiles for it), ``dropped`` (for it without its suffix), ``misread`` (for
    another arch), ``fails`` (the builder raises) or ``ignored`` (a JIT load uses the GPU's own
    capability); ``mode`` is ``aot`` (setup.py's build) or ``jit`` (a load at run time)."""

    mode: str
    entry: str
    result: str
    where: str
    detail: str

    @staticmethod
    def shape(arch: str) -> tuple[int, str]:
        """(digits of the major, suffix): ``sm_90a`` and ``9.0a`` → (1, "a"); ``sm_120`` →
        (2, "")."""
        name = arch.split("+")[0]
        if name.startswith("sm_"):
            digits = name[3:]
            suffix = digits[len(digits.rstrip("af")):]
            return len(digits.rstrip("af")) - 1, suffix
        major, _, minor = name.partition(".")
        return len(major), minor[len(minor.rstrip("af")):]


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildFacts:
    """What one framework release's build code states, read from its own files."""

    read: bool
    error: str | None = None
    origin: str | None = None  # "sdist" / "wheel"
    source_url: str | None = None
    source_sha256: str | None = None
    verified: str | None = None
    nvcc_check: str | None = None  # "allow-list" | "exact" | "major" | "none" | None (unknown)
    nvcc_mismatch: str | None = None  # what a failed check does: "raise" | "skip-build"
    skipped_without_gpu: bool | None = None  # the check accepts anything when no GPU is seen
    mismatch_ok: dict[str, tuple[str, ...]] | None = None  # CUDA major → major.minor list
    skip_cuda_check: str | None = None
    cxx_std: tuple[StdRule, ...] = ()
    nvcc_std: tuple[StdRule, ...] = ()
    default_archs: dict[str, tuple[str, ...]] | None = None  # nvcc CUDA → compute capabilities
    default_archs_where: str | None = None  # "op_builder/builder.py:79"
    arch_entries: tuple[ArchEntry, ...] | None = None  # None: not read
    ops: tuple[OpFacts, ...] = ()  # the ops whose build code states a condition
    op_names: tuple[str, ...] = ()  # every op the release builds
    requires_torch: str | None = None
    requires_cuda: str | None = None
    unread: tuple[str, ...] = ()

    def arch_entry(self, arch: str, mode: str) -> ArchEntry | None:
        """How this release's builder reads ``arch`` (``sm_90a``) in ``TORCH_CUDA_ARCH_LIST``
        in ``mode``: the read entry of the same shape; None when not read."""
        shape = ArchEntry.shape(arch)
        return next((e for e in self.arch_entries or () if e.mode == mode
                     and ArchEntry.shape(e.entry) == shape), None)

    def std(self, rules: tuple[StdRule, ...], torch: str, cuda: str) -> StdRule | None:
        """The first rule of ``rules`` (``cxx_std`` / ``nvcc_std``) that applies."""
        for rule in rules:
            if spec_contains(rule.torch or "", torch) and spec_contains(rule.cuda or "", cuda):
                return rule
        return None

    def nvcc_accepts(self, nvcc: str, torch_cuda: str) -> tuple[bool | None, str]:
        """Whether this release's build accepts a system nvcc ``nvcc`` (major.minor) for a
        torch built with ``torch_cuda``, and because of what; None when its check is not
        known. Versions may carry a patch ("12.1.105"): only major.minor counts, as in the
        releases' own checks."""
        nvcc, torch_cuda = ".".join(nvcc.split(".")[:2]), ".".join(torch_cuda.split(".")[:2])
        if nvcc == torch_cuda:
            return True, "same CUDA major.minor"
        check = self.nvcc_check if self.read else None
        major, torch_major = nvcc.split(".")[0], torch_cuda.split(".")[0]
        if check == "none":
            return True, "it compiles no CUDA code, so it runs no nvcc check"
        if check == "major":
            if major == torch_major:
                return True, "its check refuses only a different major"
            return False, "its check refuses a different major"
        if check == "exact":
            return False, "its check needs an equal major.minor"
        if check == "allow-list":
            if major != torch_major:
                return False, "a different major is never in its allow-list"
            ok = (self.mismatch_ok or {}).get(major, ())
            if nvcc in ok and torch_cuda in ok:
                return True, f"both are in its cuda_minor_mismatch_ok[{major}]"
            listed = ", ".join(ok) if ok else "nothing"
            return False, f"its cuda_minor_mismatch_ok[{major}] lists {listed}"
        return None, "its nvcc check was not read from the release"


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchHeaders:
    """The C++ standard and compiler minimums one torch release's headers enforce."""

    cxx_std: str | None = None
    cxx_std_where: str | None = None
    min_gcc: int | None = None
    min_gcc_where: str | None = None
    min_clang: int | None = None
    extension_std: str | None = None
    extension_min_gcc: str | None = None
    source_url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolkitRelease:
    """One CUDA toolkit release (curated) with its component versions and driver."""

    cuda: str
    release: str
    nvcc: str | None
    cudart: str | None
    driver: str | None
    source: str
    note: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """A GPU by name, with its aliases and sm architecture (curated)."""

    name: str
    aliases: tuple[str, ...]
    arch: str
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CxxStd:
    """A C++ standard and the oldest host compilers that support it (curated)."""

    std: str
    min_gcc: int | None
    min_clang: int | None
    source: str
    note: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Breakage:
    """A combination known broken: every given condition holds at once."""

    framework: str
    versions: str
    torch: str = ""
    cuda: str = ""
    python: str = ""
    what: str = ""
    checked_through: str | None = None
    source: str = ""
    note: str | None = None

    def matches_env(self, torch: str, cuda: str, python: str) -> bool:
        return (spec_contains(self.torch, torch) and spec_contains(self.cuda, cuda)
                and spec_contains(self.python, python_version(python)))

