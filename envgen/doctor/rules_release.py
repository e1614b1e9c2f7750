"""Rules about releases and packages: the platform, the framework release against torch and
Python (its own metadata and curated constraints, as the resolver reads them), glibc against
the wheels' manylinux tags, pip's dependency conflicts and imports that fail."""

from __future__ import annotations

import re
import shlex

from envgen.doctor.context import Context, known, major_minor, public
from envgen.doctor.suggest import make_request, shell_command
from envgen.versions import dotted_key, parse_version, python_key, spec_contains

# the distributions whose failure breaks training (a conflict elsewhere is a warning)
_CORE = ("torch", "deepspeed", "megatron-core", "colossalai", "triton")


def _make(ctx: Context, framework: str | None, version: str | None = None,
          cuda: str | None = None) -> str | None:
    gpu = next((arch for _, arch in ctx.gpu_archs if arch), None)
    driver = ctx.s.driver if known(ctx.s.driver) else None
    request = make_request(ctx.facts, framework=framework, version=version, cuda=cuda,
                           gpu_arch=gpu, driver=driver, platform=ctx.platform)
    if request is None:
        return None
    command = shell_command(request)
    ctx.made[command] = request  # the finding carries the request, not only its text
    return command


def unsupported_platform(ctx: Context) -> None:
    platform = ctx.s.platform
    if not known(platform):
        return  # most reports come from Linux; asking every time would bury the real needs
    for framework in ("torch", *ctx.frameworks):
        if framework == "torch" and (not known(ctx.s.torch_cuda) or not ctx.s.torch_cuda):
            continue  # a CPU build (or unknown): torch's CUDA platforms do not apply
        entry = ctx.catalog.platforms.get(framework)
        if entry is None or platform in entry[0]:
            continue
        platforms, source, note = entry
        what = "torch's CUDA builds" if framework == "torch" else framework
        ctx.finding(
            "unsupported_platform",
            f"{what} support {', '.join(platforms)}; this environment is {platform}",
            evidence={"platform": platform, "framework": framework,
                      "supported": list(platforms)},
            fix=(f"run {what} on {' or '.join(platforms)}" + (f" ({note})" if note else "")
                 + (" — on Windows, WSL2 is the usual route" if platform == "windows"
                    and "wsl2" in platforms else "")),
            source=source)


def _release_key(version: str) -> tuple:
    try:
        return (1, parse_version(version))
    except ValueError:
        return (0, version)


def pip_requires_python(ctx: Context) -> None:
    """pip's "Ignored the following versions that require a different python version": every
    release pip saw excludes its Python. Judged against the report's Python when one is stated
    (an error when no listed Requires-Python admits it), else asked for."""
    skipped = ctx.s.requires_python if known(ctx.s.requires_python) else {}
    if not skipped:
        return
    newest = max(skipped, key=lambda k: _release_key(k.rsplit(" ", 1)[-1]))
    name, _, version = newest.rpartition(" ")
    what, spec = name or "the package", skipped[newest]
    if not known(ctx.s.python):
        ctx.need("python", f"pip skipped {len(skipped)} release(s) of {what} for their "
                 f"Requires-Python (the newest, {version}: {spec})",
                 f"`{ctx.shell_python} --version`")
        return
    tag = major_minor(ctx.s.python)
    if any(spec_contains(rule, tag) for rule in skipped.values()):
        return  # the Python the text names is not the one pip ran
    pythons = sorted({p.rstrip("t") for b in ctx.facts.torch_builds for p in b.python or ()},
                     key=python_key)
    fits = [p for p in pythons if spec_contains(spec, p)]
    ctx.finding("python_unsupported",
                f"Python {tag}: pip skipped every release of {what} it saw ({len(skipped)}) for "
                f"its Requires-Python; the newest, {version}, requires Python {spec}",
                evidence={"python": ctx.s.python, "package": name or None, "version": version,
                          "requires_python": spec},
                fix=(f"install {what} into an environment with a Python its Requires-Python "
                     f"admits" + (f" (e.g. {fits[-1]}: `uv venv --python {fits[-1]}`)" if fits
                                  else "") + f", or a release of {what} built for Python {tag}"),
                source=ctx.catalog.section("error_lines").get("pip_requires_python"))


