"""Rules about CUDA: the nvcc extension builds use against torch's CUDA (each framework
release's own check, as the resolver reads it), CUDA_HOME against PATH, the driver's floor for
torch's CUDA, the GPUs against the toolkit, torch's compiled archs and the ops' floors (which
NCCL torch loads: rules_nccl.py)."""

from __future__ import annotations

import re
import shlex

from envgen.doctor.context import Context, known, major_minor, public
from envgen.doctor.reports.errors import arch_of, container_cuda, driver_cuda
from envgen.doctor.rules_release import _make
from envgen.doctor.snapshot import UNKNOWN
from envgen.resolve.checks import cc_of
from envgen.versions import dotted_key


def _mm(v: str) -> str:
    return major_minor(v)


def _builds_ops(ctx: Context) -> list[str]:
    """The frameworks (releases whose build compiles against torch) that build CUDA ops."""
    return [f for f in ctx.frameworks
            if any(ctx.checks.against_torch(r) for r in ctx.releases(f))]


def _toolkit_fix(ctx: Context, cuda: str) -> tuple[str, str | None]:
    """How to get an nvcc of CUDA ``cuda``: (words, command)."""
    path_nvcc, path_home = ctx.s.path_nvcc, ctx.s.path_cuda_home
    if known(path_nvcc) and _mm(path_nvcc) == cuda and known(path_home):
        return (f"the nvcc on PATH ({path_home}) is CUDA {path_nvcc}: point CUDA_HOME at it",
                f"export CUDA_HOME={shlex.quote(path_home)}")
    toolchain = ctx.facts.toolchain
    rule = toolchain.rule("venv", cuda) if toolchain else None
    if rule is not None and rule.requirements and rule.cuda_home:
        reqs = [r.format(cuda=cuda) for r in rule.requirements]
        home = (f"$({ctx.shell_python} -c \"import sysconfig; "
                f"print(sysconfig.get_paths()['purelib'])\")/{rule.cuda_home}")
        return (f"install CUDA {cuda}'s compiler and headers from PyPI and point CUDA_HOME at "
                f"them ({rule.source.split(' ')[0]})",
                f"{ctx.pip('install', *reqs)} && export CUDA_HOME={home}")
    rule = toolchain.rule("conda", cuda) if toolchain else None
    if rule is not None:
        release = toolchain.conda_releases.get(cuda, cuda)
        channels = [c.format(cuda=cuda, release=release) for c in rule.channels]
        specs = [s.format(cuda=cuda, release=release) for s in rule.specs]
        chan = " ".join(f"-c {shlex.quote(c)}" for c in (*channels, "conda-forge"))
        return (f"install CUDA {cuda}'s compiler and headers into the conda environment "
                f"({rule.source.split(' ')[0]}) and point CUDA_HOME at it",
                f"conda install -y {chan} {' '.join(shlex.quote(s) for s in specs)} && "
                "export CUDA_HOME=$CONDA_PREFIX")
    return (f"install the CUDA {cuda} toolkit and point CUDA_HOME at it", None)


def _torch_for(ctx: Context, cuda: str) -> str | None:
    """The pip command that installs this torch release built for CUDA ``cuda``, if any."""
    if not known(ctx.s.torch):
        return None
    version = public(ctx.s.torch)
    for b in ctx.facts.torch_builds:
        if b.version == version and b.cuda == cuda and b.platform == ctx.platform:
            url = ctx.index_urls.get(b.index)
            args = ["install", b.pin]
            if b.index != "pypi" and url:
                args += ["--index-url", url]
            elif b.index != "pypi":
                continue
            return ctx.pip(*args)
    return None


