"""What the doctor cannot judge: the facts of a snapshot that lie outside the range envgen's
data covers, each said as a :class:`Coverage` note, so that no finding about them reads as
"not judged" rather than "fine".

Input: the :class:`Context` the rules ran on. Output: the coverage notes; where one fact would
decide what was not judged, it is asked for (``ctx.need``). Ranges checked:

- torch: a nightly, dev or local build (``2.1.0.dev20230519``, ``2.1.0a0+32f93b1``,
  ``1.8.0+git1234``), a release older (or newer) than the matrix's torch builds (the harvested
  ones and, before them, the reference builds of 1.0 … 1.12 from curated rows), or a
  release / CUDA the matrix has no build of: the rules that look up its build did not run;
  a reference build: what only its wheels would tell (headers, pins, Python tags) was not
  judged; an old release that named no CUDA, judged as PyPI's default build of it, or a bare
  version on Windows, judged as PyPI's (CPU-only) Windows build: its CUDA is asked for; a
  build whose GPU arch list is unknown, with GPUs named: whether it runs on them;
- the CUDA torch was built with, against the driver floors (curated/cuda.toml ``[[toolkit]]``,
  judged by rules_cuda.driver_too_old): a CUDA older than the first floor is a note;
- nvcc older than the matrix's first toolkit (its host-compiler ceiling was not checked);
- GPUs whose compute capability is not given and not in curated/gpus.toml;
- Windows and macOS (the matrix's builds and rules are Linux's);
- a framework release the matrix does not have (judge.py asks for it; here it is a note);
- a fact a pasted report states twice, differently (from lists or tools' output, not prose):
  judged with the first, and asked for.
"""

from __future__ import annotations

import re

from envgen.doctor.context import Context, gpu_arch_by_name, known, major_minor, public
from envgen.doctor.findings import Coverage
from envgen.versions import dotted_key, parse_version, release

_RELEASED_LOCAL = re.compile(r"^(cu\d+|cpu|rocm[\d.]+|xpu)$")
_ARCH_LIST = ("torch_arch_list", "the GPU archs torch was compiled for decide whether it runs on "
              "these GPUs", '`python -c "import torch; print(torch.cuda.get_arch_list())"`')


def _version(text: str):
    try:
        return parse_version(text)
    except Exception:  # an unparseable version is outside every range
        return None


def _unreleased(torch: str) -> str | None:
    """Why ``torch`` is not a released build ("a nightly/dev build" …), or None."""
    version = _version(torch)
    if version is None:
        return "a version envgen cannot read"
    if version.is_devrelease:
        return "a nightly/dev build"
    if version.is_prerelease:
        return "a pre-release or source build"
    if version.local and not _RELEASED_LOCAL.match(version.local):
        return "a local/source build"
    return None


def _torch(ctx: Context, out: list[Coverage]) -> None:
    torch = ctx.s.torch
    if not known(torch):
        return
    builds = (*ctx.facts.torch_builds, *ctx.facts.reference_builds)
    versions = sorted({b.version for b in builds}, key=dotted_key)
    span = f"{versions[0]} … {versions[-1]}" if versions else "none"
    why = _unreleased(torch)
    if why:
        out.append(Coverage("torch", f"torch {torch} is {why}: the matrix holds released builds "
                            f"({span}), so the torch rules that look up its build (GPU archs, "
                            "C++ ABI, bundled NCCL) were skipped"))
    elif versions and release(torch) < dotted_key(versions[0]):
        out.append(Coverage("torch", f"torch {torch} is older than the first torch build the "
                            f"matrix knows ({versions[0]}): the rules that look up its build "
                            "(GPU archs, C++ ABI, bundled NCCL) were not applied"))
    elif versions and release(torch) > dotted_key(versions[-1]):
        out.append(Coverage("torch", f"torch {torch} is newer than the last torch build the "
                            f"matrix knows ({versions[-1]}): the rules that look up its build "
                            "were not applied (`envgen matrix update --write` for newer data)"))
    elif ctx.assumed_build is not None and ctx.assumed_build.platform == "windows-x86_64":
        _assumed(ctx)  # PyPI's Windows build: the matrix's Linux builds are not it
        return
    elif not ctx.torch_builds:
        cuda = ctx.s.torch_cuda
        built = ("for CUDA " + cuda if cuda else "CPU-only" if cuda is None else "")
        out.append(Coverage("torch", f"the matrix has no build of torch {public(torch)} "
                            f"{built} on {ctx.platform}".replace("  ", " ")
                            + ": the rules that look up its build (GPU archs, C++ ABI) were "
                            "not applied"))
    else:
        _build(ctx, out)
        return
    if not known(ctx.s.torch_arch_list) and known(ctx.s.gpus) and ctx.s.gpus:
        ctx.need(*_ARCH_LIST)