def python_unsupported(ctx: Context) -> None:
    python = ctx.s.python
    if not known(python):
        if ctx.frameworks:
            ctx.need("python", "releases state which Python versions they support",
                     f"`{ctx.shell_python} --version`")
        elif "pip_no_match" in (ctx.s.errors or {}):
            build = ctx.torch_build
            ctx.need("python", "pip found no file of that release for this Python and "
                     "platform: releases publish wheels for some Pythons only"
                     + (f" (torch {build.version}: Python "
                        f"{', '.join(sorted(build.python, key=python_key))})"
                        if build is not None and build.python else ""),
                     f"`{ctx.shell_python} --version`")
        return
    tag = major_minor(python)
    for framework in ctx.frameworks:
        why, hits = ctx.over_releases(
            framework, lambda fw, tag=tag: ctx.checks.framework_python(fw, tag))
        if why:
            ctx.finding("python_unsupported", f"Python {tag}: {why}",
                        evidence={"python": python, framework: ctx.frameworks[framework],
                                  "releases": hits},
                        fix=f"use a Python {framework} supports: a coherent environment "
                            "with `envgen make`",
                        command=_make(ctx, framework))
    build = ctx.torch_build
    # one release's wheels can sit in several builds (the cp312 file of torch 2.2.2 apart
    # from the others): the Pythons are those of every build of it for this platform
    pythons = sorted({p for b in ctx.torch_builds if b.platform == build.platform
                      for p in b.python or ()}, key=python_key) if build is not None else []
    if build is not None and pythons and tag not in pythons:
        ctx.finding("python_unsupported",
                    f"torch {build.version} publishes wheels for Python "
                    f"{', '.join(pythons)}, not {tag}",
                    evidence={"python": python, "torch": ctx.s.torch,
                              "torch_pythons": pythons},
                    fix="use one of those Pythons, or a torch release built for this one",
                    command=_make(ctx, next(iter(ctx.frameworks), None)),
                    source=build.sources[0].url if build.sources else None)


_WINDOWS_SOURCE = ("https://github.com/deepspeedai/DeepSpeed/issues/7043 ; "
                   "https://github.com/deepspeedai/DeepSpeed/issues/6981")


def windows_wheel(ctx: Context) -> None:
    """On Windows, pip takes a framework release's win_amd64 wheel for this Python or falls
    back to building its sdist there (what the maintainers answer when that fails: #7043,
    #6981). Which Pythons each release has Windows wheels for is the harvested
    ``files.windows``."""
    if ctx.s.platform != "windows":
        return
    for framework in ctx.frameworks:
        releases = sorted((r for r in ctx.facts.frameworks if r.framework == framework
                           and r.files is not None and r.files.windows is not None),
                          key=lambda r: dotted_key(r.version))
        wheels = [r for r in releases if r.files.windows]
        if not wheels:
            continue  # no Windows wheel at all: the platform rule speaks for it
        listed = "; ".join(f"{r.version}: {', '.join(r.files.windows)}" for r in wheels)
        if not known(ctx.s.python):
            ctx.need("python", f"{framework} publishes Windows wheels for some Pythons only "
                     f"({listed})", f"`{ctx.shell_python} --version`")
            continue
        tag = major_minor(ctx.s.python)
        version = ctx.frameworks[framework]
        judged = ([r for r in releases if r.version == version] if version else releases[-1:])
        if not judged or tag in judged[0].files.windows:
            continue
        fits = [r for r in wheels if tag in r.files.windows]
        if fits:
            fix = (f"install {framework} {fits[-1].version}, the newest release with a Windows "
                   f"wheel for Python {tag}")
            command = ctx.pip("install", f"{framework}=={fits[-1].version}")
        else:
            best = max((p for r in wheels for p in r.files.windows), key=python_key)
            newest = [r for r in wheels if best in r.files.windows][-1]
            fix = (f"use Python {best} (no {framework} release has a Windows wheel for "
                   f"{tag}) with {framework} {newest.version}, or run under WSL2")
            command = f"py -{best} -m pip install {shlex.quote(f'{framework}=={newest.version}')}"
        ctx.finding("python_unsupported",
                    f"{framework} {judged[0].version} has no Windows wheel for Python {tag}: pip "
                    "falls back to building its sdist on Windows (Windows wheels: "
                    f"{listed})",
                    evidence={"python": ctx.s.python, "platform": "windows",
                              framework: version, "windows_wheels": {
                                  r.version: list(r.files.windows) for r in wheels}},
                    fix=fix, command=command, source=_WINDOWS_SOURCE)


def torch_unsupported_by_framework(ctx: Context) -> None:
    torch = ctx.s.torch
    if not ctx.frameworks:
        return
    if not known(torch):
        if torch is None:  # known not installed
            for framework in ctx.frameworks:
                ctx.finding("torch_unsupported_by_framework",
                            f"{framework} needs torch, and none is installed",
                            evidence={"torch": None, framework: ctx.frameworks[framework]},
                            fix="install the torch build a coherent environment pins",
                            command=_make(ctx, framework, ctx.frameworks[framework]),
                            severity="error")  # nothing imports without it
        else:
            ctx.need("torch", "the framework releases state which torch they support",
                     f"`{ctx.shell_python} -c \"import torch; print(torch.__version__, "
                     "torch.version.cuda)\"`")
        return
    version = public(torch)
    for framework in ctx.frameworks:
        why, hits = ctx.over_releases(
            framework, lambda fw: ctx.checks.framework_torch(fw, version))
        if why:
            cuda = ctx.s.torch_cuda if known(ctx.s.torch_cuda) else None
            ctx.finding("torch_unsupported_by_framework", why,
                        evidence={"torch": torch, framework: ctx.frameworks[framework],
                                  "releases": hits},
                        fix=f"install a torch that {framework} "
                            f"{ctx.frameworks[framework] or ''} supports (or a {framework} "
                            f"release that supports torch {version}); `envgen make` gives a "
                            "coherent set",
                        command=_make(ctx, framework, ctx.frameworks[framework], cuda))