def _nvcc_missing(ctx: Context, torch_cuda: str | None) -> None:
    """No nvcc where the build looks (``torch_cuda``: torch's CUDA, None when not known)."""
    if torch_cuda:
        fix, command = _toolkit_fix(ctx, _mm(torch_cuda))
    else:
        fix, command = ("install the CUDA toolkit of torch's CUDA (`python -c \"import torch; "
                        "print(torch.version.cuda)\"`) and point CUDA_HOME at it"), None
    home = ctx.s.cuda_home if known(ctx.s.cuda_home) else None
    if home and re.search(r"^:|:$|^/.*:", home):  # POSIX list syntax, not "C:\\"
        fix = (f"CUDA_HOME is {home!r}: a list of paths (an `export CUDA_HOME=$CUDA_HOME:…` "
               "appended to an empty value), not the toolkit's folder; set it to the one "
               "folder holding bin/nvcc, or " + fix)
    ctx.finding("nvcc_missing",
                "no nvcc (CUDA_HOME, PATH): the ops cannot be compiled"
                + (f" for torch's CUDA {torch_cuda}" if torch_cuda else ""),
                evidence={"nvcc": None, "cuda_home": home, "torch_cuda": torch_cuda},
                fix=fix + " (prebuilt ops still load; JIT-built ones cannot build)",
                command=command)


def cuda_mismatch(ctx: Context) -> None:
    torch_cuda, nvcc = ctx.s.torch_cuda, ctx.s.nvcc
    if ctx.s.torch is None:
        return  # no torch: nothing to compile against (torch_unsupported_by_framework says so)
    if nvcc is None and "no_nvcc" in (ctx.s.errors if known(ctx.s.errors) else {}):
        # the pasted build ran an nvcc that is not there: a build, whatever the framework
        _nvcc_missing(ctx, torch_cuda if known(torch_cuda) and torch_cuda else None)
        return
    errors = ctx.s.errors if known(ctx.s.errors) else {}
    # a framework that builds ops, ops the user builds, or a pasted extension build
    builders = _builds_ops(ctx)
    building = bool(builders or ctx.user_ops or "ext_build" in errors
                    or "cuda_mismatch" in errors)
    if not known(torch_cuda):
        if torch_cuda is UNKNOWN and building:
            ctx.need("torch_cuda", "the ops are compiled for torch's CUDA",
                     f"`{ctx.shell_python} -c \"import torch; print(torch.version.cuda)\"`")
            if nvcc is UNKNOWN:
                ctx.need("nvcc", "the build compiles with the nvcc of CUDA_HOME (or PATH): "
                         "whether it is there, and its CUDA against torch's, decide the build",
                         "`$CUDA_HOME/bin/nvcc --version` (or `nvcc --version` when CUDA_HOME "
                         "is unset)")
        return
    if nvcc is UNKNOWN and "apex_cuda" in errors:
        ctx.need("nvcc", f"apex's setup.py refuses an nvcc whose CUDA (major or minor) differs "
                 f"from torch's {_mm(torch_cuda)}: its version says which toolkit to change",
                 "`$CUDA_HOME/bin/nvcc --version` (or `nvcc --version` when CUDA_HOME is unset)")
        return
    if nvcc is UNKNOWN:
        if building:
            ctx.need("nvcc", "the ops' build compares the nvcc it uses with torch's CUDA",
                     "`$CUDA_HOME/bin/nvcc --version` (or `nvcc --version` when CUDA_HOME "
                     "is unset)")
        return
    if nvcc is None:
        if building:
            _nvcc_missing(ctx, torch_cuda)
        return
    want, have = _mm(torch_cuda), _mm(nvcc)
    if want == have:
        return
    skip = known(ctx.s.env) and ctx.s.env.get("DS_SKIP_CUDA_CHECK") == "1"
    fix, command = _toolkit_fix(ctx, want)
    torch_cmd = _torch_for(ctx, have)
    evidence = {"nvcc": nvcc, "torch_cuda": torch_cuda, "cuda_home": ctx.s.cuda_home}
    also = (f"; or install torch built for CUDA {have}: `{torch_cmd}`" if torch_cmd else "")
    if want.split(".")[0] != have.split(".")[0]:
        ctx.finding("cuda_major_mismatch",
                    f"nvcc {nvcc} (CUDA {have}) and torch's CUDA {want} differ in major "
                    "version: torch's extension build and the frameworks' op builds refuse it",
                    evidence=evidence, fix=fix + also, command=command or torch_cmd)
        return
    refused = errors.get("cuda_mismatch")
    if refused:  # the pasted line: the op build itself raised on this pair
        ctx.finding("cuda_minor_mismatch",
                    f"nvcc {nvcc} (CUDA {have}) ≠ torch's CUDA {want}: the pasted op build "
                    "refused this pair (the framework release that ran requires the same "
                    "major.minor)",
                    evidence=evidence, fix=fix + also, command=command or torch_cmd,
                    explains=refused)
        return
    found = len(ctx.findings)
    for framework in builders:
        def refuses(fw, have=have, want=want):
            if fw.build is None or not fw.build.read:
                return None
            ok, why = fw.build.nvcc_accepts(have, want)
            return why if ok is False else None

        why, hits = ctx.over_releases(framework, refuses)
        if not why:
            continue
        release = ctx.releases(framework)[0]
        skip_var = release.build.skip_cuda_check if release.build else None
        severity = "warning" if skip and skip_var == "DS_SKIP_CUDA_CHECK" else None
        ctx.finding("cuda_minor_mismatch",
                    f"nvcc {nvcc} (CUDA {have}) ≠ torch's CUDA {want}: {framework} "
                    f"{ctx.frameworks[framework] or '(any release)'}'s op build refuses it: "
                    f"{why}" + (f" ({skip_var}=1 is set: the check only warns, and the build "
                                "may fail later)" if severity else ""),
                    evidence={**evidence, framework: ctx.frameworks[framework],
                              "releases": hits},
                    fix=fix + also, command=command or torch_cmd, severity=severity,
                    source=release.build.source_url if release.build else None)
    if len(ctx.findings) == found and "ext_build" in errors and \
            dotted_key(have) < dotted_key(want):
        ctx.finding("cuda_minor_mismatch",
                    f"the extension build failed with nvcc {nvcc} (CUDA {have}), older than the "
                    f"CUDA {want} torch was built with: torch only warns about a minor "
                    "difference, but the extension then compiles torch's CUDA code with an "
                    "older toolkit than torch's, a usual cause of such failures",
                    evidence=evidence, severity="warning", fix=fix + also,
                    command=command or torch_cmd, explains=errors["ext_build"],
                    source=ctx.catalog.section("error_lines").get("older_toolkit"))


