"""Rules about building the ops: the host gcc against the nvcc's maximum and the build's
floor (torch's headers, the C++ standard), the C++ standard the framework passes against
torch's, libaio and ninja, and cached torch extensions built by another torch or ABI."""

from __future__ import annotations

import re
import shlex

from envgen.doctor.context import Context, known, major_minor, public
from envgen.doctor.removable import removable
from envgen.doctor.reports.errors import std_of
from envgen.doctor.snapshot import UNKNOWN
from envgen.versions import spec_contains


def _gcc_major(ctx: Context) -> int | None:
    gcc = ctx.s.gcc
    return int(str(gcc).split(".")[0]) if known(gcc) and str(gcc)[:1].isdigit() else None


def _builders(ctx: Context) -> list[str]:
    return [f for f in ctx.frameworks
            if any(ctx.checks.against_torch(r) for r in ctx.releases(f))]


def _gcc_fix(ctx: Context, low: int, high: int | None) -> tuple[str, str | None]:
    """Words and a command that give a gcc major in [low, high]."""
    have = tuple(ctx.s.gcc_available) if known(ctx.s.gcc_available) else ()
    fitting = [g for g in have if g >= low and (high is None or g <= high)]
    if fitting:
        g = max(fitting)
        return (f"gcc-{g} is installed and fits: make it the host compiler builds use",
                f"export CC=gcc-{g} CXX=g++-{g}")
    family = ctx.os_family()
    # the OS release's own packages when the matrix knows it; else the bound itself
    target = high if high is not None else low
    base = ctx.os_base
    if base is not None:
        packaged = [g for g in base.gcc_available if g >= low and (high is None or g <= high)]
        if packaged:
            target = max(packaged) if high is not None else min(packaged)
    template = ctx.catalog.compiler_install.get(family or "")
    rng = (f"≥ {low}" if high is None else f"≤ {high}" if low <= 0 else
           f"{low}" if low == high else f"{low}–{high}")
    if template:
        install = template.format(gcc=target)
        enable = ctx.catalog.section("compiler_install").get("enable", {}).get(family or "")
        select = (enable.format(gcc=target) if isinstance(enable, str)
                  else f"export CC=gcc-{target} CXX=g++-{target}")
        return (f"install gcc {target} (a major {rng}) and make it the host compiler",
                f"{install} && {select}")
    conda = ctx.catalog.compiler_install.get("conda")
    majors = [g for g in ctx.catalog.section("compiler_install").get("conda_majors", ())
              if g >= low and (high is None or g <= high)]
    words = f"install a gcc major {rng} and set CC/CXX to it"
    if conda and majors:
        # conda-forge's newest fitting major under a ceiling, its oldest fitting one above a floor
        pick = max(majors) if high is not None else min(majors)
        return words + f" (conda: `{conda.format(gcc=pick)}`)", None
    if conda:
        return words + " (conda-forge has no such gcc: the OS's packages, or an OS or container "\
            "release that has one)", None
    return words, None


def host_compiler(ctx: Context) -> None:
    builders = _builders(ctx)
    if not builders and not ctx.user_ops:
        return
    gcc = _gcc_major(ctx)
    nvcc = ctx.s.nvcc if known(ctx.s.nvcc) else None
    toolkit = ctx.toolkit(nvcc)
    if gcc is None:
        if ctx.s.gcc is UNKNOWN and toolkit is not None:
            ctx.need("gcc", f"nvcc {nvcc} accepts gcc ≤ {toolkit.max_gcc}",
                     "`gcc --version` (or `$CXX --version` when CXX is set)")
        return
    build = ctx.torch_build
    floors = [ctx.checks.gcc_floor(r, build, toolkit)[0] for f in builders
              for r in ctx.releases(f)] if build is not None and toolkit is not None else []
    if toolkit is not None and toolkit.max_gcc is not None and gcc > toolkit.max_gcc:
        fix, command = _gcc_fix(ctx, max(floors, default=0), toolkit.max_gcc)
        ctx.finding("host_compiler_too_new",
                    f"gcc {ctx.s.gcc} is newer than nvcc {nvcc} accepts (≤ {toolkit.max_gcc}): "
                    f"'unsupported GNU version! gcc versions later than {toolkit.max_gcc} are "
                    "not supported!'",
                    evidence={"gcc": ctx.s.gcc, "nvcc": nvcc, "max_gcc": toolkit.max_gcc,
                              "gcc_available": list(ctx.s.gcc_available)
                              if known(ctx.s.gcc_available) else None},
                    fix=fix, command=command,
                    source=toolkit.source.url if toolkit.source else None)
    if build is None or toolkit is None:
        return
    for framework in builders:
        def floor(fw):
            low, why = ctx.checks.gcc_floor(fw, build, toolkit)
            return (low, why) if low and gcc < low else None

        verdict, _ = ctx.over_releases(framework, floor)
        if verdict:
            low, why = verdict
            fix, command = _gcc_fix(ctx, low, toolkit.max_gcc)
            ctx.finding("host_compiler_too_old",
                        f"gcc {ctx.s.gcc} is older than the gcc {low} the op build needs "
                        f"({why})",
                        evidence={"gcc": ctx.s.gcc, "needs": low, "torch": ctx.s.torch,
                                  framework: ctx.frameworks[framework]},
                        fix=fix, command=command)
            break