def glibc_too_old(ctx: Context) -> None:
    glibc = ctx.s.glibc
    build = ctx.torch_build
    if build is None or not build.glibc:
        return
    if not known(glibc):
        if ctx.s.platform in (None, "linux-x86_64", "linux-aarch64") or not known(ctx.s.platform):
            ctx.need("glibc", f"torch {build.version}'s wheels need glibc ≥ {build.glibc}",
                     "`ldd --version | head -1`")
        return
    if dotted_key(glibc) < dotted_key(build.glibc):
        ctx.finding("glibc_too_old",
                    f"glibc {glibc} is older than the {build.glibc} torch {build.version}'s "
                    f"wheels are built for (manylinux tag)",
                    evidence={"glibc": glibc, "torch": ctx.s.torch, "needs": build.glibc},
                    fix="use an OS with a newer glibc (a container base from `envgen make`) "
                        "or a torch release built for this glibc",
                    command=_make(ctx, next(iter(ctx.frameworks), None)),
                    source=build.sources[0].url if build.sources else None)


def dependency_conflict(ctx: Context) -> None:
    if not known(ctx.s.conflicts):
        return
    for c in ctx.s.conflicts:
        names = {(c.package or "").lower(), c.requires.split(";")[0].strip().lower()}
        core = any(n == p or n.startswith(p) for n in names for p in _CORE)
        have = f"has {c.have}" if c.have else "is not installed"
        who = f"{c.package} {c.version or ''}" if c.package else "an imported module"
        ctx.finding("dependency_conflict",
                    f"{who} requires {c.requires}, but it {have}".replace("  ", " "),
                    evidence={"package": c.package, "version": c.version,
                              "requires": c.requires, "have": c.have},
                    fix=f"install a version that satisfies {c.requires} (pip check reports "
                        "this; installing with --no-deps or a later pin broke it)",
                    # a requirement starts with a name: anything else pip would take as
                    # an option (--index-url=…), quoted or not
                    command=ctx.pip("install", c.requires) if c.requires[:1].isalnum()
                    else None,
                    severity="error" if core else None)  # catalog default: warning


_IMPORT_NAME = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def import_name_missing(ctx: Context) -> None:
    """"cannot import name 'X' from 'pkg'" of an installed package (reports/requirements.py):
    the code importing X was written for another release of pkg — a release that still has X,
    or one that already has it. For torch, torch_unsupported_by_framework; else
    dependency_conflict. Warnings: which way the version must move is not known."""
    line = (ctx.s.errors if known(ctx.s.errors) else {}).get("import_name")
    m = _IMPORT_NAME.search(line or "")
    if m is None:
        return
    name, module = m.groups()
    top = module.split(".")[0]
    source = ctx.catalog.section("error_lines").get("import_name")
    evidence = {"name": name, "module": module, "error": line}
    if top == "torch":
        torch = ctx.s.torch if known(ctx.s.torch) else None
        evidence["torch"] = torch
        ctx.finding("torch_unsupported_by_framework",
                    f"code imports {name} from {module}, which torch{' ' + torch if torch else ''}"
                    " does not have: the package importing it was written for another torch "
                    "release",
                    evidence=evidence, severity="warning", source=source, explains=line,
                    fix="install the torch release the importing package requires (its "
                        "requirements or install page name it); `envgen make` gives a coherent "
                        "set for the frameworks it knows")
        if torch is None:
            ctx.need("torch", f"which torch lacks {name} decides the release to install",
                     f"`{ctx.shell_python} -c \"import torch; print(torch.__version__)\"`")
        return
    packages = ctx.s.packages if known(ctx.s.packages) else {}
    version = packages.get(top.replace("_", "-").lower())
    evidence[top] = version
    ctx.finding("dependency_conflict",
                f"code imports {name} from {module}, which {top}{' ' + version if version else ''}"
                f" does not have: the package importing it was written for another release of "
                f"{top}",
                evidence=evidence, severity="warning", source=source, explains=line,
                fix=f"install the {top} release the importing package requires (`pip check` and "
                    f"its requirements name it): a newer {top} when {name} is new there, an older "
                    f"one when {top} removed it")
    if version is None:
        ctx.need("pip", f"the installed {top} and the importing package's requirement decide "
                 "which release to install", f"`{ctx.pip('show', top)}` and `{ctx.pip('check')}`")


def import_failed(ctx: Context) -> None:
    if not known(ctx.s.import_errors):
        return
    for module, error in ctx.s.import_errors.items():
        hint = ""
        if "undefined symbol" in error:
            hint = (" — an undefined symbol means a compiled part was built against another "
                    "torch / CUDA / C++ ABI than the one installed; rebuild or reinstall it")
        ctx.finding("import_failed", f"`import {module}` fails: {error}",
                    evidence={"module": module, "error": error},
                    fix=f"fix what the error names{hint}; the other findings may say why",
                    command=None)


RULES = (unsupported_platform, pip_requires_python, python_unsupported, windows_wheel,
         torch_unsupported_by_framework, glibc_too_old, dependency_conflict,
         import_name_missing, import_failed)
__all__ = ["RULES"]
