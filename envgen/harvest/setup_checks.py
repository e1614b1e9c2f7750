"""Build facts that Colossal-AI's and Megatron-Core's own release files state.

The sibling of :mod:`envgen.harvest.op_builder` (DeepSpeed): per release, a JSON-able dict
with the same keys, read **statically** from the release's files (``files`` maps archive member
paths, relative to the sdist or wheel root, to their text). The release's code is untrusted and
is never imported or executed: it is parsed with :mod:`ast`, and computed values (the default
arch list per CUDA) are evaluated by the strict :class:`~envgen.harvest.static_eval.Evaluator`;
anything outside its whitelist goes to ``unread``, never guessed.

Keys beyond the DeepSpeed shape (each explained in :data:`EXTRA_KEYS`):

* ``nvcc_mismatch``: what the release does when its nvcc check fails: ``"raise"`` (the build
  stops) or ``"skip-build"`` (Colossal-AI 0.2.0–0.2.5: setup.py builds no op and succeeds).
* per op ``needs_gpu``: the op's ahead-of-time build needs a visible GPU (its flags call
  ``torch.cuda.get_device_capability()``, or the build skips the op when
  ``torch.cuda.is_available()`` is false); ``gpu_override``: an env var lifting the latter.
* per op ``optional``: a setuptools ``optional=True`` extension (a failed compile is skipped).

``default_archs`` is the list the build sets when ``TORCH_CUDA_ARCH_LIST`` is unset **and no
GPU is visible** (cross-compiling, e.g. ``docker build``); with a GPU visible torch builds for
that GPU.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from envgen.harvest.static_ast import (
    calls,
    calls_to,
    classes,
    constants,
    functions,
    parse,
)
from envgen.harvest.static_eval import (
    Evaluator,
    Unread,
)

EXTRA_KEYS = {
    "nvcc_mismatch": "what a failed nvcc check does: 'raise' | 'skip-build' | null",
    "ops[].needs_gpu": "the op's ahead-of-time build needs a visible GPU",
    "ops[].gpu_override": "env var that lets the build proceed without a GPU (e.g. FORCE_CUDA)",
    "ops[].optional": "setuptools optional=True: a failed compile is skipped, not an error",
}

_STD = re.compile(r"^-std=c\+\+(\d+)$")
_UNPARSEABLE = "not parseable by this Python"


# ------------------------------------------------------------------------------------------
# small AST helpers


def _evidence(files: dict[str, str], path: str, node: ast.AST) -> str:
    line = getattr(node, "lineno", 0)
    lines = files[path].splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return f"{path}:{line}: {text}"


def _std_flags(node: ast.AST) -> list[ast.Constant]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and _STD.match(n.value)
    ]


def _effective_std(node: ast.AST) -> ast.Constant | None:
    """The ``-std=`` flag that wins (compilers take the last one) in a flag-building node."""
    flags = sorted(_std_flags(node), key=lambda c: (c.lineno, c.col_offset))
    return flags[-1] if flags else None


def _std_entry(files: dict[str, str], path: str, const: ast.Constant) -> dict[str, str]:
    match = _STD.match(const.value)
    assert match is not None
    return {"std": match[1], "torch": "", "cuda": "", "where": f"{path}:{const.lineno}"}


def _empty(unread: list[str]) -> dict[str, Any]:
    return {
        "nvcc_check": None,
        "nvcc_mismatch": None,
        "cuda_minor_mismatch_ok": None,
        "skip_cuda_check": None,
        "cxx_std": [],
        "nvcc_std": [],
        "default_archs": None,
        "ops": [],
        "requires_torch": None,
        "requires_cuda": None,
        "unread": unread,
    }


# ------------------------------------------------------------------------------------------
# Colossal-AI

_CAI_NVCC_CHECKS = ("check_system_pytorch_cuda_match", "check_cuda_torch_binary_vs_bare_metal")
_CAI_UTILS = ("extensions/utils.py", "op_builder/utils.py")


def COLOSSALAI_WANT(name: str) -> bool:
    """Archive members :func:`colossalai_build_facts` reads (paths relative to the sdist root)."""
    return name == "setup.py" or (
        name.endswith(".py") and name.startswith(("op_builder/", "extensions/"))
    )


def _mismatch_action(body: list[ast.stmt]) -> str:
    """``raise``, ``skip-build`` (``return False``) or ``warn`` for the body of a mismatch test."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return "raise"
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Constant)
            and node.value.value is False
        ):
            return "skip-build"
    return "warn"