def host_compiler_from_error(ctx: Context) -> None:
    """nvcc's "unsupported GNU version! gcc versions later than 6 are not supported!" and torch's
    "too old version of GCC. We need GCC 5 or later.": the line decides it, not a version."""
    errors = ctx.s.errors if known(ctx.s.errors) else {}
    kinds = {f.kind for f in ctx.findings}
    newer = re.search(r"later than (\d+)", errors.get("gcc_new", ""))
    if newer and "host_compiler_too_new" not in kinds:
        high = int(newer.group(1))
        fix, command = _gcc_fix(ctx, 0, high)
        ctx.finding("host_compiler_too_new",
                    f"nvcc rejects the host gcc{' ' + str(ctx.s.gcc) if known(ctx.s.gcc) else ''}"
                    f": its CUDA toolkit accepts gcc ≤ {high}",
                    evidence={"gcc": ctx.s.gcc if known(ctx.s.gcc) else None, "max_gcc": high,
                              "nvcc": ctx.s.nvcc if known(ctx.s.nvcc) else None},
                    fix=fix + "; or use a newer CUDA toolkit, whose nvcc accepts this gcc",
                    command=command)
    bug = next((b for b in ctx.catalog.raw.get("nvcc_bug", ())
                if b.get("id") == "std-function-packs"), None)
    if errors.get("std_function") and bug and "host_compiler_too_new" not in kinds:
        nvcc = major_minor(ctx.s.nvcc) if known(ctx.s.nvcc) and ctx.s.nvcc else None
        named = nvcc in bug["nvcc"] if nvcc else None
        high = int(bug.get("max_gcc", 10))
        fix, command = _gcc_fix(ctx, 0, high)
        ctx.finding("host_compiler_too_new",
                    f"nvcc {nvcc or ''} fails on gcc 11's std_function.h ('parameter packs not "
                    f"expanded'), a known bug of nvcc {' and '.join(bug['nvcc'])} although their "
                    "host-compiler check accepts gcc 11".replace("nvcc  ", "nvcc "),
                    evidence={"nvcc": ctx.s.nvcc if known(ctx.s.nvcc) else None,
                              "gcc": ctx.s.gcc if known(ctx.s.gcc) else None,
                              "bug": bug["id"], "nvcc_named": list(bug["nvcc"])},
                    fix=fix + " (the fix the cited reports used)", command=command,
                    source=bug.get("source"),
                    severity=None if named is not False else "warning")
    older = re.search(r"GCC (\d+) or later", errors.get("gcc_old", ""))
    if older and "host_compiler_too_old" not in kinds:
        low = int(older.group(1))
        toolkit = ctx.toolkit(ctx.s.nvcc if known(ctx.s.nvcc) else None)
        fix, command = _gcc_fix(ctx, low, toolkit.max_gcc if toolkit else None)
        ctx.finding("host_compiler_too_old",
                    f"the host gcc{' ' + str(ctx.s.gcc) if known(ctx.s.gcc) else ''} is older "
                    f"than the gcc {low} torch's headers require",
                    evidence={"gcc": ctx.s.gcc if known(ctx.s.gcc) else None, "needs": low},
                    fix=fix, command=command)


