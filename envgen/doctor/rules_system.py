"""Rules decided by a pasted error line (the snapshot's ``errors``, see reports/errors.py):
the system's glibc or the loaded libstdc++ older than a binary needs, an op compiled with an
older C++ standard than torch's headers require, extension source that
includes torch's removed THC headers, a container's small /dev/shm, and the link errors of
DeepSpeed's Linux-only ops on Windows. Each fires only on its own error line, which decides
it; the judge ranks it first and quotes the line (``explains``)."""

from __future__ import annotations

import re
import shlex

from envgen.doctor.context import Context, known, public
from envgen.doctor.reports.errors import SEGMENT
from envgen.doctor.rules_build import ops_with_std
from envgen.versions import dotted_key, release

_GLIBC = re.compile(r"GLIBC_(\d+(?:\.\d+)+)")
_GLIBCXX = re.compile(r"(GLIBCXX|CXXABI)_(\d+(?:\.\d+)+)")
_LOADED = re.compile(r"(\S*libstdc\+\+\.so[.\d]*)")
_REQUIRED_BY = re.compile(r"\(required by ([^)]+)\)")
_CONDA = re.compile(r"(?:ana|mini)conda\d*/|/miniforge\d*/|/mambaforge/|/envs/|/conda/")
def _already(ctx: Context, kind: str) -> bool:
    return any(f.kind == kind for f in ctx.findings)


def glibc_from_error(ctx: Context) -> None:
    """The loader's "version `GLIBC_2.14' not found": the system glibc is older than that."""
    line = (ctx.s.errors or {}).get("glibc")
    m = _GLIBC.search(line or "")
    if not m or _already(ctx, "glibc_too_old"):
        return
    needs = m.group(1)
    glibc = ctx.s.glibc
    if known(glibc) and dotted_key(glibc) >= dotted_key(needs):
        return  # the facts disagree (another libc was loaded): the line alone does not decide
    by = _REQUIRED_BY.search(line)
    what = by.group(1).strip() if by else "a library being loaded"
    ctx.finding("glibc_too_old",
                f"{what} needs GLIBC_{needs}; the system's glibc"
                + (f" {glibc}" if known(glibc) else "") + f" is older than {needs}",
                evidence={"needs": needs, "glibc": glibc, "required_by": what,
                          "torch": ctx.s.torch},
                fix=f"use an OS or container whose glibc is {needs} or newer (`ldd --version` "
                    "shows it; a container base from `envgen make`), or a build of the "
                    "package made for this glibc")


def libstdcxx_too_old(ctx: Context) -> None:
    """"version `GLIBCXX_3.4.29' not found": the libstdc++ loaded is older than the gcc that
    built the binary named (often conda's own libstdc++ ahead of the system's)."""
    line = (ctx.s.errors or {}).get("glibcxx")
    m = _GLIBCXX.search(line or "")
    if not m:
        return
    label, version = m.group(1).upper(), m.group(2)
    # symbol version → the first gcc whose libstdc++ has it (curated/doctor.toml [libstdcxx])
    table = ctx.catalog.section("libstdcxx").get(label.lower(), {})
    gcc = table.get(version.split(".")[-1])
    loaded = _LOADED.search(line)
    by = _REQUIRED_BY.search(line)
    lib = loaded.group(1) if loaded else "the libstdc++.so.6 loaded"
    what = by.group(1).strip() if by else "a library being loaded"
    in_conda = bool(loaded and _CONDA.search(loaded.group(1)))
    command = None
    if in_conda and gcc:
        command = "conda install -c conda-forge " + shlex.quote(f"libstdcxx-ng>={gcc}")
    fix = (f"load a libstdc++ from gcc {gcc} or newer: " if gcc else
           "load a newer libstdc++: ")
    fix += ("update the conda environment's libstdc++ (libstdcxx-ng), which is found before "
            "the system's" if in_conda else
            "install a newer libstdc++ (the gcc that built it), or rebuild "
            f"{what} with the gcc whose libstdc++ is loaded")
    ctx.finding("libstdcxx_too_old",
                f"{what} needs {label}_{version}"
                + (f" (libstdc++ of gcc {gcc} or newer)" if gcc else "")
                + f"; {lib} does not have it",
                evidence={"needs": f"{label}_{version}", "loaded": lib, "required_by": what,
                          "gcc": ctx.s.gcc},
                fix=fix, command=command)


_STD = re.compile(r"C\+\+(\d+)")