def cuda_home_mismatch(ctx: Context) -> None:
    s = ctx.s
    env = s.env if known(s.env) else {}
    if not known(s.path_nvcc) or not known(s.cuda_home):
        return
    torch_cuda = _mm(s.torch_cuda) if known(s.torch_cuda) else None
    if "CUDA_HOME" in env and s.nvcc is None:
        ctx.finding("cuda_home_mismatch",
                    f"CUDA_HOME={env['CUDA_HOME']} has no bin/nvcc, but PATH has nvcc "
                    f"{s.path_nvcc}: torch's extension builds use CUDA_HOME's and fail",
                    evidence={"CUDA_HOME": env["CUDA_HOME"], "path_nvcc": s.path_nvcc,
                              "path_cuda_home": s.path_cuda_home},
                    fix="point CUDA_HOME at the toolkit of the nvcc on PATH (or unset it)",
                    command=(f"export CUDA_HOME={shlex.quote(s.path_cuda_home)}"
                             if known(s.path_cuda_home) else "unset CUDA_HOME"),
                    severity="error")  # the build runs CUDA_HOME/bin/nvcc, which is not there
        return
    if not known(s.nvcc) or _mm(s.nvcc) == _mm(s.path_nvcc):
        return
    matches_path = torch_cuda is not None and _mm(s.path_nvcc) == torch_cuda
    severity = None if matches_path else "warning"
    ctx.finding("cuda_home_mismatch",
                f"CUDA_HOME ({s.cuda_home}) holds nvcc {s.nvcc} but the nvcc on PATH is "
                f"{s.path_nvcc}: extension builds use CUDA_HOME's"
                + (f", and torch was built for CUDA {torch_cuda}" if torch_cuda else ""),
                evidence={"cuda_home": s.cuda_home, "nvcc": s.nvcc, "path_nvcc": s.path_nvcc,
                          "path_cuda_home": s.path_cuda_home, "torch_cuda": s.torch_cuda},
                fix=("point CUDA_HOME at the toolkit on PATH, which matches torch's CUDA"
                     if matches_path else
                     "make CUDA_HOME and PATH name one toolkit (the one matching torch's CUDA)"),
                command=(f"export CUDA_HOME={shlex.quote(s.path_cuda_home)}"
                         if matches_path and known(s.path_cuda_home) else None),
                severity=severity)