def ops_with_std(ctx: Context, torch: str, below: int, exact: int | None = None) -> list[str]:
    """The ops of the snapshot's framework releases whose own -std= flag with ``torch`` is
    older than C++``below`` (``exact``: that standard), read from each release's op builder
    (DeepSpeed's async_io: -std=c++14 through 0.10.x), each with where and how to skip it."""
    found = []
    for framework in ctx.frameworks:
        releases = ctx.releases(framework)
        build = releases[0].build if len(releases) == 1 else None
        if build is None or not build.read:
            continue
        for op in build.ops:
            rule = next((r for rules in (op.cxx_std, op.nvcc_std) for r in rules
                         if spec_contains(r.torch or "", torch) and int(r.std) < below
                         and (exact is None or int(r.std) == exact)), None)
            if rule is not None:
                skip = f"; skipped with {op.build_var}=0" if op.build_var else ""
                found.append(f"{framework} {releases[0].version}'s {op.name} passes "
                             f"-std=c++{rule.std} ({rule.where}{skip})")
    return found


def cxx_standard_from_flag(ctx: Context) -> None:
    """A pasted compiler command with -std=c++14 (or 11) against a torch whose headers require
    a newer standard: that op cannot compile (DeepSpeed's async_io passed -std=c++14, for one)."""
    line = (ctx.s.errors if known(ctx.s.errors) else {}).get("std_flag")
    std = std_of(line) if line else None
    if std is None or any(f.kind == "cxx_standard_mismatch" for f in ctx.findings):
        return
    build = ctx.torch_build
    if build is None or build.headers is None or build.headers.cxx_std is None:
        if not known(ctx.s.torch):
            ctx.need("torch", f"an op is compiled with -std=c++{std}: torch's headers decide "
                     "whether that standard is enough",
                     f"`{ctx.shell_python} -c \"import torch; print(torch.__version__)\"`")
        return
    need = int(build.headers.cxx_std)
    if std >= need:
        return
    ops = ops_with_std(ctx, build.version, need, std)
    ctx.finding("cxx_standard_mismatch",
                f"an op is compiled with -std=c++{std}, but torch {build.version}'s headers "
                f"require C++{need} ({build.headers.cxx_std_where})",
                evidence={"flag": f"-std=c++{std}", "needs": f"c++{need}", "torch": ctx.s.torch,
                          "frameworks": dict(ctx.frameworks), "ops": ops},
                fix=(f"{'; '.join(ops)}: skip that op, or use a release of the framework whose "
                     f"op builder passes -std=c++{need} with this torch" if ops else
                     f"build with a release of the framework whose op builder passes "
                     f"-std=c++{need} with this torch (DeepSpeed's async_io passed -std=c++14 "
                     "before its builders followed torch's standard), or skip that op "
                     "(DS_BUILD_AIO=0 for async_io)"))


def cxx_standard_mismatch(ctx: Context) -> None:
    build = ctx.torch_build
    nvcc = ctx.s.nvcc if known(ctx.s.nvcc) else (ctx.s.torch_cuda if known(ctx.s.torch_cuda)
                                                  else None)
    toolkit = ctx.toolkit(nvcc)
    if build is None or toolkit is None:
        return
    for framework in _builders(ctx):
        why, hits = ctx.over_releases(framework,
                                      lambda fw: ctx.checks.cxx_std(fw, build, toolkit))
        if why:
            ctx.finding("cxx_standard_mismatch", why,
                        evidence={"torch": ctx.s.torch, framework: ctx.frameworks[framework],
                                  "releases": hits},
                        fix=f"use a {framework} release that compiles with torch "
                            f"{public(ctx.s.torch)}'s C++ standard (or an older torch)",
                        command=None)


def _requirement_fix(ctx: Context, req) -> tuple[str, str | None]:
    family = ctx.os_family()
    install = req.install
    # a PyPI package installs into the environment itself (no root, the env's bin/ is on its
    # PATH); else the OS's package
    command = install["pip"].format(python=ctx.shell_python) if "pip" in install \
        else install.get(family or "")
    shown = {k: v.format(python=ctx.shell_python) for k, v in install.items()}
    others = "; ".join(f"{k}: `{v}`" for k, v in shown.items() if v != command)
    words = f"install {req.what}" + (f" ({others})" if others else "")
    return words, command