def _cai_nvcc_check(
    files: dict[str, str], trees: dict[str, ast.Module], facts: dict[str, Any]
) -> ast.FunctionDef | None:
    """Classifies Colossal-AI's nvcc-vs-torch.version.cuda check (major/minor ``!=`` tests)."""
    for path, tree in trees.items():
        for name in _CAI_NVCC_CHECKS:
            func = functions(tree).get(name)
            if func is None:
                continue
            actions: dict[str, str] = {}
            for node in ast.walk(func):
                if not (
                    isinstance(node, ast.If)
                    and isinstance(node.test, ast.Compare)
                    and len(node.test.ops) == 1
                    and isinstance(node.test.ops[0], ast.NotEq)
                ):
                    continue
                text = ast.unparse(node.test)
                part = "major" if "major" in text else "minor" if "minor" in text else None
                if part:
                    actions[part] = _mismatch_action(node.body)
                    facts["_evidence"].append(_evidence(files, path, node))
            major, minor = actions.get("major"), actions.get("minor")
            if major in ("raise", "skip-build") and minor in ("raise", "skip-build"):
                facts["nvcc_check"], facts["nvcc_mismatch"] = "exact", major
            elif major in ("raise", "skip-build"):
                facts["nvcc_check"], facts["nvcc_mismatch"] = "major", major
            else:
                facts["unread"].append(f"{path}: {name} has no recognisable major-version test")
            return func
    return None


def _cai_min_torch(files: dict[str, str], trees: dict[str, ast.Module], facts: dict[str, Any]):
    """``>=MAJOR.MINOR`` from ``X < a or (X == a and Y < b)`` tests guarding a ``raise``."""

    def pattern(test: ast.expr, bind: Callable[[ast.expr], Any]) -> tuple[Any, Any] | None:
        if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or)):
            return None
        if len(test.values) != 2:
            return None
        first, second = test.values
        if not (
            isinstance(first, ast.Compare)
            and isinstance(first.ops[0], ast.Lt)
            and isinstance(second, ast.BoolOp)
            and isinstance(second.op, ast.And)
            and len(second.values) == 2
            and all(isinstance(v, ast.Compare) for v in second.values)
        ):
            return None
        eq, lt = second.values
        if not (isinstance(eq.ops[0], ast.Eq) and isinstance(lt.ops[0], ast.Lt)):  # type: ignore[attr-defined]
            return None
        return bind(first.comparators[0]), bind(lt.comparators[0])  # type: ignore[attr-defined]

    for path, tree in trees.items():
        consts = constants(tree)
        for node in ast.walk(tree):  # setup.py 0.2.0-0.2.5: literal test at module level
            if isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body):
                found = pattern(node.test, lambda e: getattr(e, "value", None))
                if found and all(isinstance(v, int) for v in found):
                    facts["requires_torch"] = f">={found[0]}.{found[1]}"
                    facts["_evidence"].append(_evidence(files, path, node))
                    return
        for call in calls(tree, "check_pytorch_version"):  # 0.2.6+: a helper with constants
            args = [
                consts.get(a.id) if isinstance(a, ast.Name) else getattr(a, "value", None)
                for a in call.args
            ]
            helper = next(
                (f for t in trees.values() if (f := functions(t).get("check_pytorch_version"))),
                None,
            )
            if helper is None or len(args) != 2 or not all(isinstance(a, int) for a in args):
                facts["unread"].append(
                    f"{path}:{call.lineno}: check_pytorch_version arguments not literal"
                )
                return
            params = [a.arg for a in helper.args.args]
            binding = dict(zip(params, args, strict=False))
            for node in ast.walk(helper):
                if isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body):
                    found = pattern(node.test, lambda e, b=binding: b.get(getattr(e, "id", "")))
                    if found and all(isinstance(v, int) for v in found):
                        facts["requires_torch"] = f">={found[0]}.{found[1]}"
                        facts["_evidence"].append(_evidence(files, path, call))
                        return