def _driver_floor(ctx: Context, cuda: str) -> tuple[str, str | None] | None:
    """NVIDIA's minimum driver for CUDA ``cuda`` and its source: the harvested toolkit's, else
    the curated floor (curated/cuda.toml, also for CUDA older than the harvested toolkits)."""
    toolkit = ctx.toolkit(cuda)
    if toolkit is not None and toolkit.min_driver:
        return toolkit.min_driver, toolkit.driver_source
    floor = ctx.facts.driver_floors.get(_mm(cuda))
    return (floor.min_driver, floor.source) if floor else None


def _toolkit_driver(ctx: Context, cuda: str) -> tuple[str, str | None] | None:
    """The Linux driver of CUDA ``cuda``'s GA release and its source (curated/cuda.toml
    ``toolkit_driver``): the oldest whose reported CUDA version is ``cuda``."""
    toolkit = ctx.toolkit(cuda)
    if toolkit is not None and toolkit.toolkit_driver:
        return toolkit.toolkit_driver, toolkit.driver_source
    floor = ctx.facts.driver_floors.get(_mm(cuda))
    return (floor.toolkit_driver, floor.source) if floor and floor.toolkit_driver else None


def _driver_runs(ctx: Context, driver: str) -> list[str]:
    """The CUDA releases whose minimum driver ``driver`` meets, oldest first."""
    floors = {c: f.min_driver for c, f in ctx.facts.driver_floors.items()}
    floors.update({c: t.min_driver for c, t in ctx.facts.toolkits.items() if t.min_driver})
    return sorted((c for c, low in floors.items() if dotted_key(low) <= dotted_key(driver)),
                  key=dotted_key)


def driver_too_old(ctx: Context) -> None:
    """The driver against the floor of torch's CUDA; else the error line that says the driver
    is too old ("found version 11060", "CUDA driver version is insufficient …")."""
    torch_cuda, driver = ctx.s.torch_cuda, ctx.s.driver
    errors = ctx.s.errors if known(ctx.s.errors) else {}
    if errors.get("container_cuda"):
        _container_refused(ctx, errors["container_cuda"])
        return
    line = errors.get("driver_old")
    floor = _driver_floor(ctx, torch_cuda) if known(torch_cuda) and torch_cuda else None
    if floor is not None and driver is UNKNOWN and not line:
        why = f"torch's CUDA {_mm(torch_cuda)} needs driver ≥ {floor[0]}"
        if "cuda_unavailable" in errors:
            why = f"CUDA is not available: {why}, and an older driver is the usual cause"
        ctx.need("driver", why, "`nvidia-smi --query-gpu=driver_version --format=csv,noheader`")
    elif floor is not None and known(driver) and driver and re.fullmatch(r"\d+(?:\.\d+)*", driver) \
            and dotted_key(driver) < dotted_key(floor[0]):
        runs = _driver_runs(ctx, driver)
        ctx.finding("driver_too_old",
                    f"driver {driver} is older than the {floor[0]} CUDA {_mm(torch_cuda)} needs "
                    "(even with minor-version compatibility): CUDA calls fail with 'CUDA driver "
                    "version is insufficient for CUDA runtime version'",
                    evidence={"driver": driver, "torch_cuda": torch_cuda, "needs": floor[0]},
                    fix=f"upgrade the driver to ≥ {floor[0]}, or use torch built for a CUDA this "
                        "driver runs" + (f" (CUDA {runs[0]} … {runs[-1]})" if runs else ""),
                    command=_make(ctx, next(iter(ctx.frameworks), None)),
                    source=floor[1])
        return
    if line:
        _driver_from_error(ctx, line, floor)
    elif "cuda_unavailable" in errors and not known(torch_cuda):
        ctx.need("torch_cuda", "CUDA is not available: a CPU build of torch (torch.version.cuda "
                 "None) or a driver older than torch's CUDA needs are the usual causes",
                 f"`{ctx.shell_python} -c \"import torch; print(torch.__version__, "
                 "torch.version.cuda)\"` and `nvidia-smi`")