def libaio_missing(ctx: Context) -> None:
    req = ctx.catalog.requirements.get("libaio")
    if req is None or (ctx.frameworks and req.framework not in ctx.frameworks):
        return  # (no framework known at all: a report of a missing libaio.h still counts)
    if ctx.s.platform in ("windows", "macos-arm64"):
        return  # no libaio there: the ops that need it are Linux-only (rules_system)
    wanted = [op for op in ctx.user_ops if op in req.ops]
    if ctx.user_ops and not wanted:
        return  # the user builds ops, none of which need libaio
    libaio = ctx.s.libaio
    if libaio is UNKNOWN or (libaio is not None and libaio.headers is None
                             and libaio.library is None):
        if wanted:
            ctx.need("libaio", f"{', '.join(wanted)} link libaio and include libaio.h",
                     "`ls /usr/include/libaio.h; ldconfig -p | grep libaio`")
        return
    missing = []
    if libaio is None or libaio.headers is False:
        missing.append("headers (libaio.h)")
    if libaio is None or libaio.library is False:
        missing.append("library (libaio.so)")
    if not missing:
        return
    fix, command = _requirement_fix(ctx, req)
    certain = wanted and req.framework in ctx.frameworks
    ctx.finding("libaio_missing",
                f"libaio {' and '.join(missing)} missing: {req.framework}'s "
                f"{', '.join(wanted or req.ops)} op cannot build"
                + ("" if wanted else " (if you use it)"),
                evidence={"libaio": libaio.to_dict() if libaio else None,
                          "ops": list(wanted or req.ops)},
                fix=fix, command=command, severity=None if certain else "warning",
                source=req.source)


def ninja_missing(ctx: Context) -> None:
    req = ctx.catalog.requirements.get("ninja")
    builders = _builders(ctx)
    if req is None or (ctx.frameworks and not (builders or ctx.user_ops)):
        return  # frameworks known, none of which builds ops
    if ctx.s.ninja is UNKNOWN and (builders or ctx.user_ops):
        ctx.need("ninja", "torch builds extensions (JIT and setup) with ninja",
                 "`ninja --version`")
        return
    if ctx.s.ninja is not None:  # a version, or unknown
        return
    fix, command = _requirement_fix(ctx, req)
    builds = bool(builders or ctx.user_ops)
    ctx.finding("ninja_missing",
                "ninja is not on PATH: torch cannot build the ops ('Ninja is required to load "
                "C++ extensions')",
                evidence={"ninja": None, "frameworks": builders, "ops": list(ctx.user_ops)},
                fix=fix, command=command, source=req.source,
                severity=None if builds else "warning")  # no framework known: if you build


def _remove(path: str, env: dict) -> str | None:
    """``rm -rf PATH`` for a folder inside the extensions cache, else None (removable.py)."""
    if not removable(path, env.get("TORCH_EXTENSIONS_DIR")):
        return None
    return f"rm -rf {shlex.quote(path)}"


def _by_hand(path: str, env: dict) -> str:
    if _remove(path, env) is not None:
        return ""
    return ("; remove it by hand after checking that it is the extension's build folder "
            "(envgen prints no command that deletes a path outside the torch extensions cache)")


def stale_extension_cache(ctx: Context) -> None:
    s = ctx.s
    if not known(s.torch_extensions):
        return
    env = s.env if known(s.env) else {}
    torch = s.torch if known(s.torch) else None
    cuda = major_minor(s.torch_cuda) if known(s.torch_cuda) and s.torch_cuda else None
    python = major_minor(s.python) if known(s.python) else None
    shared = "TORCH_EXTENSIONS_DIR" in env
    baton = ctx.catalog.section("extension_cache").get("baton_torch")
    waits = bool(baton and torch and spec_contains(baton, public(torch)))
    for ext in s.torch_extensions:
        why = None
        if ext.lock and waits:
            why = (f"it holds a `lock` file, and torch {torch}'s extension build waits, with no "
                   "timeout, while one exists: the run hangs (a build killed midway, or a torch "
                   f"outside {baton}, which leaves the file, built here)")
        elif ext.loads is False:
            why = f"it does not load into torch {torch or ''}: {ext.error or 'load failed'}"
        elif ext.torch and torch and public(ext.torch) != public(torch):
            why = f"it was built by torch {ext.torch}; torch {torch} is installed"
        elif shared and ext.cuda is not None and known(s.torch_cuda) and \
                (major_minor(ext.cuda) if ext.cuda else None) != cuda:
            why = f"it was built for CUDA {ext.cuda}; torch uses CUDA {cuda}"
        elif shared and ext.python and python and ext.python != python:
            why = f"it was built for Python {ext.python}; this is Python {python}"
        if why is None:
            continue
        ctx.finding("stale_extension_cache",
                    f"cached extension {ext.path}: {why.replace('  ', ' ')}",
                    evidence={"path": ext.path, "built_for": {"torch": ext.torch,
                                                              "cuda": ext.cuda,
                                                              "python": ext.python},
                              "torch": torch, "torch_cuda": s.torch_cuda,
                              "error": ext.error, "lock": ext.lock},
                    fix="delete the cached build; the op rebuilds for this torch on next use "
                        "(or give each environment its own TORCH_EXTENSIONS_DIR)"
                        + _by_hand(ext.path, env),
                    command=_remove(ext.path, env),
                    source=ctx.catalog.section("extension_cache").get("baton_source")
                    if ext.lock and waits else None)


