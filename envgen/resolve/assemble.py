"""Turn a feasible candidate into a :class:`Combination`: the chosen values, where each fact
came from, which ops the GPU cannot run, and notes for everything a user should know (a minor
mismatch, a system nvcc, a driver that runs only under minor-version compatibility, facts that
are curated or unknown, breakages not known to be fixed)."""

from __future__ import annotations

from envgen.facts.model import CudaToolkit, TorchBuild
from envgen.facts.release_model import BuildFacts, OpFacts, TorchHeaders
from envgen.resolve.checks import arch_base, cc_of, runs_on
from envgen.resolve.combination import _ID_UNSAFE, Combination, id_part, id_prefix
from envgen.resolve.engine import Feasible
from envgen.resolve.request import Request
from envgen.versions import dotted_key, spec_contains


def _op_std(build: BuildFacts, op: OpFacts, torch: str, cuda: str,
            headers: TorchHeaders | None) -> str | None:
    """Why ``op``'s own -std= flag (async_io's -std=c++14) cannot compile torch's headers."""
    if headers is None or headers.cxx_std is None:
        return None
    need = int(headers.cxx_std)
    for kind, rules in (("", op.cxx_std), (" for nvcc", op.nvcc_std)):
        rule = build.std(rules, torch, cuda)
        if rule is not None and int(rule.std) < need:
            where = (headers.cxx_std_where or "").split(": ", 1)[0]
            return (f"compiles with -std=c++{rule.std}{kind} ({rule.where}), but torch "
                    f"{torch}'s headers require C++{need}" + (f" ({where})" if where else ""))
    return None


def ops_unavailable(build: BuildFacts | None, torch: str, cuda: str,
                    arch: str | None, headers: TorchHeaders | None = None) -> tuple[str, ...]:
    """Ops of the framework release that cannot be built or run here, each with the reason
    read from the release's files (and, for an op's own -std= flag, torch's ``headers``)."""
    if build is None or not build.read:
        return ()
    out = []
    cc = cc_of(arch) if arch else None
    for op in build.ops:
        why = None
        if op.requires_torch and not spec_contains(op.requires_torch, torch):
            why = f"needs torch{op.requires_torch}"
        elif op.requires_cuda and not spec_contains(op.requires_cuda, cuda):
            why = f"needs CUDA{op.requires_cuda}"
        elif (std := _op_std(build, op, torch, cuda, headers)) is not None:
            out.append(f"{op.name}: {std}")
            continue
        elif cc and op.min_cc and cc < cc_of(op.min_cc):
            why = f"needs compute capability ≥ {op.min_cc} (have {arch})"
        elif cc and op.max_cc and cc > cc_of(op.max_cc):
            why = f"supports compute capability ≤ {op.max_cc} (have {arch})"
        if why:
            where = f" ({op.evidence[0]})" if op.evidence else ""
            out.append(f"{op.name}: {why}{where}")
    return tuple(out)


def release_driver(build: TorchBuild, runtime: CudaToolkit | None) -> tuple[str | None, str]:
    """The driver NVIDIA ships with torch's CUDA runtime release (full support, PTX JIT)."""
    if runtime is None:
        return None, ""
    release = runtime.release_of("cudart", build.cuda_runtime)
    if release is not None and release.driver:
        return release.driver, f"CUDA {release.release}"
    return runtime.toolkit_driver, f"CUDA {runtime.cuda} GA"


def _nvcc_driver(t: CudaToolkit) -> str | None:
    """The driver of the toolkit release whose nvcc envgen pins (usually an update release,
    whose driver is newer than the GA one): what running PTX that nvcc emits needs."""
    release = t.release_of("nvcc", t.nvcc_version)
    return release.driver if release is not None else None


