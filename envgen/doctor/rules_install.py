"""Rules about what was installed and how: a compiled extension built against another torch, a
package's compiled modules left out of its install (apex without --cuda_ext), an interpreter
without its development headers, a CPU-only torch. Each is decided by its own error line or by
facts that say it outright (torch.version.cuda None); the judge ranks the one that explains the
pasted error first (``explains``)."""

from __future__ import annotations

import re
import shlex

from envgen.doctor.context import Context, known, major_minor, public
from envgen.doctor.reports.errors import module_of

_PYTHON_IN_PATH = re.compile(r"python(3\.\d+)")
_SITE = re.compile(r"site-packages[/\\]([A-Za-z_][\w]*)[/\\]")
_DEBIAN = re.compile(r"^(?:debian|ubuntu)\b", re.I)


def _supersede(ctx: Context, module: str) -> None:
    """Drop the generic import_failed finding of ``module``: the finding made now says why."""
    ctx.findings[:] = [f for f in ctx.findings
                       if not (f.kind == "import_failed" and f.evidence.get("module") == module)]


def extension_built_for_other_torch(ctx: Context) -> None:
    """A compiled extension outside torch misses a symbol of torch's C++ namespaces: it was
    built against another torch (errors.torch_abi, the loader's line)."""
    line = (ctx.s.errors or {}).get("torch_abi") if known(ctx.s.errors) else None
    if not line:
        return
    site = _SITE.search(line)
    so = re.search(r"(\S+?\.(?:so|pyd))\b", line)
    module = module_of(so.group(1)) if so else "a compiled extension"
    package = site.group(1) if site else None
    torch = ctx.s.torch if known(ctx.s.torch) else None
    this = f"the installed torch {torch}" if torch else "the installed torch"
    command = None
    if package and package != "torch":
        command = ctx.pip("install", "--force-reinstall", "--no-deps", "--no-cache-dir",
                          "--no-build-isolation", package.replace("_", "-"))
    ctx.finding("extension_built_for_other_torch",
                f"{module} was compiled against another torch than {this}: it misses a symbol "
                "of torch's C++ API, which changes between torch releases",
                evidence={"module": module, "package": package, "torch": torch,
                          "line": line[:200]},
                fix=(f"reinstall {package} built for {this}: its wheel for this torch and CUDA "
                     "if the project publishes one (PyG: data.pyg.org/whl/torch-<torch>+<cuda>"
                     ".html), else from source with --no-build-isolation so it compiles against "
                     "this torch" if package else
                     f"reinstall the package that provides {module} built for {this} (from "
                     "source with --no-build-isolation), or remove it if nothing needs it"),
                command=command)
    _supersede(ctx, module)


def apex_cuda_ext_missing(ctx: Context) -> None:
    """"No module named 'fused_layer_norm_cuda'": one of a package's compiled modules that its
    plain install leaves out (curated/doctor.toml [[extension_module]])."""
    if not known(ctx.s.import_errors):
        return
    table = {row["module"]: row for row in ctx.catalog.raw.get("extension_module", ())}
    for module, error in ctx.s.import_errors.items():
        row = table.get(module.rsplit(".", 1)[-1])
        if row is None or "No module named" not in error:
            continue
        options = " ".join(shlex.quote(f"--config-settings=--build-option={o}")
                           for o in dict.fromkeys(["--cpp_ext", "--cuda_ext", row["option"]]))
        ctx.finding("apex_cuda_ext_missing",
                    f"{row['package']}'s compiled module {module} is missing: {row['package']} "
                    f"was installed without {row['option']} (a Python-only build)",
                    evidence={"module": module, "package": row["package"],
                              "option": row["option"], "error": error},
                    fix=f"reinstall {row['package']} from its source checkout with "
                        f"{row['option']} (or {row.get('env', '')}=1), with the same torch and "
                        "a CUDA toolkit matching torch's CUDA",
                    command=f"pip uninstall -y {shlex.quote(row['package'])} && "
                            + row["install"].format(options=options),
                    source=row.get("source"))
        _supersede(ctx, module)
        return


def python_headers_missing(ctx: Context) -> None:
    """"Python.h: No such file or directory": the interpreter's development headers are not
    installed (Debian/Ubuntu ship them in pythonX.Y-dev)."""
    line = (ctx.s.errors or {}).get("python_h") if known(ctx.s.errors) else None
    if not line:
        return
    in_path = _PYTHON_IN_PATH.search(line)
    python = in_path.group(1) if in_path else (
        major_minor(ctx.s.python) if known(ctx.s.python) else None)
    package = f"python{python}-dev" if python else "python3-dev"
    os_id = ctx.s.os if known(ctx.s.os) else ""
    debian = bool(_DEBIAN.match(os_id))
    ctx.finding("python_headers_missing",
                f"the headers of Python {python or '3'} (Python.h) are missing, so no C++ "
                "extension builds for this interpreter (torch's extension headers include it)",
                evidence={"python": python, "os": os_id or None},
                fix=(f"install {package} (Debian/Ubuntu: `sudo apt-get install {package}`; "
                     "other systems: the package holding this Python's Python.h), or use a "
                     "Python that ships its headers (conda's, uv's)") if not debian else
                    f"install {package}",
                command=f"sudo apt-get install -y {shlex.quote(package)}" if debian else None)