def _build(ctx: Context, out: list[Coverage]) -> None:
    """The snapshot's torch has a build in the matrix: what its facts leave unjudged."""
    build = ctx.torch_build
    if build in ctx.facts.reference_builds:
        first = min((b.version for b in ctx.facts.torch_builds), key=dotted_key, default=None)
        out.append(Coverage("torch", f"torch {ctx.s.torch} is older than the harvested torch "
                            f"builds ({first} …): the matrix knows its CUDA builds and their GPU "
                            "archs from curated rows (curated/torch.toml), not its wheels, so the "
                            "rules that read a wheel (C++ standard, bundled NCCL, Python tags) "
                            "were not applied"))
    _assumed(ctx)
    if build.cuda and build.archs is None and ctx.gpu_archs and \
            not known(ctx.s.torch_arch_list):
        why = build.archs_unknown or "no source in the matrix states it"
        gpus = ", ".join(name for name, _ in ctx.gpu_archs)
        out.append(Coverage("torch_arch_list", f"the GPU archs torch {ctx.s.torch} was compiled "
                            f"for are not known ({why}): whether it runs on {gpus} was not "
                            "judged"))
        ctx.need(*_ARCH_LIST)


def _assumed(ctx: Context) -> None:
    """Ask for torch's CUDA where it was assumed (judge.py: PyPI's build of a bare version)."""
    build = ctx.assumed_build
    if build is None:
        return
    if build.platform == "windows-x86_64":
        what = (f"PyPI's Windows build of {ctx.s.torch} ("
                + (f"CUDA {build.cuda}" if build.cuda else "CPU-only") + "), what `pip install "
                f"torch=={ctx.s.torch}` installs on Windows; a build from PyTorch's index "
                "(+cuXYZ) or conda's has CUDA")
    else:
        what = (f"PyPI's default build of {ctx.s.torch} (CUDA {build.cuda}), what `pip "
                f"install torch=={ctx.s.torch}` installs; a conda or +cuXYZ build may be built "
                "with another CUDA")
    ctx.need("torch_cuda", f"torch {ctx.s.torch} names no CUDA: it was judged as {what}",
             '`python -c "import torch; print(torch.version.cuda)"`')


def _driver(ctx: Context, out: list[Coverage]) -> None:
    cuda = ctx.s.torch_cuda
    if not known(cuda):
        if known(ctx.s.torch) and known(ctx.s.driver) and ctx.s.driver and not ctx.torch_builds:
            ctx.need("torch_cuda", f"the CUDA torch {ctx.s.torch} was built with decides whether "
                     f"driver {ctx.s.driver} runs it",
                     '`python -c "import torch; print(torch.version.cuda)"`')
        return
    if not cuda:
        return  # a CPU build: no driver needed
    mm = major_minor(cuda)
    toolkit = ctx.toolkit(cuda)
    floors = ctx.facts.driver_floors
    if (toolkit is not None and toolkit.min_driver) or mm in floors:
        return  # rules_cuda.driver_too_old judges it
    first = min(floors, key=dotted_key) if floors else None
    out.append(Coverage("torch_cuda", f"CUDA {mm} has no driver floor in envgen's data "
                        f"(they start at CUDA {first}): whether driver "
                        f"{ctx.s.driver or '(unknown)'} runs this torch was not judged"
                        if first else f"CUDA {mm}: no driver floors in the data"))