def _cai_archs(
    files: dict[str, str], trees: dict[str, ast.Module], cudas: list[str], facts: dict[str, Any]
) -> None:
    """Evaluates the block that sets ``os.environ["TORCH_CUDA_ARCH_LIST"]`` for each CUDA."""
    for path, tree in trees.items():
        for func in functions(tree).values():
            for node in ast.walk(func):
                if not (
                    isinstance(node, ast.If)
                    and "TORCH_CUDA_ARCH_LIST" in ast.unparse(node.test)
                    and any(
                        isinstance(n, ast.Subscript) and "TORCH_CUDA_ARCH_LIST" in ast.unparse(n)
                        for s in node.body
                        for n in ast.walk(s)
                    )
                ):
                    continue
                archs: dict[str, list[str]] = {}
                for cuda in cudas:
                    major, minor = cuda.split(".")

                    def probe(*_args: Any, _major: str = major, _minor: str = minor) -> Any:
                        return _Probe(_major, _minor)

                    evaluator = Evaluator(calls={"get_cuda_bare_metal_version": probe})
                    try:
                        for stmt in node.body:
                            _bind_probe(evaluator, stmt) or evaluator.stmt(stmt)
                    except Unread as exc:
                        facts["unread"].append(f"{_evidence(files, path, exc.node)} ({exc})")
                        return
                    value = evaluator.environ.get("TORCH_CUDA_ARCH_LIST")
                    if not isinstance(value, str):
                        facts["unread"].append(f"{path}:{node.lineno}: arch list not a string")
                        return
                    archs[cuda] = [a for a in value.split(";") if a]
                facts["default_archs"] = archs
                facts["_evidence"].append(_evidence(files, path, node))
                return


class _Probe:
    """Stands in for ``get_cuda_bare_metal_version()``: binds ``*major*`` / ``*minor*`` names."""

    def __init__(self, major: str, minor: str) -> None:
        self.major, self.minor = major, minor


def _bind_probe(evaluator: Evaluator, stmt: ast.stmt) -> bool:
    """``_, major, minor = get_cuda_bare_metal_version(d)``: binds the names by what they say
    (the tuple's shape changed across releases: (raw, major, minor) then (major, minor))."""
    if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    if not (isinstance(func, ast.Name) and func.id in evaluator.calls):
        return False
    value = evaluator.calls[func.id]()  # its argument (the CUDA dir) is not needed
    if not isinstance(value, _Probe):
        return False
    target = stmt.targets[0]
    names = target.elts if isinstance(target, ast.Tuple) else [target]
    for name in names:
        if not isinstance(name, ast.Name):
            raise Unread(name)
        if "major" in name.id:
            evaluator.env[name.id] = value.major
        elif "minor" in name.id:
            evaluator.env[name.id] = value.minor
    return True


def _cai_gpu_gate(
    files: dict[str, str], trees: dict[str, ast.Module]
) -> tuple[str | None, str | None]:
    """Evidence that the build skips CUDA ops without a visible GPU, and the override env var."""
    setup = trees.get("setup.py")
    if setup is not None:  # 0.2.0-0.2.5: check_cuda_availability() returns False without a GPU
        func = functions(setup).get("check_cuda_availability")
        if func is not None:
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.If)
                    and "torch.cuda.is_available()" in ast.unparse(node.test)
                    and _mismatch_action(node.body) == "skip-build"
                ):
                    return _evidence(files, "setup.py", node), None
    path = "extensions/cuda_extension.py"
    tree = trees.get(path)
    if tree is not None:  # 0.3.5+: _CudaExtension.is_available()
        funcs = functions(tree)
        func = funcs.get("is_available") or funcs.get("is_hardware_available")  # 0.3.5-0.3.6
        if func is not None:
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and "torch.cuda.is_available()" in ast.unparse(
                    node
                ):
                    env = [
                        c.args[0].value
                        for c in calls(node, "get")
                        if c.args and isinstance(c.args[0], ast.Constant)
                    ]
                    return _evidence(files, path, node), (env[0] if env else None)
    return None, None


