"""How a DeepSpeed release's op builder reads ``TORCH_CUDA_ARCH_LIST`` (see
:mod:`envgen.harvest.op_builder`): its default arch list per nvcc CUDA
(``get_default_compute_capabilities()``), and ``CUDAOpBuilder.compute_capability_args()`` run on
each of :data:`ARCH_ENTRIES`, ahead of time and as a JIT load: whether it compiles for the arch,
drops its ``a``/``f`` suffix, misreads it or raises, with the line.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from envgen.harvest import op_builder_model as model
from envgen.harvest.static_eval import (
    Failed,
    Opaque,
    Unread,
)


def default_archs(
    mod: model.Module, cudas: list[str], unread: list[str]
) -> dict[str, list[str]] | None:
    fn = mod.funcs.get("get_default_compute_capabilities")
    if fn is None:
        unread.append(f"{mod.path}: no get_default_compute_capabilities()")
        return None
    out = {}
    try:
        for cuda in cudas:
            value = model.evaluator(mod.consts, model.key(cuda), (2, 0)).function(fn)
            if not isinstance(value, str):
                raise Unread(fn, "did not evaluate to a string")
            out[cuda] = [cc for cc in value.split(";") if cc]
    except Unread as exc:
        unread.append(f"{mod.where(exc.node)}: get_default_compute_capabilities(): {exc.reason}")
        return None
    return out


# -- TORCH_CUDA_ARCH_LIST entries ---------------------------------------------------------------

# Entries of TORCH_CUDA_ARCH_LIST, one per shape an arch name has (a one- or two-digit major,
# no suffix or NVIDIA's architecture-specific "a" / family-specific "f"): the inputs the
# builder's own parsing is run on; which names a toolkit accepts is harvested (cuda.json).
ARCH_ENTRIES = ("8.0", "10.0", "9.0a", "10.0a", "10.0f")
_GENCODE = re.compile(r"code=(sm|compute)_(\w+)")
_JIT_GPU = (9, 0)  # the GPU the modelled machine shows a JIT build (only when the list is unread)


def _entry_sm(entry: str) -> str:
    major, minor = entry.split(".")
    return f"sm_{major}{minor}"


def _arch_entry(mod: model.Module, fn: ast.FunctionDef, entry: str, jit: bool) -> dict[str, Any]:
    """What ``compute_capability_args()`` makes of ``TORCH_CUDA_ARCH_LIST=entry`` on the
    modelled machine: setup.py's ahead-of-time build, or a JIT load on a machine whose one GPU
    has that capability (as NVML reports it: without a suffix)."""
    consulted: list[bool] = []
    filter_fn = mod.method("CUDAOpBuilder", "filter_ccs")
    major, minor = entry.split(".")
    gpu = (int(major), int(minor.rstrip("af")))

    def getenv(key: Any = None, default: Any = None, *_: Any) -> Any:
        if key == "TORCH_CUDA_ARCH_LIST":
            consulted.append(True)
            return entry
        return default

    def filter_ccs(ccs: Any) -> Any:
        if filter_fn is None:
            return ccs
        return model.evaluator(mod.consts, (12, 8), (2, 0), model.params(filter_fn, (ccs,)),
                          origin=mod.path, decisive=lambda _n: True).function(filter_fn)

    stand_ins = {"os.getenv": getenv, "os.environ.get": getenv, "self.filter_ccs": filter_ccs,
                 "getattr": lambda _o=None, _n=None, default=None: default,
                 "hasattr": lambda *_: False, "torch.cuda.device_count": lambda *_: 1,
                 "torch.cuda.get_device_capability": lambda *_: gpu,
                 "torch.cuda.is_initialized": lambda *_: True}
    evaluator = model.evaluator(mod.consts, (12, 8), (2, 0), model.params(fn, ()), origin=mod.path,
                           calls=stand_ins, attrs={"self.jit_mode": jit, "self.name": "op"},
                           decisive=lambda _n: True)
    row: dict[str, Any] = {"mode": "jit" if jit else "aot", "entry": entry}
    try:
        value = evaluator.function(fn)
    except Failed as exc:
        unread_list = "" if consulted or not jit else "TORCH_CUDA_ARCH_LIST is not read: "
        return {**row, "result": "fails", "where": mod.where(exc.node),
                "detail": unread_list + exc.error}
    unread_list = "" if consulted or not jit else \
        f"TORCH_CUDA_ARCH_LIST is not read, the GPU's {gpu[0]}.{gpu[1]} is: "
    want, base = _entry_sm(entry), _entry_sm(entry.rstrip("af"))
    listed = evaluator.environ.get("TORCH_CUDA_ARCH_LIST")
    if jit and value == [] and isinstance(listed, str):
        got = [t.removesuffix("+PTX") for t in listed.split(";")]
        result = "kept" if entry in got else "dropped" if entry.rstrip("af") in got else "misread"
        return {**row, "result": result, "where": mod.where(fn),
                "detail": f"{unread_list}TORCH_CUDA_ARCH_LIST={listed}"}
    if not isinstance(value, list) or any(isinstance(v, Opaque) for v in value) or not value:
        reason = value.reason if isinstance(value, Opaque) else "no -gencode flags"
        raise Unread(fn, f"TORCH_CUDA_ARCH_LIST={entry}: {reason}")
    sms = [f"{kind}_{num}" for v in value for kind, num in _GENCODE.findall(str(v))
           if kind == "sm"]
    result = "kept" if want in sms else "dropped" if base in sms else "misread"
    line = next((getattr(v, "line", 0) for v in value), 0)
    return {**row, "result": result, "where": f"{mod.path}:{line or fn.lineno}",
            "detail": unread_list + " ".join(str(v) for v in value)}


def arch_entries(mod: model.Module, unread: list[str]) -> list[dict[str, Any]] | None:
    """How ``CUDAOpBuilder.compute_capability_args()`` reads each of :data:`ARCH_ENTRIES` in
    ``TORCH_CUDA_ARCH_LIST``, ahead of time and in a JIT load: ``kept`` (compiled for that
    arch), ``dropped`` (for the arch without its suffix), ``misread`` (for another arch),
    ``fails`` (the builder raises). ``detail``: the -gencode flags made, the list handed on to
    torch (JIT), or the error; a JIT load that does not read the list says so first (the GPU's
    own capability is parsed instead)."""
    fn = mod.method("CUDAOpBuilder", "compute_capability_args")
    if fn is None:
        unread.append(f"{mod.path}: no CUDAOpBuilder.compute_capability_args()")
        return None
    try:
        return [_arch_entry(mod, fn, entry, jit) for jit in (False, True)
                for entry in ARCH_ENTRIES]
    except Unread as exc:
        unread.append(f"{mod.where(exc.node)}: compute_capability_args(): {exc.reason}")
        return None


# -- assert_no_cuda_mismatch --------------------------------------------------------------------
