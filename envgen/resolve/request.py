"""A resolve request: any subset of the axes, validated and normalized against the facts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from envgen.errors import UsageError
from envgen.facts.model import Facts, Toolchain
from envgen.versions import dotted_key, version_matcher

PLATFORMS = ("linux-x86_64", "linux-aarch64")
TARGET_FIELDS = ("pythons", "os_pythons")
DEFAULT_PLATFORM = PLATFORMS[0]
PLATFORM_ALIASES = {"x86_64": "linux-x86_64", "amd64": "linux-x86_64",
                     "aarch64": "linux-aarch64", "arm64": "linux-aarch64", "sbsa": "linux-aarch64"}
_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d{2,3})([af]?)$")
_CC_RE = re.compile(r"^(\d{1,2})\.(\d)([af]?)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What the user asked for. ``None`` means "any". Option names mirror the CLI flags."""

    framework: str | None = None
    framework_version: str | None = None
    torch: str | None = None
    cuda: str | None = None
    python: str | None = None
    os: str | None = None
    nccl: str | None = None
    gpu_arch: str | None = None
    gpu: str | None = None  # a GPU name (curated/gpus.toml); sets gpu_arch
    driver: str | None = None
    nvcc: str | None = None  # a fixed system CUDA toolkit (major.minor) instead of installing one
    flavor: str | None = None  # lock flavor whose toolchain must exist for the CUDA version
    platform: str = DEFAULT_PLATFORM
    # Not options: what the target has, set by `envgen make` for the venv flavors (they build
    # on a Python that is there). ``pythons``: this machine's (empty: any); ``os_pythons``:
    # per OS id, its base image's Python (--image; an OS not listed: any).
    pythons: tuple[str, ...] = ()
    os_pythons: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def given(self) -> dict[str, str]:
        """The axes the user constrained, in declaration order (platform only if not default)."""
        out = {}
        for name in (f.name for f in fields(Request)):
            v = getattr(self, name)
            if name in TARGET_FIELDS:
                continue  # not an option the user gave
            if name == "gpu_arch" and self.gpu is not None:
                continue  # derived from --gpu
            if v is not None and not (name == "platform" and v == DEFAULT_PLATFORM):
                out[name] = v
        return out

    def without(self, *axes: str) -> Request:
        """The request with ``axes`` unconstrained (the platform back to its default)."""
        if "gpu" in axes:
            axes = (*axes, "gpu_arch")
        empty = {"platform": DEFAULT_PLATFORM, "pythons": (), "os_pythons": ()}
        return replace(self, **{n: empty.get(n) for n in axes})

    def target_python(self, py: str, os_id: str | None = None) -> str | None:
        """Why the target has no Python ``py`` (on ``os_id``), or None when it has."""
        if self.pythons and py not in self.pythons:
            return (f"Python {py} is not on this machine (found: {', '.join(self.pythons)}); "
                    "--python X.Y locks for another")
        if os_id is not None:
            for os_, have in self.os_pythons:
                if os_ == os_id and py not in have:
                    return (f"the {os_id} base image has Python {', '.join(have)}, not {py} "
                            f"(the {self.flavor} flavor's image builds on the OS's Python)")
        return None

    def flags(self) -> str:
        return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.given().items())


def suggest(word: str, choices: list[str]) -> str:
    import difflib  # only when a value is wrong

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}? " if close else ""


def normalize_arch(value: str) -> str:
    """"sm_90", "sm90", "90", "9.0", "compute_90" → "sm_90"; keeps an a/f suffix."""
    v = value.strip().lower()
    m = _CC_RE.match(v)
    if m:
        return f"sm_{m.group(1)}{m.group(2)}{m.group(3)}"
    m = _ARCH_RE.match(v)
    if m:
        return f"sm_{m.group(1)}{m.group(2)}"
    raise UsageError(
        f"--gpu-arch {value!r} is not a GPU architecture",
        hint="give a compute capability such as --gpu-arch sm_90 (H100/H200), sm_80 (A100) "
        "or 8.6", source="--gpu-arch",
    )