def _cai_device_query(trees: dict[str, ast.Module]) -> set[str]:
    """Helper functions whose result needs a visible GPU (``get_device_capability``)."""
    found = set()
    for tree in trees.values():
        for name, func in functions(tree).items():
            if calls(func, "get_device_capability"):
                found.add(name)
    return found


def _cai_ops(files: dict[str, str], trees: dict[str, ast.Module], facts: dict[str, Any]) -> None:
    registry = trees.get("extensions/__init__.py") or trees.get("op_builder/__init__.py")
    if registry is None:
        facts["unread"].append("op_builder/__init__.py, extensions/__init__.py: not in the archive")
        return
    names: list[tuple[str | None, str]] = []
    for node in registry.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in (
            "ALL_OPS",
            "ALL_EXTENSIONS",
        ):
            if isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Name):
                        names.append((key.value, value.id))
            elif isinstance(node.value, ast.List):
                names += [(None, e.id) for e in node.value.elts if isinstance(e, ast.Name)]
    defined = {
        name: (path, cls) for path, tree in trees.items() for name, cls in classes(tree).items()
    }
    device_helpers = _cai_device_query(trees)
    gate, override = _cai_gpu_gate(files, trees)
    cxx: list[tuple[int, str, ast.Constant]] = []
    nvcc: list[tuple[int, str, ast.Constant]] = []
    for op_name, class_name in names:
        if class_name not in defined:
            facts["unread"].append(f"{class_name}: class not found in the archive")
            continue
        path, cls = defined[class_name]
        bases = [ast.unparse(b) for b in cls.bases]
        init = calls(cls, "__init__")
        kwargs = {k.arg: k.value for c in init for k in c.keywords}
        if op_name is None:  # extensions: super().__init__(name="…", support_aot=…)
            first = next((c.args[0] for c in init if c.args), kwargs.get("name"))
            op_name = first.value if isinstance(first, ast.Constant) else None
        aot = kwargs.get("support_aot")
        if isinstance(aot, ast.Constant) and aot.value is False:
            continue  # never built ahead of time (flash attention via third-party packages)
        evidence = [_evidence(files, path, cls)]
        methods = functions(cls, nested=False)
        gated = bool(gate) and ("_CudaExtension" in bases or "Builder" in bases)
        if gated:
            evidence.append(str(gate))
        queries = False
        for kind, sink in (("cxx_flags", cxx), ("nvcc_flags", nvcc)):
            method = methods.get(kind)
            if method is None:
                continue
            std = _effective_std(method)
            if std is not None:
                sink.append((int(_STD.match(std.value)[1]), path, std))  # type: ignore[index]
                evidence.append(_evidence(files, path, std))
            for helper in sorted(device_helpers):
                for call in calls(method, helper):
                    queries = True
                    evidence.append(_evidence(files, path, call))
        facts["ops"].append(
            {
                "name": op_name,
                "builder": class_name,
                "min_cc": None,
                "max_cc": None,
                "requires_cuda": None,
                "requires_torch": None,
                "needs_gpu": gated or queries,
                # the env var only lifts the is_available() gate, not a device query
                "gpu_override": override if gated and not queries else None,
                "optional": None,
                "evidence": evidence,
            }
        )
    for key, found in (("cxx_std", cxx), ("nvcc_std", nvcc)):
        if found:
            _, path, const = max(found, key=lambda f: f[0])
            facts[key] = [_std_entry(files, path, const)]