def _default_arch_notes(f: Feasible) -> list[str]:
    """The framework's own default arch list (used by a build with neither a GPU nor
    TORCH_CUDA_ARCH_LIST) where it names archs this nvcc cannot target (DeepSpeed's
    6.0;6.1;7.0 under CUDA 13), or archs its builder misreads."""
    fw, t = f.framework, f.toolkit
    build = fw.build
    archs = build.default_archs.get(t.cuda) if build and build.read and build.default_archs \
        else None
    if not archs:
        return []
    where = f" ({build.default_archs_where})" if build.default_archs_where else ""
    said = f"{fw.framework} {fw.version}'s default arch list with nvcc {t.cuda} is " \
           f"{';'.join(archs)}{where}"
    bad = [a for a in archs if t.archs and f"sm_{a.replace('.', '')}" not in t.archs]
    misread = [a for a in archs if a not in bad and (e := build.arch_entry(
        f"sm_{a.replace('.', '')}", "aot")) is not None and e.result in ("fails", "misread")]
    if not bad and not misread:
        return []
    why = []
    if bad:
        why.append(f"nvcc {t.cuda} cannot target {', '.join(bad)} (its ptxas knows "
                   f"{t.archs[0]} … {t.archs[-1]})")
    if misread:
        why.append(f"its builder misreads {', '.join(misread)}")
    return [f"{said}: {' and '.join(why)}, so building its ops without a GPU and without "
            f"TORCH_CUDA_ARCH_LIST (DS_BUILD_OPS=1 pip install) fails; envgen's image sets "
            f"TORCH_CUDA_ARCH_LIST, and --gpu / --gpu-arch sets it in the env"]


def _arch_entry_notes(f: Feasible, arch: str) -> list[str]:
    """The framework's builder compiles ``arch`` without its a/f suffix (a refusal, when it
    misreads it or raises, is the resolver's gpu-arch rule)."""
    fw = f.framework
    if fw.build is None or not fw.build.read:
        return []
    notes = []
    for mode, when in (("aot", "ahead of time"), ("jit", "in a JIT load")):
        entry = fw.build.arch_entry(arch, mode)
        if entry is not None and entry.result == "dropped":
            notes.append(f"{fw.framework} {fw.version}'s op builder compiles {arch} {when} "
                         f"as {arch.rstrip('af')} ({entry.detail}; {entry.where}): the ops run "
                         f"on the GPU but leave out {arch}-specific code")
    return notes


def _gpu_notes(f: Feasible, request: Request) -> list[str]:
    arch, b, fw = request.gpu_arch, f.build, f.framework
    if not arch:
        return _default_arch_notes(f)
    notes = _arch_entry_notes(f, f.checks.facts.arch_for(arch, f.toolkit.cuda)[0])
    if b.archs is None:
        notes.append(f"the GPU archs torch {b.pin.split('==')[1]} was compiled for are not in "
                     f"the matrix; {arch} is not checked against them")
    elif not runs_on(b, arch)[0]:
        notes.append(f"torch {b.pin.split('==')[1]} has no machine code for {arch}: it runs by "
                     f"JIT-compiling its PTX ({', '.join(b.archs_ptx)}) at start-up, slowly, "
                     f"and needs the driver of its CUDA release")
    archs = fw.build.default_archs.get(f.toolkit.cuda) if fw.build and fw.build.read and \
        fw.build.default_archs else None
    if archs is not None and cc_of(arch) not in {cc_of(a) for a in archs}:
        notes.append(f"{fw.framework} {fw.version}'s default arch list with nvcc "
                     f"{f.toolkit.cuda} is {';'.join(archs)}: prebuilt ops need "
                     f"TORCH_CUDA_ARCH_LIST={cc_of(arch)[0]}.{cc_of(arch)[1]} (envgen's image "
                     f"build sets it)")
    return notes