def cxx_standard_from_error(ctx: Context) -> None:
    """torch's "#error C++17 or later compatible compiler is required to use PyTorch." (or
    ATen's, or "You need C++17 to compile PyTorch"): the op was compiled with an older -std
    than the torch headers it includes require."""
    line = (ctx.s.errors or {}).get("cxx_std")
    m = _STD.search(line or "")
    if not m or _already(ctx, "cxx_standard_mismatch"):
        return
    ops = ops_with_std(ctx, public(ctx.s.torch), int(m.group(1))) if known(ctx.s.torch) else []
    ctx.finding("cxx_standard_mismatch",
                f"an op was compiled with a C++ standard older than C++{m.group(1)}, which "
                "this torch's headers require",
                evidence={"needs": f"c++{m.group(1)}", "torch": ctx.s.torch,
                          "frameworks": dict(ctx.frameworks), "ops": ops},
                fix=(f"{'; '.join(ops)}: skip that op, or use a release of the framework whose "
                     f"op builder passes -std=c++{m.group(1)} with this torch" if ops else
                     "use a release of the framework whose op builder passes "
                     f"-std=c++{m.group(1)} (or newer) with this torch — DeepSpeed's async_io "
                     "passed -std=c++14 before its builders followed torch's standard — or a "
                     "torch whose headers accept the older standard"))


def torch_api_removed(ctx: Context) -> None:
    """"THC/THCDeviceUtils.cuh: No such file": the source includes THC, gone from torch 1.11.
    THC headers only named (a fix described, a build log's include) with a torch ≥ 1.11: a
    warning; with the torch unknown, it is asked for."""
    errors = ctx.s.errors or {}
    line = errors.get("thc")
    named = errors.get("thc_named")
    if not line and not named:
        return
    api = next((a for a in ctx.catalog.raw.get("removed_api", ()) if a.get("id") == "THC"), None)
    if api is None:
        return  # the catalog does not say when THC went: nothing to judge against
    removed = api["torch"]
    torch = ctx.s.torch
    if known(torch) and release(torch) < dotted_key(removed):
        return  # THC still ships with this torch: the line is not decided by the removal
    if not line and not known(torch):
        ctx.need("torch", f"the text names torch's THC headers, which torch {removed} removed: "
                 "the torch version decides whether the extension can build",
                 f"`{ctx.shell_python} -c \"import torch; print(torch.__version__)\"`")
        return
    ctx.finding("torch_api_removed",
                (f"the extension includes torch's THC headers, which torch {removed} removed"
                 if line else f"the text names torch's THC headers, which torch {removed} "
                 "removed: an extension that includes them does not build with this torch")
                + (f" (this torch: {torch})" if known(torch) else ""),
                severity=None if line else "warning",
                evidence={"torch": torch, "removed_in": removed, "api": "THC"},
                fix="use a release of the package that was ported from THC to ATen/c10 ("
                    + api.get("replacement", "the ATen/c10 equivalents") + f"), or torch < "
                    f"{removed} for this one", source=api.get("source"))


def torch_module_removed(ctx: Context) -> None:
    """"No module named 'torch._six'": the code imports a torch module a release removed
    (curated [[removed_api]] rows with ``module``): written for an older torch."""
    failed = ctx.s.import_errors if known(ctx.s.import_errors) else {}
    for api in ctx.catalog.raw.get("removed_api", ()):
        module = api.get("module")
        if not module or module not in failed:
            continue
        torch = ctx.s.torch if known(ctx.s.torch) else None
        ctx.finding("torch_api_removed",
                    f"the code imports {module}, which torch {api['torch']} removed"
                    + (f" (this torch: {torch})" if torch else "")
                    + ": it was written for an older torch",
                    evidence={"module": module, "removed_in": api["torch"], "torch": torch},
                    fix=f"use a release of the package that no longer imports {module} ("
                        + api.get("replacement", "its replacement") + f"), or torch < "
                        f"{api['torch']} for this one",
                    source=api.get("source"))


_SIGBUS = re.compile(r"(?:code|status)\s*[:=]?\s*-7\b|\bSIGBUS\b|(?<![a-z])Bus error\b|"
                     r"\bsignal\s?7\b", re.I)
_DATALOADER = re.compile(r"insufficient shared memory \(shm\)", re.I)
_SHM_FIX = ("check `df -h /dev/shm`; give the container more shared memory: docker run "
            "--shm-size=1g (or --ipc=host); on Kubernetes mount an emptyDir with medium: Memory "
            "at /dev/shm")