def abi_mismatch(ctx: Context) -> None:
    s = ctx.s
    abi = s.torch_cxx11_abi if known(s.torch_cxx11_abi) else None
    if abi is None or not known(s.torch_extensions):
        return
    env = s.env if known(s.env) else {}
    for ext in s.torch_extensions:
        if ext.cxx11_abi is not None and ext.cxx11_abi != abi and ext.loads is not True:
            ctx.finding("abi_mismatch",
                        f"cached extension {ext.path} was compiled with "
                        f"_GLIBCXX_USE_CXX11_ABI={int(ext.cxx11_abi)}; torch {s.torch} uses "
                        f"{int(abi)}: its C++ symbols do not match",
                        evidence={"path": ext.path, "cxx11_abi": ext.cxx11_abi,
                                  "torch_cxx11_abi": abi},
                        fix="delete the cached build so it is rebuilt with torch's ABI"
                            + _by_hand(ext.path, env),
                        command=_remove(ext.path, env))


_READ = {"fails": "raises on it", "misread": "reads it as another architecture",
         "dropped": "compiles for it without its suffix"}


def arch_list_unreadable(ctx: Context) -> None:
    """TORCH_CUDA_ARCH_LIST holds an entry the installed framework release's op builder raises
    on or misreads (build.arch_entries, read from the release's builder.py): an error, for
    the JIT load and the ahead-of-time build alike; a dropped suffix is a warning."""
    env = ctx.s.env if known(ctx.s.env) else {}
    value = env.get("TORCH_CUDA_ARCH_LIST")
    if not value:
        return
    entries = [e for e in re.split(r"[;\s]+", value) if e]
    for framework in ctx.frameworks:
        def verdict(release, entries=entries):
            build = release.build
            if build is None or not build.arch_entries:
                return None
            for entry in entries:
                name = entry.split("+")[0]
                for mode in ("jit", "aot"):
                    e = build.arch_entry(name, mode)
                    if e is not None and e.result in _READ:
                        return entry, e
            return None

        found, releases = ctx.over_releases(framework, verdict)
        if not found:
            continue
        entry, e = found
        name = entry.split("+")[0]
        plain = re.sub(r"[af]$", "", name)
        when = "a JIT load" if e.mode == "jit" else "the ahead-of-time build (setup.py)"
        version = ctx.frameworks[framework] or releases[0]
        reads = _first_reading(ctx, framework, name, e.mode)
        newer = f"{framework} {reads} or later, whose builder reads {entry}" if reads else None
        if plain != name:  # a family suffix: the entry without it reads everywhere
            fix = f"write {plain} instead of {entry}" + (f", or use {newer}" if newer else "")
            command = "export TORCH_CUDA_ARCH_LIST=" + shlex.quote(";".join(
                re.sub(r"(\d)[af](\+PTX)?$", r"\1\2", x) for x in entries))
        else:
            fix = f"use {newer}" if newer else f"leave {entry} out of TORCH_CUDA_ARCH_LIST"
            command = None
        ctx.finding("arch_list_unreadable",
                    f"TORCH_CUDA_ARCH_LIST={value}: {framework} {version}'s op builder "
                    f"{_READ[e.result]} ({entry}, in {when}; {e.where})",
                    evidence={"TORCH_CUDA_ARCH_LIST": value, "entry": entry, "framework":
                              framework, "releases": releases, "mode": e.mode,
                              "where": e.where, "detail": e.detail},
                    severity="warning" if e.result == "dropped" else None,
                    fix=fix, command=command)


def _first_reading(ctx: Context, framework: str, arch: str, mode: str) -> str | None:
    """The first release of ``framework`` (in the matrix) whose builder keeps ``arch``."""
    from envgen.versions import dotted_key

    for r in sorted((r for r in ctx.facts.frameworks if r.framework == framework),
                    key=lambda r: dotted_key(r.version)):
        e = r.build.arch_entry(arch, mode) if r.build and r.build.arch_entries else None
        if e is not None and e.result == "kept":
            return r.version
    return None


RULES = (host_compiler, host_compiler_from_error, cxx_standard_mismatch, cxx_standard_from_flag,
         libaio_missing, ninja_missing, stale_extension_cache, abi_mismatch, arch_list_unreadable)