def _driver_notes(f: Feasible, request: Request, full: str | None, what: str) -> list[str]:
    if not request.driver or not full:
        return []
    if dotted_key(request.driver) >= dotted_key(full):
        return []
    floor = f.checks.facts.toolkits[f.build.cuda].min_driver
    return [f"driver {request.driver} is below {full}, the driver of {what}: torch runs under "
            f"CUDA minor-version compatibility (≥ {floor}); kernels compiled for the GPU's own "
            f"sm run, PTX from a newer toolkit cannot be JIT-compiled, so build the ops for "
            f"your GPU's architecture"]


def _fact_marks(f: Feasible) -> dict[str, str]:
    b, fw = f.build, f.framework
    marks = {"torch_pins": b.pins_from,
             "torch_archs": b.archs_from,
             "torch_headers": "harvested" if b.headers is not None else "unknown"}
    if fw.build is None or not fw.build.read:
        marks["framework_build"] = "unknown"
    else:
        marks["framework_build"] = f"harvested from its {fw.build.origin}"
    marks["framework_files"] = "harvested" if fw.files is not None else "unknown"
    return marks


def make_combination(f: Feasible, request: Request) -> Combination:
    """The :class:`Combination` for a feasible candidate. Everything but the OS, its gcc and
    the id depends only on (release, torch build, Python, toolkit), which consecutive
    candidates share (the OS loop is innermost), so that part is computed once per run of
    them (memoized on the request's ``Checks``) and the object is filled from it."""
    b, fw, os = f.build, f.framework, f.os
    memo = f.checks.assembled
    if (memo is None or memo[0] is not fw or memo[1] is not b or memo[2] != f.python
            or memo[3] is not f.toolkit or memo[4] is not request):
        shared, before, after = _shared(f, request)
        prefix = id_prefix(fw.framework, fw.version, b.version, b.cuda, f.python)
        memo = f.checks.assembled = (fw, b, f.python, f.toolkit, request,
                                     Combination.filler(shared), before, after, prefix,
                                     _ID_UNSAFE.sub("_", "-" + b.platform.split("-", 1)[-1]))
    fill, before, after, prefix, arch = memo[5:]
    if f.gcc_source not in ("os", "os-toolkit"):
        notes = (*before, f"{os.id}'s default gcc {os.gcc} is outside what the op build "
                          f"accepts; use gcc {f.gcc} from {f.gcc_source}", *after)
    else:
        notes = before + after
    ident = (prefix + id_part(os.id) + arch)[:128]  # = combination_id(...)
    return fill(ident, os.id, f.gcc, f.gcc_source, os.glibc, notes)


