"""Prove the framework's ops were compiled into the image (run by the Dockerfile's builder).

Copied from envgen's images/check-ops.py by `envgen make --image`. Standard library only.
Usage: python check-ops.py CHECK OP [OP ...]   exit 0: every op is there, 1: not.
           With ENVGEN_OPS_REPORT=FILE it also writes what the framework itself reports it
           built (DeepSpeed: git_version_info.installed_ops; others: the compiled modules
           found) to FILE as JSON, for the image's io.envgen.ops label.
       python check-ops.py --import CHECK OP [OP ...]   also load each compiled op into this
           Python (after torch) and print one JSON list of {name, status, message}: what
           `envgen evidence` records for a built image (run inside the runtime image).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pathlib
import sys


def _files(package: str, pattern: str) -> list[pathlib.Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    root = pathlib.Path(next(iter(spec.submodule_search_locations)))
    return sorted(root.rglob(pattern))


def deepspeed(ops: list[str]) -> list[str]:
    """setup.py records what it built in git_version_info.installed_ops; each built op is a
    deepspeed/ops/**/<op>_op*.so (DeepSpeed's OpBuilder.absolute_name)."""
    from deepspeed.git_version_info import installed_ops

    problems = []
    for op in ops:
        libs = _files("deepspeed", f"{op}_op*.so")
        if not installed_ops.get(op):
            problems.append(f"{op}: not in deepspeed.git_version_info.installed_ops")
        elif not libs:
            problems.append(f"{op}: installed_ops says yes, but no {op}_op*.so in the package")
        else:
            print(f"  {op:24} {libs[0].relative_to(libs[0].parents[2])}")
    return problems


def _compiled(name: str):
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:  # its parent package is missing
        return None
    return spec if spec is not None and (spec.origin or "").endswith(".so") else None


def modules(ops: list[str]) -> list[str]:
    """Each op is an importable extension module (dotted name) built into the package;
    "a|b" accepts the first of several names (a module renamed between releases)."""
    problems = []
    for op in ops:
        found = [spec for spec in map(_compiled, op.split("|")) if spec is not None]
        if not found:
            problems.append(f"{op.replace('|', ' or ')}: no compiled extension module")
        else:
            print(f"  {found[0].name:40} {found[0].origin}")
    return problems


CHECKS = {"deepspeed": deepspeed, "modules": modules}


def report(check: str, ops: list[str]) -> dict:
    """What was built, in the framework's own words: DeepSpeed's setup.py records every op it
    compiled in git_version_info.installed_ops (more than asked: async_io pulls in
    pin_memory); the others have no such record, so it is the compiled modules found."""
    if check == "deepspeed":
        from deepspeed.git_version_info import installed_ops

        return {"check": check, "source": "deepspeed.git_version_info.installed_ops",
                "ops": sorted(op for op, built in installed_ops.items() if built)}
    found = []
    for op in ops:
        spec = next((s for s in map(_compiled, op.split("|")) if s is not None), None)
        if spec is not None:
            found.append(spec.name)
    return {"check": check, "source": "compiled extension modules", "ops": found}

# A library only a machine with the NVIDIA driver has: an op linked to it cannot load on a
# GPU-less builder, which says nothing about the op (DeepSpeed's async_io links -lcuda).
DRIVER_ONLY = ("libcuda.so", "libnvidia-ml.so")


def _module_of(lib: pathlib.Path) -> str:
    """deepspeed/ops/adam/fused_adam_op.cpython-311-x86_64-linux-gnu.so → its dotted name."""
    for root in map(pathlib.Path, sys.path):
        try:
            rel = lib.relative_to(root.resolve()) if root.is_dir() else None
        except ValueError:
            continue
        if rel is not None:
            return ".".join((*rel.parent.parts, rel.name.split(".")[0]))
    raise LookupError(f"{lib} is not under sys.path")


def _failed(exc: Exception) -> dict:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if any(lib in text for lib in DRIVER_ONLY):
        return {"status": "skip", "message": f"needs the NVIDIA driver to load: {text}"}
    return {"status": "fail", "message": text}


def _load(name: str) -> dict:
    try:
        importlib.import_module(name)
    except Exception as exc:  # every failure is the op's result
        return _failed(exc)
    return {"status": "pass", "message": ""}


def _load_deepspeed(op: str) -> dict:
    """DeepSpeed's own loader, as a user's code calls it: a prebuilt op is imported by the
    builder (which also makes the symbols other ops export visible, e.g. async_io needs
    pin_memory's ``deepspeed_pin_tensor_t``); a bare ``import`` of the .so is not enough."""
    from deepspeed.git_version_info import installed_ops
    from deepspeed.ops.op_builder.all_ops import ALL_OPS

    if not installed_ops.get(op) or op not in ALL_OPS:
        return {"status": "fail", "message": "not prebuilt (it would JIT-compile at first use)"}
    try:
        ALL_OPS[op].load(verbose=False)
    except Exception as exc:  # every failure is the op's result
        return _failed(exc)
    return {"status": "pass", "message": ""}


def load_ops(check: str, ops: list[str]) -> list[dict]:
    """Load each op the way its framework does (torch first): DeepSpeed through its op
    builders, the others by importing the compiled module."""
    import torch  # noqa: F401 - the ops link against torch's libraries

    results = []
    for op in ops:
        if check == "deepspeed":
            libs = _files("deepspeed", f"{op}_op*.so")
            if not libs:
                results.append({"name": op, "status": "fail", "message": "no compiled module"})
                continue
            results.append({"name": op, "module": _module_of(libs[0].resolve()),
                            **_load_deepspeed(op)})
            continue
        else:
            names = [spec.name for spec in map(_compiled, op.split("|")) if spec is not None]
        if not names:
            results.append({"name": op, "status": "fail", "message": "no compiled module"})
            continue
        results.append({"name": op, "module": names[0], **_load(names[0])})
    return results


def main(argv: list[str]) -> int:
    if argv[:1] == ["--import"] and len(argv) >= 3 and argv[1] in CHECKS:
        results = load_ops(argv[1], argv[2:])
        print(json.dumps(results))
        return 1 if any(r["status"] == "fail" for r in results) else 0
    if len(argv) < 2 or argv[0] not in CHECKS:
        print(f"usage: check-ops.py {{{','.join(CHECKS)}}} OP [OP ...]", file=sys.stderr)
        return 2
    print(f"compiled ops ({argv[0]}):")
    problems = CHECKS[argv[0]](argv[1:])
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    out = os.environ.get("ENVGEN_OPS_REPORT")
    if out and not problems:
        path = pathlib.Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        built = report(argv[0], argv[1:])
        path.write_text(json.dumps(built, indent=1) + "\n", encoding="utf-8")
        print(f"built, as {built['source']} reports: {' '.join(built['ops'])}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