def colossalai_build_facts(files: dict[str, str], cudas: list[str]) -> dict[str, Any]:
    """Build facts of one Colossal-AI release (sdist members selected by
    :func:`COLOSSALAI_WANT`), ``default_archs`` evaluated for each CUDA ``major.minor`` in
    ``cudas``."""
    unread: list[str] = []
    facts = _empty(unread)
    facts["_evidence"] = []
    trees = {
        path: tree
        for path in sorted(files)
        if COLOSSALAI_WANT(path)
        and (tree := parse(files, path, unread, _UNPARSEABLE)) is not None
    }
    if "setup.py" not in trees:
        unread.append("setup.py: not in the archive")
    ordered = {p: trees[p] for p in ("setup.py", *_CAI_UTILS) if p in trees}
    ordered.update(trees)
    _cai_nvcc_check(files, ordered, facts)
    _cai_min_torch(files, ordered, facts)
    _cai_archs(files, ordered, cudas, facts)
    _cai_ops(files, trees, facts)
    if facts["nvcc_check"] is None:
        unread.append(f"{', '.join(_CAI_NVCC_CHECKS)}: not found")
    del facts["_evidence"]
    return facts


# ------------------------------------------------------------------------------------------
# Megatron-Core

_MCORE_EXTENSIONS = ("Extension", "Pybind11Extension", "CppExtension", "CUDAExtension")


def MEGATRON_CORE_WANT(name: str) -> bool:
    """Archive members :func:`megatron_core_build_facts` reads: the build scripts (sdist root).
    Megatron-Core builds one C++ pybind11 module (``megatron/core/datasets/helpers.cpp``) and no
    CUDA code; its wheels carry no build script."""
    return name in ("setup.py", "pyproject.toml")


def megatron_core_build_facts(files: dict[str, str], cudas: list[str]) -> dict[str, Any]:
    """Build facts of one Megatron-Core release (members selected by
    :func:`MEGATRON_CORE_WANT`). ``cudas`` is accepted for symmetry; no release compiles CUDA."""
    del cudas
    unread: list[str] = []
    facts = _empty(unread)
    tree = parse(files, "setup.py", unread, _UNPARSEABLE)
    if tree is None:
        if "setup.py" not in files:
            unread.append("setup.py: not in the archive (a wheel-only release has no build script)")
        return facts
    facts["nvcc_check"] = "none"
    for call in calls_to(tree, *_MCORE_EXTENSIONS):  # a plain name: Extension(...), not x.Extension
        if call.func.id in ("CUDAExtension",):  # type: ignore[attr-defined]
            facts["nvcc_check"] = None
            unread.append(f"{_evidence(files, 'setup.py', call)} (a CUDA extension: not modelled)")
        name = call.args[0] if call.args else None
        kwargs = {k.arg: k.value for k in call.keywords}
        optional = kwargs.get("optional")
        evidence = [_evidence(files, "setup.py", call)]
        std = (
            _effective_std(kwargs["extra_compile_args"]) if "extra_compile_args" in kwargs else None
        )
        if std is not None:
            facts["cxx_std"] = [_std_entry(files, "setup.py", std)]
            evidence.append(_evidence(files, "setup.py", std))
        facts["ops"].append(
            {
                "name": name.value if isinstance(name, ast.Constant) else ast.unparse(name or call),
                "builder": call.func.id,  # type: ignore[attr-defined]
                "min_cc": None,
                "max_cc": None,
                "requires_cuda": None,
                "requires_torch": None,
                "needs_gpu": False,
                "gpu_override": None,
                "optional": bool(optional.value) if isinstance(optional, ast.Constant) else False,
                "evidence": evidence,
            }
        )
    text = files["setup.py"]
    if re.search(r"\bnvcc\b|CUDA_HOME|torch\.version\.cuda", text):
        unread.append("setup.py: mentions nvcc/CUDA_HOME/torch.version.cuda; not modelled")
        facts["nvcc_check"] = None
    return facts