def validate(request: Request, facts: Facts) -> Request:
    """Check every given axis against the facts; raise UsageError naming the fix."""
    changes: dict[str, str | None] = {}
    names = list(facts.framework_names)
    if request.framework is not None:
        fw = request.framework.strip().lower().replace("_", "-")
        if fw not in names:
            raise UsageError(
                f"unknown framework {request.framework!r}",
                hint=f"{suggest(fw, names)}known frameworks: {', '.join(names)}",
                source="--framework",
            )
        changes["framework"] = fw
    if request.framework_version is not None and request.framework is None:
        raise UsageError("--framework-version needs --framework",
                         hint="name the framework too, e.g. --framework deepspeed "
                         f"--framework-version {request.framework_version}",
                         source="--framework-version")
    for option, value in (("--torch", request.torch), ("--framework-version",
                                                        request.framework_version),
                          ("--nccl", request.nccl)):
        if value is not None:
            version_matcher(option, value)
    if request.os is not None:
        ids = sorted(facts.oses)
        if request.os not in facts.oses:
            raise UsageError(f"unknown OS {request.os!r}",
                             hint=f"{suggest(request.os, ids)}known OS bases: {', '.join(ids)}",
                             source="--os")
    if request.python is not None and not re.fullmatch(r"3\.\d{1,2}t?", request.python):
        raise UsageError(f"--python {request.python!r} is not a Python version",
                         hint="give major.minor, e.g. --python 3.11 (3.13t for free-threaded)",
                         source="--python")
    if request.cuda is not None:
        cuda = _cuda(request.cuda)
        if not re.fullmatch(r"\d{2}(\.\d)?", cuda):
            raise UsageError(f"--cuda {request.cuda!r} is not a CUDA version",
                             hint="give major.minor such as --cuda 12.1, or a major such as "
                             "--cuda 12", source="--cuda")
        changes["cuda"] = cuda
    if request.nvcc is not None:
        nvcc = _cuda(request.nvcc)
        m = re.fullmatch(r"(\d{1,2})\.(\d)(\.\d+)*", nvcc)
        if not m:
            raise UsageError(f"--nvcc {request.nvcc!r} is not a CUDA toolkit version",
                             hint="give the version `nvcc --version` prints as major.minor, "
                             "e.g. --nvcc 12.4 (a cluster's `module load cuda/12.4`)",
                             source="--nvcc")
        changes["nvcc"] = f"{m.group(1)}.{m.group(2)}"
    if request.flavor is not None:
        flavors = Toolchain.FLAVORS
        if request.flavor not in flavors:
            raise UsageError(f"unknown flavor {request.flavor!r}",
                             hint=f"{suggest(request.flavor, list(flavors))}use --flavor conda "
                             "(conda toolchain + pip packages), --flavor venv (pip only) or "
                             "--flavor os-package (the OS's own CUDA toolkit)",
                             source="--flavor")
        if request.flavor in Toolchain.OS_FLAVORS:
            _check_os_toolkit(request, facts)
    platform = PLATFORM_ALIASES.get(request.platform, request.platform)
    if platform not in PLATFORMS:
        raise UsageError(f"unknown platform {request.platform!r}",
                         hint=f"{suggest(platform, list(PLATFORMS))}use one of: "
                         f"{', '.join(PLATFORMS)}", source="--platform")
    changes["platform"] = platform
    if request.gpu is not None:
        gpu = facts.gpus.get(request.gpu.strip().lower().removeprefix("nvidia ").strip())
        if gpu is None:
            names = sorted({g.name for g in facts.gpus.values()})
            raise UsageError(f"unknown GPU {request.gpu!r}",
                             hint=f"{suggest(request.gpu, names)}known GPUs (curated/gpus.toml): "
                             f"{', '.join(names)}; or give its architecture with --gpu-arch",
                             source="--gpu")
        if request.gpu_arch is not None and normalize_arch(request.gpu_arch) != gpu.arch:
            raise UsageError(f"--gpu {request.gpu} is {gpu.arch}, but --gpu-arch says "
                             f"{request.gpu_arch}", hint="give one of --gpu / --gpu-arch",
                             source="--gpu-arch")
        changes["gpu"] = gpu.name
        request = replace(request, gpu_arch=gpu.arch)
    if request.gpu_arch is not None:
        arch = normalize_arch(request.gpu_arch)
        known = sorted({a for t in facts.toolkits.values() for a in t.archs})
        if known and arch not in known:
            raise UsageError(f"no CUDA toolkit in the matrix knows GPU architecture {arch}",
                             hint=f"{suggest(arch, known)}known: {', '.join(known)}",
                             source="--gpu-arch")
        changes["gpu_arch"] = arch
    if request.driver is not None:
        try:
            dotted_key(request.driver)
        except ValueError:
            raise UsageError(f"--driver {request.driver!r} is not a driver version",
                             hint="give the version nvidia-smi prints, e.g. --driver 535.104.05",
                             source="--driver") from None
    return replace(request, **changes)


def _check_os_toolkit(request: Request, facts: Facts) -> None:
    """--flavor os-package: the OS decides the toolkit, so it needs --os of an OS that ships one
    (harvested/os_toolkits.json), and no --nvcc."""
    shipping = ", ".join(f"{t.os} (CUDA {t.cuda})" for t in sorted(
        facts.os_toolkits.values(), key=lambda t: t.os) if t.os in facts.oses
    ) or "none in this matrix"
    if request.nvcc is not None:
        raise UsageError("--nvcc and --flavor os-package both choose the CUDA compiler",
                         hint="drop --nvcc: with --flavor os-package the nvcc is the one the OS "
                         "ships", source="--nvcc")
    if request.os is None:
        raise UsageError("--flavor os-package needs --os: each OS release ships its own CUDA "
                         "toolkit, and that toolkit decides what can be built",
                         hint=f"add --os; OSes with a CUDA toolkit package: {shipping}",
                         source="--flavor")
    if request.os not in facts.os_toolkits:
        raise UsageError(f"{request.os} ships no CUDA toolkit package in the matrix "
                         "(harvested/os_toolkits.json)",
                         hint=f"pick an OS that ships one: {shipping}; or use --flavor venv / "
                         "conda (`envgen matrix update` refreshes the OS package facts)",
                         source="--os")


def _cuda(value: str) -> str:
    """"cu121" → "12.1"; otherwise stripped."""
    text = value.strip().lower().removeprefix("cu")
    return f"{text[:2]}.{text[2]}" if re.fullmatch(r"\d{3}", text) else text


def matcher(option: str, value: str | None) -> Callable[[str], bool] | None:
    return None if value is None else version_matcher(option, value)


def cuda_matches(wanted: str | None, cuda: str) -> bool:
    if wanted is None:
        return True
    return cuda == wanted if "." in wanted else cuda.split(".")[0] == wanted