def _container_refused(ctx: Context, line: str) -> None:
    """nvidia-container-cli refused to start a container whose image requires CUDA ≥ X (its
    NVIDIA_REQUIRE_CUDA): the driver supports less. The check compares the CUDA version the
    driver reports (nvidia-smi's "CUDA Version"), so minor-version compatibility does not
    count: the driver must be the toolkit's own (its GA release's driver)."""
    needs = container_cuda(line)
    floor = _toolkit_driver(ctx, needs) if needs else None
    driver = ctx.s.driver if known(ctx.s.driver) else None
    ctx.finding("driver_too_old",
                f"the container's image requires CUDA ≥ {needs} (its NVIDIA_REQUIRE_CUDA), more "
                f"than the driver{' ' + driver if driver else ''} supports: nvidia-container-cli "
                "refused to start it",
                evidence={"driver": driver, "image_requires_cuda": needs,
                          "needs": floor[0] if floor else None},
                fix=(f"upgrade the host's driver to ≥ {floor[0]}" if floor else
                     f"upgrade the host's driver to one that supports CUDA {needs}")
                    + ", or use an image built for the CUDA the driver supports (`nvidia-smi` "
                      "shows it as \"CUDA Version\")",
                source=" ; ".join(s for s in (
                    ctx.catalog.section("error_lines").get("container_cuda"),
                    floor[1] if floor else None) if s),
                explains=line)


def _driver_from_error(ctx: Context, line: str, floor: tuple[str, str | None] | None) -> None:
    supports = driver_cuda(line)
    torch_cuda = ctx.s.torch_cuda if known(ctx.s.torch_cuda) else None
    summary = "the NVIDIA driver is older than torch's CUDA runtime needs"
    if supports:
        summary += f": it supports CUDA ≤ {supports}"
    if torch_cuda and floor:
        summary += f"; torch's CUDA {_mm(torch_cuda)} needs driver ≥ {floor[0]}"
    fix = (f"upgrade the driver to ≥ {floor[0]}" if floor else
           "upgrade the driver (`nvidia-smi` shows its version and the CUDA it supports)")
    fix += ", or install a torch built for a CUDA this driver runs"
    if supports:
        fix += f" (CUDA ≤ {supports})"
    ctx.finding("driver_too_old", summary,
                evidence={"driver": ctx.s.driver if known(ctx.s.driver) else None,
                          "driver_supports_cuda": supports, "torch_cuda": torch_cuda,
                          "needs": floor[0] if floor else None},
                fix=fix, source=floor[1] if floor else None)


def _torch_runs(archs: tuple[str, ...], arch: str) -> bool:
    """Whether a torch compiled for ``archs`` (sm_XY SASS, compute_XY PTX) runs on ``arch``."""
    major, minor = cc_of(arch)
    for a in archs:
        a = a.strip().lower()
        if a.startswith("compute_"):
            if cc_of("sm_" + a[8:]) <= (major, minor):
                return True
        elif a.startswith("sm_") or re.fullmatch(r"\d+\.\d+[af]?", a):
            m, n = cc_of(a)
            if m == major and n <= minor:
                return True
    return False