def _nvcc(ctx: Context, out: list[Coverage]) -> None:
    nvcc = ctx.s.nvcc
    if not known(nvcc) or not ctx.facts.toolkits or _version(nvcc) is None:
        return
    first = min(ctx.facts.toolkits, key=dotted_key)
    if dotted_key(major_minor(nvcc)) < dotted_key(first):
        out.append(Coverage("nvcc", f"nvcc {nvcc} is older than the first CUDA toolkit the "
                            f"matrix knows ({first}): its host-compiler ceiling and GPU archs "
                            "were not checked"))


def _gpus(ctx: Context, out: list[Coverage]) -> None:
    if not known(ctx.s.gpus):
        return
    unknown = [g.name for g in ctx.s.gpus
               if not g.compute_capability and gpu_arch_by_name(ctx.facts, g.name) is None]
    for name in dict.fromkeys(unknown):
        out.append(Coverage("gpu", f"GPU {name!r} is not in envgen's GPU catalogue "
                            "(curated/gpus.toml) and its compute capability was not given: "
                            "whether torch has kernels for it was not judged"))
    if unknown and not any("compute capability" in n.fact for n in ctx.needs):
        ctx.need("gpu", f"the compute capability of {', '.join(dict.fromkeys(unknown))} decides "
                 "whether torch has kernels for it",
                 "`nvidia-smi --query-gpu=name,compute_cap --format=csv`")


def _platform(ctx: Context, out: list[Coverage]) -> None:
    platform = ctx.s.platform if known(ctx.s.platform) else None
    os_text = str(ctx.s.os).lower() if known(ctx.s.os) else ""
    if platform == "windows" or (platform is None and "windows" in os_text):
        name = "Windows"
    elif (platform or "").startswith("macos") or (
            platform is None and any(w in os_text for w in ("macos", "darwin", "mac os"))):
        name = "macOS"
    else:
        return
    out.append(Coverage("platform", f"{name}: envgen's matrix and rules are Linux's (Linux "
                        "torch builds, glibc, libaio, apt/dnf fixes); what holds on Linux was "
                        "judged, what is particular to " + name + " was not"))


def _frameworks(ctx: Context, out: list[Coverage]) -> None:
    for name, version in ctx.frameworks.items():
        if version is None or ctx.releases(name):
            continue
        have = sorted((r.version for r in ctx.facts.frameworks if r.framework == name),
                      key=dotted_key)
        where = ("older than the first" if have and _version(public(version)) is not None
                 and release(version) < dotted_key(have[0]) else "not a")
        out.append(Coverage(name, f"{name} {version} is {where} release the matrix knows "
                            f"({have[0]} … {have[-1]}): its rules (torch range, nvcc check, "
                            "op builds) were not applied" if have else
                            f"{name} {version}: no release of it in the matrix"))


# how to get each fact a report may state twice (reports.Report.disputed); {python}: the
# interpreter the commands name
_HOW = {"torch": '`{python} -c "import torch; print(torch.__version__)"`',
        "torch_cuda": '`{python} -c "import torch; print(torch.version.cuda)"`',
        "nvcc": "`nvcc --version`", "python": "`{python} --version`", "gcc": "`gcc --version`",
        "glibc": "`ldd --version | head -1`",
        "driver": "`nvidia-smi --query-gpu=driver_version --format=csv,noheader`"}


def _disputed(ctx: Context, out: list[Coverage]) -> None:
    """A fact the report states twice, differently (two environments pasted, or one changed
    between runs): judged with the first, said, and asked for."""
    for name, values in ctx.disputed.items():
        out.append(Coverage(name, f"the report states {name} {values[0]} and also "
                                  f"{'; '.join(values[1:])}: judged with the first"))
        if name in _HOW:
            ctx.need(name, f"the report states two values of it ({values[0]}; "
                           f"{'; '.join(values[1:])}): the one of the failing run decides",
                     f"{_HOW[name].format(python=ctx.shell_python)} in the failing environment")


def check(ctx: Context) -> tuple[Coverage, ...]:
    """The coverage notes of ``ctx``'s snapshot (asking, via ``ctx.need``, for the facts that
    would decide what was not judged, and judging the driver against the older floors)."""
    out: list[Coverage] = []
    for part in (_disputed, _platform, _torch, _driver, _nvcc, _gpus, _frameworks):
        part(ctx, out)
    return tuple(dict.fromkeys(out))
