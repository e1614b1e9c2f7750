"""Rules about CUDA: the nvcc extension builds use against torch's CUDA (each framework
release's own check, as the resolver reads it), CUDA_HOME against PATH, the driver's floor for
torch's CUDA, the GPUs against the toolkit, torch's compiled archs and the ops' floors, and
which NCCL torch loads."""

from __future__ import annotations

import re
import shlex

from envgen.doctor.context import Context, known, major_minor, public
from envgen.doctor.rules_release import _make
from envgen.doctor.snapshot import UNKNOWN
from envgen.resolve.checks import cc_of
from envgen.versions import dotted_key

_SO_VERSION = re.compile(r"libnccl\.so\.(\d+(?:\.\d+){1,2})")


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
        home = (f"$({shlex.quote(ctx.python)} -c \"import sysconfig; "
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


def cuda_mismatch(ctx: Context) -> None:
    torch_cuda, nvcc = ctx.s.torch_cuda, ctx.s.nvcc
    if ctx.s.torch is None:
        return  # no torch: nothing to compile against (torch_unsupported_by_framework says so)
    builders = _builds_ops(ctx)
    if not known(torch_cuda):
        if torch_cuda is UNKNOWN and (builders or ctx.user_ops):
            ctx.need("torch_cuda", "the ops are compiled for torch's CUDA",
                     f"`{ctx.python} -c \"import torch; print(torch.version.cuda)\"`")
        return
    if nvcc is UNKNOWN:
        if builders or ctx.user_ops:
            ctx.need("nvcc", "the ops' build compares the nvcc it uses with torch's CUDA",
                     "`$CUDA_HOME/bin/nvcc --version` (or `nvcc --version` when CUDA_HOME "
                     "is unset)")
        return
    if nvcc is None:
        if builders or ctx.user_ops:
            fix, command = _toolkit_fix(ctx, _mm(torch_cuda))
            ctx.finding("nvcc_missing",
                        f"no nvcc (CUDA_HOME, PATH): the ops cannot be compiled for torch's "
                        f"CUDA {torch_cuda}",
                        evidence={"nvcc": None, "cuda_home": ctx.s.cuda_home,
                                  "torch_cuda": torch_cuda},
                        fix=fix + " (prebuilt ops still load; JIT-built ones cannot build)",
                        command=command)
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


def driver_too_old(ctx: Context) -> None:
    torch_cuda, driver = ctx.s.torch_cuda, ctx.s.driver
    if not known(torch_cuda):
        return
    runtime = ctx.toolkit(torch_cuda)
    floor = runtime.min_driver if runtime else None
    if floor is None:
        return
    if driver is UNKNOWN:
        ctx.need("driver", f"torch's CUDA {_mm(torch_cuda)} needs driver ≥ {floor}",
                 "`nvidia-smi --query-gpu=driver_version --format=csv,noheader`")
        return
    if driver is None:
        return  # no driver (a build machine): nothing runs on a GPU here, nothing to compare
    if dotted_key(driver) < dotted_key(floor):
        older = [c for c, t in ctx.facts.toolkits.items() if t.min_driver
                 and dotted_key(t.min_driver) <= dotted_key(driver)
                 and c.split(".")[0] == _mm(torch_cuda).split(".")[0]]
        ctx.finding("driver_too_old",
                    f"driver {driver} is older than the {floor} CUDA {_mm(torch_cuda)} needs "
                    "(even with minor-version compatibility): CUDA calls fail with 'CUDA driver "
                    "version is insufficient for CUDA runtime version'",
                    evidence={"driver": driver, "torch_cuda": torch_cuda, "needs": floor},
                    fix=f"upgrade the driver to ≥ {floor}, or use torch built for a CUDA this "
                        "driver runs" + (f" ({', '.join(sorted(older, key=dotted_key))})"
                                         if older else ""),
                    command=_make(ctx, next(iter(ctx.frameworks), None)),
                    source=runtime.driver_source)


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
    for name, arch in ctx.gpu_archs:
        if arch is None:
            ctx.need(f"compute capability of {name}",
                     "the GPU's architecture decides which kernels run on it",
                     "`nvidia-smi --query-gpu=name,compute_cap --format=csv`")
            continue
        if known(ctx.s.torch_cuda) and ctx.s.torch_cuda and arch_list \
                and not _torch_runs(tuple(arch_list), arch):
            ctx.finding("gpu_arch_unsupported",
                        f"torch {ctx.s.torch} was compiled for {', '.join(arch_list)}: no "
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


def nccl_mismatch(ctx: Context) -> None:
    s = ctx.s
    wheels = {}
    names = set(ctx.catalog.section("nccl").get("wheels", ()))  # curated/doctor.toml [nccl]
    if known(s.packages):
        wheels = {n.lower(): v for n, v in s.packages.items() if n.lower() in names}
    torch_cuda = _mm(s.torch_cuda) if known(s.torch_cuda) and s.torch_cuda else None
    build = ctx.torch_build
    if len(wheels) > 1:
        keep = f"nvidia-nccl-cu{torch_cuda.split('.')[0]}" if torch_cuda else None
        extra = sorted(w for w in wheels if w != keep)
        pin = build.nccl if build is not None and build.nccl else wheels.get(keep or "")
        command = None
        if keep and keep in wheels:
            command = ctx.pip("uninstall", "-y", *extra)
            if pin:  # the wheels share nvidia/nccl/lib: removing one removes the other's copy
                command += " && " + ctx.pip("install", "--force-reinstall", "--no-deps",
                                            f"{keep}=={pin}")
        listed = ", ".join(f"{k} {v}" for k, v in sorted(wheels.items()))
        ctx.finding("nccl_mismatch",
                    f"{len(wheels)} NCCL wheels are installed ({listed}); "
                    f"torch {s.torch if known(s.torch) else ''} needs one"
                    + (f": {keep}" if keep else ""),
                    evidence={"nccl_wheels": wheels, "torch_cuda": s.torch_cuda,
                              "torch_nccl": s.torch_nccl, "torch_pins": pin},
                    fix=(f"remove {', '.join(extra)} and reinstall {keep}"
                         + (f"=={pin}" if pin else "") + " (torch's pin)") if keep else
                        "keep only the NCCL wheel torch requires",
                    command=command)
    system = s.nccl_system if known(s.nccl_system) else None
    torch_nccl = s.torch_nccl if known(s.torch_nccl) else None
    env = s.env if known(s.env) else {}
    if system and torch_nccl:
        m = _SO_VERSION.search(system)
        if m and _mm(m.group(1)) != _mm(torch_nccl):
            via = "LD_PRELOAD" if "nccl" in env.get("LD_PRELOAD", "") else "LD_LIBRARY_PATH"
            command = "unset LD_PRELOAD" if via == "LD_PRELOAD" else None
            if via == "LD_LIBRARY_PATH" and "LD_LIBRARY_PATH" in env:
                folder = system.rsplit("/", 1)[0]
                keep_dirs = [d for d in env["LD_LIBRARY_PATH"].split(":")
                             if d and d.rstrip("/") != folder]
                command = f"export LD_LIBRARY_PATH={shlex.quote(':'.join(keep_dirs))}"
            ctx.finding("nccl_mismatch",
                        f"{via} makes the loader take {system} (NCCL {m.group(1)}) before "
                        f"torch's own NCCL {torch_nccl}",
                        evidence={"nccl_system": system, "torch_nccl": torch_nccl,
                                  via: env.get(via)},
                        fix=f"take that NCCL out of {via} so torch loads the one it was built "
                            "with",
                        command=command)
    if build is not None and build.nccl and torch_nccl and _mm(build.nccl) != _mm(torch_nccl) \
            and len(wheels) <= 1:
        ctx.finding("nccl_mismatch",
                    f"torch {s.torch} pins NCCL {build.nccl} but loads NCCL {torch_nccl}",
                    evidence={"torch": s.torch, "torch_pins": build.nccl,
                              "torch_nccl": torch_nccl},
                    fix="reinstall the NCCL torch pins",
                    command=ctx.pip("install", "--force-reinstall", "--no-deps",
                                    f"nvidia-nccl-cu{torch_cuda.split('.')[0]}=={build.nccl}")
                    if torch_cuda else None,
                    severity="warning")


RULES = (cuda_mismatch, cuda_home_mismatch, driver_too_old, gpu_arch_unsupported,
         nccl_mismatch)