def gpu_arch_unsupported(ctx: Context) -> None:
    if not ctx.gpu_archs:
        return
    arch_list = ctx.s.torch_arch_list if known(ctx.s.torch_arch_list) else None
    build = ctx.torch_build
    if arch_list is None and build is not None and build.archs is not None:
        arch_list = (*build.archs, *(f"compute_{p.removeprefix('compute_')}"
                                     for p in build.archs_ptx))
    toolkit = ctx.toolkit(ctx.s.nvcc) if known(ctx.s.nvcc) else None
    errors = ctx.s.errors if known(ctx.s.errors) else {}
    for name, arch in ctx.gpu_archs:
        if arch is None:
            ctx.need(f"compute capability of {name}",
                     "the GPU's architecture decides which kernels run on it",
                     "`nvidia-smi --query-gpu=name,compute_cap --format=csv`")
            continue
        # torch's capability warning comes only from a CUDA build
        cuda_build = (known(ctx.s.torch_cuda) and ctx.s.torch_cuda) or "gpu_capability" in errors
        if cuda_build and arch_list and not _torch_runs(tuple(arch_list), arch):
            torch = f"torch {ctx.s.torch}" if known(ctx.s.torch) else "this torch build"
            ctx.finding("gpu_arch_unsupported",
                        f"{torch} was compiled for {', '.join(arch_list)}: no "
                        f"kernel runs on {name} ({arch}) — 'no kernel image is available "
                        "for execution on the device'",
                        evidence={"gpu": name, "arch": arch, "torch": ctx.s.torch,
                                  "torch_arch_list": list(arch_list)},
                        fix="install a torch build compiled for this GPU",
                        command=_make(ctx, next(iter(ctx.frameworks), None)),
                        source=build.archs_source if build else None)
        if toolkit is not None and toolkit.archs and arch not in toolkit.archs \
                and (_builds_ops(ctx) or ctx.user_ops):
            ctx.finding("gpu_arch_unsupported",
                        f"nvcc {ctx.s.nvcc} cannot compile for {name} ({arch}): its ptxas knows "
                        f"{toolkit.archs[0]} … {toolkit.archs[-1]}",
                        evidence={"gpu": name, "arch": arch, "nvcc": ctx.s.nvcc},
                        fix="use a CUDA toolkit (and torch) new enough for this GPU",
                        command=_make(ctx, next(iter(ctx.frameworks), None)),
                        source=toolkit.source.url if toolkit.source else None)
        for framework in ctx.frameworks:
            for release in ctx.releases(framework)[:1]:
                for op in (release.build.ops if release.build and release.build.read else ()):
                    if op.name not in ctx.user_ops:
                        continue
                    low = op.min_cc and cc_of(arch) < cc_of(op.min_cc)
                    high = op.max_cc and cc_of(arch) > cc_of(op.max_cc)
                    if low or high:
                        bound = f"≥ {op.min_cc}" if low else f"≤ {op.max_cc}"
                        ctx.finding("gpu_arch_unsupported",
                                    f"{framework} {release.version}'s {op.name} op needs a GPU "
                                    f"of compute capability {bound}; {name} is {arch}",
                                    evidence={"gpu": name, "arch": arch, "op": op.name},
                                    fix=f"do not use {op.name} on this GPU (or use a GPU it "
                                        "supports)",
                                    source="; ".join(op.evidence[:1]) or None)