def _shared(f: Feasible, request: Request) -> tuple[dict, tuple[str, ...], tuple[str, ...]]:
    """The fields that do not depend on the OS, and the notes before and after the one
    about the OS's gcc."""
    b, t, fw = f.build, f.toolkit, f.framework
    facts = f.checks.facts
    notes = []
    ostk = f.checks.os_toolkit
    if ostk is not None:
        notes.append(f"uses {ostk.os}'s own CUDA toolkit: {ostk.package} {ostk.version} "
                     f"(nvcc {ostk.nvcc_version or ostk.cuda}, g++-{ostk.gcc}) from its "
                     f"{' and '.join(ostk.components)} component"
                     f"{'s' if len(ostk.components) > 1 else ''}; the lock installs no CUDA "
                     f"compiler")
    if request.nvcc:
        notes.append(f"uses the system nvcc {t.cuda} (--nvcc); the lock installs no CUDA "
                     f"compiler" + ("" if t.nvcc_package else "; its max gcc and archs are "
                                    "not in the matrix, so they were not checked"))
    if t.cuda != b.cuda:
        notes.append(f"nvcc {t.cuda} stands in for CUDA {b.cuda} "
                     f"({f.checks.accepts(fw, t.cuda, b.cuda)[1]})")
    left = [k.replace("nccl", "NCCL").replace("cudnn", "cuDNN") for k, why in b.pins_unknown
            if not why.startswith(("none", "bundled"))]
    if b.curated and b.pins_from == "curated":
        notes.append(f"{b.pin}'s pins are curated (curated/torch.toml [[index_builds]])"
                     + (f", its {' / '.join(left)} not known" if left else "")
                     + f"; run `envgen matrix update --index {b.index}` to harvest them")
    elif b.curated:
        notes.append(f"{b.pin} is known from curated data only and its NCCL / cuDNN / triton "
                     f"pins are unknown; run `envgen matrix update --index {b.index}`")
    elif b.nccl is None:
        notes.append("NCCL is linked into this torch wheel; its version is not in the metadata")
    before = tuple(notes)
    notes = []  # after the note on the OS's gcc
    if fw.files is not None and fw.files.wheels and fw.files.wheel_for(f.python,
                                                                        b.platform) is None:
        notes.append(f"{fw.framework} {fw.version} has no wheel for Python {f.python}: it "
                     f"builds from its sdist")
    if fw.build is None or not fw.build.read:
        why = f" ({fw.build.error})" if fw.build and fw.build.error else ""
        notes.append(f"{fw.framework} {fw.version}'s build files were not read{why}: its nvcc "
                     f"check, C++ standard and op floors are unknown")
    if b.headers is None:
        notes.append(f"the C++ standard torch {b.version}'s headers require was not read")
    gpu_only = [o.name for o in (fw.build.ops if fw.build and fw.build.read else ())
                if o.needs_gpu]
    if gpu_only:
        notes.append(f"{fw.framework} {fw.version} builds {', '.join(gpu_only)} ahead of time "
                     f"only where a GPU is visible (read from its build code): an image built "
                     f"without one compiles them at first use")
    if fw.build and fw.build.read and fw.build.nvcc_mismatch == "skip-build":
        notes.append(f"{fw.framework} {fw.version}'s setup.py silently builds no op when its "
                     f"nvcc check fails")
    notes += f.checks.unchecked_breakages(fw, b.version, t.cuda, f.python)
    notes += _gpu_notes(f, request)
    runtime = facts.toolkits.get(b.cuda or "")
    full, what = release_driver(b, runtime)
    notes += _driver_notes(f, request, full, what)
    nvcc_driver = _nvcc_driver(t)
    if (request.driver and nvcc_driver and nvcc_driver != full
            and dotted_key(request.driver) < dotted_key(nvcc_driver)):
        notes.append(f"the ops are compiled by nvcc {t.nvcc_version}, whose toolkit release ships "
                     f"driver {nvcc_driver}: with driver {request.driver} their PTX cannot be "
                     f"JIT-compiled, so build them for the GPU's own architecture")
    archs = t.archs
    if b.archs is not None:
        built = {arch_base(a) for a in b.archs}
        archs = tuple(a for a in t.archs if arch_base(a) in built)
    fw_archs = None
    if fw.build and fw.build.read and fw.build.default_archs:
        fw_archs = fw.build.default_archs.get(t.cuda)
    shared = dict(
        framework=fw.framework,
        framework_version=fw.version,
        torch=b.version,
        torch_pin=b.pin,
        torch_index=b.index,
        cuda=b.cuda,
        python=f.python,
        platform=b.platform,
        nccl=b.nccl,
        cudnn=b.cudnn,
        triton=b.triton,
        nvcc=t.cuda,
        nvcc_package=ostk.package if ostk is not None else t.nvcc_package,
        nvcc_version=ostk.nvcc_version if ostk is not None else t.nvcc_version,
        nvcc_from="os-package" if ostk is not None else "system" if request.nvcc else "lock",
        torch_glibc=b.glibc,
        min_driver=runtime.min_driver if runtime else None,
        release_driver=full,
        nvcc_driver=nvcc_driver,
        cuda_archs=archs,
        framework_archs=tuple(fw_archs) if fw_archs is not None else None,
        ops_unavailable=ops_unavailable(fw.build, b.version, t.cuda, request.gpu_arch,
                                        b.headers),
        evidence="curated" if b.curated else "harvested",
        facts=_fact_marks(f),
    )
    return shared, before, tuple(notes)