def torch_cpu_only(ctx: Context) -> None:
    """torch is a CPU build (torch.version.cuda None, "+cpu", or torch's own "Torch not compiled
    with CUDA enabled") where CUDA is wanted (that error, CUDA unavailable, or a GPU present).
    An error when the machine has an NVIDIA GPU; a warning when that is not known (code that
    asks for CUDA on a machine without one is fixed by running it on the CPU), which asks for
    the GPU; on macOS, where torch has no CUDA build, a note of that."""
    errors = ctx.s.errors if known(ctx.s.errors) else {}
    line = errors.get("torch_cpu")
    torch = ctx.s.torch if known(ctx.s.torch) else None
    cpu_build = ctx.s.torch_cuda is None or (torch is not None and torch.endswith("+cpu"))
    gpu = bool(known(ctx.s.gpus) and ctx.s.gpus) or (known(ctx.s.driver) and ctx.s.driver)
    requested = ctx.s.requested_torch_cuda if known(ctx.s.requested_torch_cuda) else None
    if not (line or (cpu_build and (gpu or requested or "cuda_unavailable" in errors))):
        return
    name = f"torch{' ' + torch if torch else ''}"
    evidence = {"torch": torch, "torch_cuda": None, "error": line[:200] if line else None}
    if requested and cpu_build:
        evidence["requested_torch_cuda"] = requested
    if str(ctx.s.platform).startswith("macos"):
        ctx.finding("torch_cpu_only",
                    f"{name} has no CUDA: PyTorch publishes no CUDA build for macOS",
                    evidence=evidence, severity="warning",
                    fix="run the code on the CPU or Apple's GPU (device 'cpu' / 'mps'), or on a "
                        "Linux or Windows machine with an NVIDIA GPU")
        return
    if not gpu:
        ctx.need("gpu", f"{name} is a CPU-only build: with an NVIDIA GPU the fix is its CUDA "
                 "build, without one running the code on the CPU",
                 "`nvidia-smi -L`")
    windows = ctx.assumed_build if ctx.assumed_build is not None and \
        ctx.assumed_build.platform == "windows-x86_64" and not ctx.assumed_build.cuda else None
    why = (f"PyPI's Windows wheels of torch {public(torch or '')} (what `pip install torch` "
           "installs on Windows) are CPU-only builds (torch.version.cuda None), unlike its Linux "
           "ones" if windows else "it has no CUDA support, whatever the driver and GPU")
    if requested and cpu_build and not windows:
        why += (f"; the install command asked for CUDA {requested}, and the package manager "
                "installed the CPU build instead")
    if windows:
        evidence["assumed"] = "PyPI's win_amd64 build"
    ctx.finding("torch_cpu_only", f"{name} is a CPU-only build: {why}",
                evidence=evidence, severity=None if gpu else "warning",
                fix="install the CUDA build of the same torch release from PyTorch's index "
                    "(https://pytorch.org/get-started/previous-versions/ lists the pip command per "
                    "CUDA variant" + (", the same for Linux and Windows" if windows else "") + ")"
                    + ("" if gpu else "; on a machine without an NVIDIA GPU, run the code on the "
                       "CPU instead"),
                command=_cuda_build(ctx, public(torch)) if torch else None,
                source=windows.sources[0].url if windows and windows.sources else None)


def _cuda_build(ctx: Context, version: str) -> str | None:
    """The pip command of this torch release's CUDA build on Linux: PyPI's default build
    when it is a CUDA one, else the newest CUDA variant on PyTorch's index. On Windows, where
    PyPI's build is CPU-only: the CUDA variant on PyTorch's index (the previous-versions page
    gives the same pip command for Linux and Windows) of PyPI's Linux build first, else the
    newest; only variants the matrix knows of the release (its Linux x86_64 builds) and
    indexes it has a URL for."""
    if ctx.s.platform == "windows":
        return _windows_cuda_build(ctx, version)
    builds = [b for b in ctx.facts.torch_builds
              if b.version == version and b.cuda and b.platform == ctx.platform]
    builds.sort(key=lambda b: (b.index != "pypi", [-int(p) for p in b.cuda.split(".")]))
    for b in builds:
        if b.index == "pypi":
            return ctx.pip("install", "--force-reinstall", b.pin)
        url = ctx.index_urls.get(b.index)
        if url:
            return ctx.pip("install", "--force-reinstall", b.pin, "--index-url", url)
    return None


def _windows_cuda_build(ctx: Context, version: str) -> str | None:
    builds = [b for b in (*ctx.facts.torch_builds, *ctx.facts.reference_builds)
              if b.version == version and b.cuda and b.platform == "linux-x86_64"]
    builds.sort(key=lambda b: (b.index != "pypi", [-int(p) for p in b.cuda.split(".")]))
    for b in builds:
        tag = "cu" + b.cuda.replace(".", "")
        url = ctx.index_urls.get(f"pytorch-{tag}")
        if url:  # a local label, so that pip does not keep the installed CPU build
            return ctx.pip("install", "--force-reinstall", f"torch=={version}+{tag}",
                           "--index-url", url)
    return None


RULES = (extension_built_for_other_torch, apex_cuda_ext_missing, python_headers_missing,
         torch_cpu_only)
__all__ = ["RULES"]