def gpu_arch_from_error(ctx: Context) -> None:
    """The error lines that say a GPU architecture is missing, when the facts alone did not:
    torch's capability warning, "no kernel image is available" / "invalid device function",
    and nvcc's "Unsupported gpu architecture 'compute_86'"."""
    errors = ctx.s.errors if known(ctx.s.errors) else {}
    if any(f.kind == "gpu_arch_unsupported" for f in ctx.findings):
        return
    make = _make(ctx, next(iter(ctx.frameworks), None))
    gpu = next(((n, a) for n, a in ctx.gpu_archs if a), None)
    if "gpu_capability" in errors and gpu:
        # older torch's "Found GPU0 … which is of cuda capability 5.0. PyTorch no longer supports
        # this GPU because it is too old." (the line kept may be its first half)
        old = re.search(r"no longer supports this GPU|which is of cuda capability",
                        errors["gpu_capability"], re.I) is not None
        ctx.finding("gpu_arch_unsupported",
                    f"torch {ctx.s.torch if known(ctx.s.torch) else ''} has no kernels for "
                    f"{gpu[0]} ({gpu[1]}): torch's own check says so".replace("  ", " "),
                    evidence={"gpu": gpu[0], "arch": gpu[1], "torch": ctx.s.torch},
                    fix=f"install a torch build whose arch list includes {gpu[1]} (torch."
                        "cuda.get_arch_list() shows this one's)" + (
                            ", e.g. an older torch release that still supported this GPU, or "
                            "torch built from source for it" if old else ""),
                    command=make, source=ctx.catalog.section("error_lines").get("gpu_too_old")
                    if old else None)
        return
    line = errors.get("no_kernel")
    if line:
        invalid = "invalid device function" in line.lower()
        if not gpu:
            ctx.need("gpu", "the GPU's compute capability against the archs the code was "
                     "compiled for decides which part lacks a kernel",
                     "`nvidia-smi --query-gpu=name,compute_cap --format=csv`")
        if not known(ctx.s.torch_arch_list):
            ctx.need("torch_arch_list", "the archs torch was compiled for",
                     f"`{ctx.shell_python} -c \"import torch; print(torch.cuda.get_arch_list())\"`")
        on = f" for {gpu[0]} ({gpu[1]})" if gpu else " for this GPU's architecture"
        ctx.finding("gpu_arch_unsupported",
                    f"the code that ran has no kernel compiled{on}: torch or an extension was "
                    "built for other GPUs",
                    evidence={"gpu": gpu[0] if gpu else None, "arch": gpu[1] if gpu else None,
                              "torch": ctx.s.torch, "error": "invalid device function"
                              if invalid else "no kernel image is available"},
                    fix="compare torch.cuda.get_arch_list() with the GPU's capability: install "
                        "a torch build that includes it, or rebuild the extension with "
                        "TORCH_CUDA_ARCH_LIST set to it on the machine that runs it",
                    command=make if gpu else None, severity="warning" if invalid else None)
        return
    line = errors.get("nvcc_arch")
    arch = arch_of(line) if line else None
    if arch:
        _nvcc_arch(ctx, arch)


def _nvcc_arch(ctx: Context, arch: str) -> None:
    """nvcc refused ``arch``: too new for this toolkit, or dropped by it; which toolkits of the
    matrix target it (harvested cuda.json archs) says which."""
    nvcc = _mm(ctx.s.nvcc) if known(ctx.s.nvcc) and ctx.s.nvcc else None
    toolkits = ctx.facts.toolkits
    having = sorted((c for c, t in toolkits.items() if arch in t.archs), key=dotted_key)
    newest = max(toolkits, key=dotted_key) if toolkits else None
    known_archs = sorted({a for t in toolkits.values() for a in t.archs}, key=cc_of)
    dropped = bool(having) and newest not in having and (
        nvcc is None or dotted_key(nvcc) > dotted_key(having[-1]))
    if not having and known_archs and cc_of(arch) < cc_of(known_archs[0]):
        dropped = True
    if dropped:
        summary = (f"nvcc {nvcc or ''} no longer targets {arch}".replace("  ", " ")
                   + (f": the last CUDA in envgen's matrix that does is {having[-1]}" if having
                      else f": no CUDA in envgen's matrix ({min(toolkits, key=dotted_key)} …) "
                      "does"))
        fix = (f"drop {arch} from TORCH_CUDA_ARCH_LIST (or the build's -gencode flags), or use "
               "a CUDA toolkit that still targets it" + (f" (≤ {having[-1]})" if having else ""))
    else:
        summary = (f"nvcc {nvcc or ''} is older than {arch} needs".replace("  ", " ")
                   + (f": CUDA {having[0]} … {having[-1]} in envgen's matrix target it" if having
                      else ": no CUDA toolkit in envgen's matrix targets it yet"))
        fix = ("use a newer CUDA toolkit (and a torch built for it) that targets this GPU, or "
               f"leave {arch} out of TORCH_CUDA_ARCH_LIST when the GPU that runs it is older")
    ctx.finding("gpu_arch_unsupported", summary,
                evidence={"arch": arch, "nvcc": ctx.s.nvcc if known(ctx.s.nvcc) else None,
                          "toolkits_targeting": having},
                fix=fix, source=ctx.catalog.section("error_lines").get("nvcc_arch"))


RULES = (cuda_mismatch, cuda_home_mismatch, driver_too_old, gpu_arch_unsupported,
         gpu_arch_from_error)