def shm_too_small(ctx: Context) -> None:
    """NCCL's "No space left on device" for its /dev/shm segment, or torch's "unable to write to
    file </torch_…>" (a shared tensor): an error. NCCL's "Error while creating shared memory
    segment /dev/shm/nccl-… (size N)" without an errno, a SIGBUS (exit code -7, "Bus error",
    "signal 7", DataLoader's shm message) or prose that blames /dev/shm: in a container,
    /dev/shm is usually smaller than the workers and NCCL need; a warning, as each has other
    causes."""
    errors = ctx.s.errors or {}
    cited = ctx.catalog.section("error_lines")
    if errors.get("torch_shm") and not errors.get("nccl_shm"):
        ctx.finding("shm_too_small",
                    "torch could not write a shared tensor into /dev/shm (DataLoader workers and "
                    "torch.multiprocessing pass tensors through it): /dev/shm is full or too "
                    "small (Docker's default is 64 MB)",
                    evidence={"torch": "unable to write to file </torch_…>"}, severity="error",
                    fix="check `df -h /dev/shm`; give the container more shared memory: docker "
                        "run --shm-size=8g (or --ipc=host); on Kubernetes mount an emptyDir with "
                        "medium: Memory at /dev/shm; or use fewer DataLoader workers",
                    source=cited.get("torch_shm"))
        return
    if errors.get("sem_shm"):
        ctx.finding("shm_too_small",
                    "Python's multiprocessing could not create a semaphore (SemLock): Linux keeps "
                    "named semaphores in /dev/shm, which is full (a container's default is 64 MB; "
                    "DataLoader workers fill it)",
                    evidence={"python": "SemLock: [Errno 28] No space left on device"},
                    severity="error", fix=_SHM_FIX + "; or use fewer DataLoader workers",
                    source=cited.get("sem_shm"), explains=errors["sem_shm"])
        return
    line = errors.get("nccl_shm")
    if line and SEGMENT.search(line):
        # NCCL 2.12 … 2.21 print no errno here: creating the segment failed (opening, sizing,
        # mapping or registering it), most often as /dev/shm had no room (the threads cited)
        ctx.finding("shm_too_small",
                    "NCCL could not create its shared-memory segment in /dev/shm (NCCL uses "
                    "it between the GPUs of a node): a /dev/shm too small for it, as a "
                    "container's default 64 MB is, is the usual cause; the line does not "
                    "say which call failed",
                    evidence={"nccl": "Error while creating shared memory segment "
                              "/dev/shm/nccl-…"},
                    severity="warning",
                    fix=_SHM_FIX + "; NCCL_DEBUG=INFO shows the call that failed (an earlier "
                        "'failed to extend /dev/shm/nccl-… to N bytes' is a full /dev/shm, "
                        "an earlier 'Cuda failure' is not)",
                    source=cited.get("nccl_shm_segment"), explains=line)
        return
    if line:
        ctx.finding("shm_too_small",
                    "NCCL found no room in /dev/shm for its shared-memory segment (Docker's "
                    "default /dev/shm is 64 MB; NCCL 2.7 and later use it between GPUs of a "
                    "node)",
                    evidence={"nccl": "No space left on device in /dev/shm"},
                    severity="error",
                    fix="check `df -h /dev/shm` and remove stale /dev/shm/nccl-* files of "
                        "killed jobs; give the container more shared memory: docker run "
                        "--shm-size=1g (or --ipc=host); on Kubernetes mount an emptyDir with "
                        "medium: Memory at /dev/shm. NCCL_SHM_DISABLE=1 avoids it at some "
                        "speed",
                    source=cited.get("nccl_shm"), explains=line)
        return
    line = errors.get("shm")
    if not line:
        return
    if _DATALOADER.search(line):
        what = ("a DataLoader worker died of a bus error, which torch says may be insufficient "
                "shared memory (shm): /dev/shm too small for the workers (Docker's default is "
                "64 MB)")
    elif _SIGBUS.search(line):
        what = ("the process died of SIGBUS (signal 7), which a /dev/shm too small for "
                "DataLoader workers or NCCL gives (Docker's default is 64 MB)")
    else:
        what = ("the report blames shared memory: a /dev/shm too small for DataLoader workers "
                "or NCCL (Docker's default is 64 MB)")
    ctx.finding("shm_too_small", what,
                evidence={"signal": "SIGBUS"} if _SIGBUS.search(line) else {"text": line[:200]},
                fix=_SHM_FIX,
                source=cited.get("shm_signal_7") if re.search(r"\bsignal\s?7\b", line, re.I)
                else None)


def linux_only_op(ctx: Context) -> None:
    """async_io / GDS wanted on Windows: an error (they are Linux-only). Else MSVC's "LNK1181 …
    aio.lib": DeepSpeed probing those ops on Windows, expected there and not the failure: info."""
    line = (ctx.s.errors or {}).get("aio_lib")
    wanted = [op for op in ctx.user_ops if op in ("async_io", "gds")]
    if ctx.s.platform == "windows" and wanted:
        ctx.finding("linux_only_op",
                    f"{', '.join(wanted)} build only on Linux: DeepSpeed does not support "
                    "them on Windows",
                    evidence={"ops": wanted, "platform": "windows"}, severity="error",
                    fix="build without them (DS_BUILD_AIO=0 DS_BUILD_GDS=0), or run under "
                        "WSL2 or Linux where they build")
        return
    if not line:
        return
    ctx.finding("linux_only_op",
                "DeepSpeed's async_io and GDS ops need libaio / cuFile, which Windows lacks: "
                "these link errors are its compatibility probe, and the ops are skipped",
                evidence={"ops": ["async_io", "gds"], "platform": "windows"},
                fix="nothing to fix for these lines (look at the error after them); to skip "
                    "the probe, build with DS_BUILD_AIO=0 and DS_BUILD_GDS=0 (DeepSpeed's "
                    "build_win.bat sets DS_BUILD_AIO=0)")


RULES = (glibc_from_error, libstdcxx_too_old, cxx_standard_from_error, torch_api_removed,
         torch_module_removed,
         shm_too_small, linux_only_op)
__all__ = ["RULES"]
