"""DeepSpeed's op-builder facts, read statically from a release's own ``op_builder/*.py``.

The release's code is untrusted (it comes from PyPI): it is parsed with :mod:`ast` and never
imported or executed. What DeepSpeed computes at build time (the default arch list, the
``-std=c++NN`` flags) is found by running the few functions involved through the lenient
:class:`~envgen.harvest.static_eval.Evaluator` (a whitelisted subset of Python: constants, names
bound to module constants, comparisons, boolean operators, ``if``/``else``, ``+=``, subscripts,
string ``split``/``join``/``replace``, f-strings). The build machine is modelled as Linux with
CUDA visible, no ``DS_*`` environment variables set, ``installed_cuda_version()`` substituted by
the nvcc CUDA being evaluated and ``TORCH_MAJOR``/``TORCH_MINOR`` by the torch version being
evaluated. A value the evaluator
cannot compute becomes *opaque*; an opaque value that decides a branch holding a result, or that
is itself a ``-std=`` flag, makes that fact ``unread`` (with the file, line and reason) instead
of guessed.

Conditions are stated as PEP 440 specifiers over torch and CUDA ``major.minor``; they come from
evaluating each function on a grid (every CUDA envgen knows plus every CUDA the release's own
allow-list names; torch 1.0 … 3.N), so a bound is the lowest grid value on its side.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from typing import Any

from envgen.harvest.static_eval import (
    Evaluator,
    Opaque,
    Unread,
    calls_to,
    classes,
    constants,
    dotted,
    functions,
    parse,
)

BUILDER = "op_builder/builder.py"
_STD = re.compile(r"^-std=(?:c|gnu)\+\+(\d+)$")
_NOT_OPS = {"builder.py", "__init__.py", "all_ops.py", "builder_names.py"}


def deepspeed_want(path: str) -> bool:
    """The archive members the DeepSpeed reader needs: ``op_builder/**/*.py`` of an sdist (or
    ``deepspeed/ops/op_builder/**/*.py`` of a wheel)."""
    return path.endswith(".py") and path.startswith(("op_builder/", "deepspeed/ops/op_builder/"))


deepspeed_want.tag = "deepspeed-op_builder.v1"  # type: ignore[attr-defined]


# -- the modelled build machine ----------------------------------------------------------------

# attribute chains whose value is known on the modelled build machine
_KNOWN_ATTRS: dict[str, Any] = {
    "sys.platform": "linux",
    "torch.utils.cpp_extension.CUDA_HOME": "/usr/local/cuda",
    "self.build_for_cpu": False,
    "self.jit_mode": False,
}
# calls whose result is known on the modelled build machine
_KNOWN_CALLS: dict[str, Any] = {
    "self.is_rocm_pytorch": False,
    "OpBuilder.is_rocm_pytorch": False,
    "self.is_sycl_enabled": False,
    "torch.cuda.is_available": True,
}


def _unset_env(_key: Any = None, default: Any = None, *_: Any) -> Any:
    """``os.getenv`` / ``os.environ.get`` with no ``DS_*`` variable set: the default."""
    return default


def _has_std(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("-std=")
        for n in ast.walk(node)
    )


def _evaluator(consts: Mapping[str, Any], cuda: tuple[int, int], torch: tuple[int, int],
               names: Mapping[str, Any] | None = None) -> Evaluator:
    """A lenient :class:`Evaluator` for one (nvcc CUDA, torch) point; a branch holding a
    ``-std=`` flag is decisive."""
    stand_ins: dict[str, Callable[..., Any]] = {
        name: (lambda *_, value=value: value) for name, value in _KNOWN_CALLS.items()
    }
    stand_ins.update({"installed_cuda_version": lambda *_: cuda,
                      "os.getenv": _unset_env, "os.environ.get": _unset_env})
    env = {"TORCH_MAJOR": torch[0], "TORCH_MINOR": torch[1], **consts, **(names or {})}
    return Evaluator(env, stand_ins, attrs=_KNOWN_ATTRS, strict=False, decisive=_has_std)


# -- the module ----------------------------------------------------------------------------------


class _Module:
    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path, self.tree = path, tree
        self.consts = constants(tree)
        self.funcs = functions(tree, nested=False)
        self.classes = classes(tree, nested=False)

    def method(self, cls: str, name: str) -> ast.FunctionDef | None:
        """``cls.name`` or, where the class does not define it, its bases' in this module."""
        seen: set[str] = set()
        todo = [cls]
        while todo:
            current = self.classes.get(todo.pop(0))
            if current is None or current.name in seen:
                continue
            seen.add(current.name)
            for node in current.body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return node
            todo += [b.id for b in current.bases if isinstance(b, ast.Name)]
        return None

    def where(self, node: ast.AST) -> str:
        return f"{self.path}:{getattr(node, 'lineno', 0)}"


def _key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _label(point: tuple[int, int]) -> str:
    return str(point[0]) if point[1] == 0 else f"{point[0]}.{point[1]}"


def _runs(grid: list[tuple[int, int]], values: list[Any]) -> list[tuple[str, Any]]:
    """``(specifier, value)`` for each run of equal values along ``grid`` (ascending)."""
    out: list[tuple[str, Any]] = []
    start = 0
    for i in range(1, len(grid) + 1):
        if i == len(grid) or values[i] != values[start]:
            parts = []
            if start > 0:
                parts.append(f">={_label(grid[start])}")
            if i < len(grid):
                parts.append(f"<{_label(grid[i])}")
            out.append((",".join(parts), values[start]))
            start = i
    return out


def _mentions(fn: ast.AST, names: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in names)
        or (isinstance(n, ast.Attribute) and n.attr in names)
        for n in ast.walk(fn)
    )


def _torch_grid(fn: ast.AST) -> list[tuple[int, int]]:
    if not _mentions(fn, {"TORCH_MAJOR", "TORCH_MINOR", "__version__"}):
        return [(2, 0)]
    ints = [n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and type(n.value) is int]
    top = max([20, *[i + 1 for i in ints if i < 1000]])
    return [(major, minor) for major in (1, 2, 3) for minor in range(top + 1)]


def _std_of(mod: _Module, value: Any) -> tuple[str, int] | None:
    """The last ``-std=c++NN`` flag in a returned argument list (the one the compiler obeys)."""
    if isinstance(value, Opaque):
        raise Unread(value.node, value.reason)
    found = None
    for item in value if isinstance(value, list) else []:
        if isinstance(item, Opaque):
            if _has_std(item.node):
                raise Unread(item.node, f"a -std= flag depends on something unknown: "
                                         f"{item.reason}")
            continue
        match = _STD.match(str(item))
        if match:
            found = (match[1], getattr(item, "line", 0))
    return found


def _std_rows(
    mod: _Module, cls: str, method: str, cuda_grid: list[tuple[int, int]], unread: list[str]
) -> list[dict[str, str]]:
    fn = mod.method(cls, method)
    if fn is None:
        unread.append(f"{mod.path}: no {cls}.{method}()")
        return []
    cudas = cuda_grid if _mentions(fn, {"installed_cuda_version"}) else [cuda_grid[-1]]
    torches = _torch_grid(fn)
    table: list[tuple[Any, ...]] = []
    try:
        for torch in torches:
            row = tuple(_std_of(mod, _evaluator(mod.consts, c, torch).function(fn)) for c in cudas)
            table.append(row)
    except Unread as exc:
        unread.append(f"{mod.where(exc.node)}: {cls}.{method}(): {exc.reason}")
        return []
    rows = []
    for torch_spec, per_cuda in reversed(_runs(torches, table) if len(torches) > 1
                                         else [("", table[0])]):
        runs = _runs(cudas, list(per_cuda)) if len(cudas) > 1 else [("", per_cuda[0])]
        for cuda_spec, found in reversed(runs):
            if found is not None:
                rows.append({"std": found[0], "torch": torch_spec, "cuda": cuda_spec,
                             "where": f"{mod.path}:{found[1]}"})
    return rows


def _default_archs(
    mod: _Module, cudas: list[str], unread: list[str]
) -> dict[str, list[str]] | None:
    fn = mod.funcs.get("get_default_compute_capabilities")
    if fn is None:
        unread.append(f"{mod.path}: no get_default_compute_capabilities()")
        return None
    out = {}
    try:
        for cuda in cudas:
            value = _evaluator(mod.consts, _key(cuda), (2, 0)).function(fn)
            if not isinstance(value, str):
                raise Unread(fn, "did not evaluate to a string")
            out[cuda] = [cc for cc in value.split(";") if cc]
    except Unread as exc:
        unread.append(f"{mod.where(exc.node)}: get_default_compute_capabilities(): {exc.reason}")
        return None
    return out


# -- assert_no_cuda_mismatch --------------------------------------------------------------------


def _allow_list_test(test: ast.expr) -> bool:
    """``MAJ in ok and SYS in ok[MAJ] and TORCH in ok[MAJ]``, the shape every release uses."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)
            and len(test.values) == 3):
        return False
    first, *members = test.values
    if not (isinstance(first, ast.Compare) and isinstance(first.ops[0], ast.In)
            and isinstance(first.left, ast.Name)
            and ast.unparse(first.comparators[0]) == "cuda_minor_mismatch_ok"):
        return False
    major = first.left.id
    keyed = f"cuda_minor_mismatch_ok[{major}]"
    lefts = set()
    for member in members:
        if not (isinstance(member, ast.Compare) and isinstance(member.ops[0], ast.In)
                and ast.unparse(member.comparators[0]) == keyed):
            return False
        lefts.add(ast.unparse(member.left))
    return lefts == {"sys_cuda_version", "torch_cuda_version"}


def _nvcc_check(mod: _Module, unread: list[str]) -> tuple[str | None, str | None, bool]:
    """``(nvcc_check, skip variable, check skipped without a GPU)``."""
    fn = mod.funcs.get("assert_no_cuda_mismatch")
    if fn is None:
        unread.append(f"{mod.path}: no assert_no_cuda_mismatch()")
        return None, None, False
    mismatch = [
        n for n in ast.walk(fn)
        if isinstance(n, ast.If) and ast.unparse(n.test) == "sys_cuda_version != torch_cuda_version"
    ]
    if len(mismatch) != 1:
        unread.append(f"{mod.where(fn)}: assert_no_cuda_mismatch(): no single "
                      "`sys_cuda_version != torch_cuda_version` test")
        return None, None, False
    check, skip = "exact", None
    for node in ast.walk(mismatch[0]):
        if isinstance(node, ast.If) and node is not mismatch[0]:
            if "cuda_minor_mismatch_ok" in ast.unparse(node.test):
                if not _allow_list_test(node.test):
                    unread.append(f"{mod.where(node)}: allow-list test of an unknown shape: "
                                  f"{ast.unparse(node.test)}")
                    return None, None, False
                check = "allow-list"
            env = [c for c in calls_to(node.test, "os.getenv", "os.environ.get") if c.args
                   and isinstance(c.args[0], ast.Constant)]
            if env and not any(isinstance(s, ast.Raise) for s in node.body):
                skip = env[0].args[0].value  # type: ignore[attr-defined]
    probe = mod.funcs.get("installed_cuda_version")
    no_gpu = probe is not None and any(
        isinstance(n, ast.If) and "is_available" in ast.unparse(n.test)
        for n in ast.walk(probe)
    )
    return check, skip, no_gpu


def _validate_allow_list(raw: Any, where: str, unread: list[str]) -> dict[str, list[str]] | None:
    if raw is None:
        return None
    if not (isinstance(raw, dict)
            and all(isinstance(k, int) and isinstance(v, list) for k, v in raw.items())
            and all(isinstance(x, str) for v in raw.values() for x in v)):
        unread.append(f"{where}: cuda_minor_mismatch_ok is not a dict of int -> [str]")
        return None
    return {str(k): list(v) for k, v in sorted(raw.items())}


# -- ops -----------------------------------------------------------------------------------------


def _int_cc0(node: ast.expr) -> bool:
    """``int(cc[0])``."""
    return (isinstance(node, ast.Call) and dotted(node.func) == "int" and len(node.args) == 1
            and isinstance(node.args[0], ast.Subscript)
            and ast.unparse(node.args[0].slice) == "0")


def _truth_spec(
    mod: _Module, expr: ast.expr, grid: list[tuple[int, int]], names: Callable[[tuple[int, int]],
                                                                                 dict[str, Any]],
) -> str | None:
    """The specifier of the grid points where ``expr`` is true; None if not one interval."""
    truth = [bool(_evaluator(mod.consts, p, p, names(p)).expr(expr)) for p in grid]
    runs = _runs(grid, truth)
    true = [spec for spec, value in runs if value]
    if len(true) != 1:
        return None
    return true[0]


def _op_facts(mod: _Module, cls: ast.ClassDef, cuda_grid: list[tuple[int, int]],
              unread: list[str]) -> dict[str, Any]:
    name = next(
        n.value.value for n in cls.body  # type: ignore[attr-defined]
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "NAME" for t in n.targets)
    )
    floors: list[int] = []
    requires_cuda: list[str] = []
    requires_torch: list[str] = []
    evidence: list[str] = []
    methods = functions(cls, nested=False)
    fn = methods.get("filter_ccs")
    if fn is not None:
        for node in ast.walk(fn):
            if not isinstance(node, ast.Compare) or not any(
                isinstance(n, ast.Name) and n.id == "cc" for n in ast.walk(node)
            ):
                continue
            right = node.comparators[0]
            if (_int_cc0(node.left) and isinstance(node.ops[0], (ast.GtE, ast.Gt))
                    and isinstance(right, ast.Constant) and type(right.value) is int):
                floors.append(right.value + (1 if isinstance(node.ops[0], ast.Gt) else 0))
                evidence.append(f"{mod.where(node)}: {ast.unparse(node)}")
            else:
                unread.append(f"{mod.where(node)}: {cls.name}.filter_ccs: {ast.unparse(node)}")
    fn = methods.get("is_compatible")
    torch_versions = [(major, minor) for major in (1, 2, 3) for minor in range(31)]
    if fn is not None:
        cuda_split = any(
            isinstance(n, ast.Assign) and "torch.version.cuda.split" in ast.unparse(n.value)
            and isinstance(n.targets[0], ast.Tuple) for n in ast.walk(fn)
        )
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name):
                right = node.comparators[0]
                if not (isinstance(right, ast.Constant) and type(right.value) is int):
                    continue
                if node.left.id == "cuda_capability" and isinstance(node.ops[0], ast.Lt):
                    floors.append(right.value)
                    evidence.append(f"{mod.where(node)}: {ast.unparse(node)}")
                elif node.left.id in ("torch_cuda_major", "sys_cuda_major") and isinstance(
                    node.ops[0], ast.Lt
                ):
                    requires_cuda.append(f">={right.value}")
                    guard = _guard(fn, node)
                    evidence.append(f"{mod.where(node)}: {ast.unparse(node)}"
                                    + (f" (when {guard})" if guard else ""))
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Name)
                  and node.targets[0].id in ("cuda_compatible", "torch_compatible")
                  and not isinstance(node.value, ast.Constant)):
                target = node.targets[0].id
                try:
                    if target == "torch_compatible":
                        spec = _truth_spec(mod, node.value, torch_versions, lambda p: {})
                    elif cuda_split:
                        spec = _truth_spec(mod, node.value, cuda_grid,
                                           lambda p: {"major": str(p[0]), "minor": str(p[1])})
                    else:
                        spec = None
                except Unread as exc:
                    spec = None
                    unread.append(f"{mod.where(exc.node)}: {cls.name}.is_compatible: {exc.reason}")
                if spec is None:
                    unread.append(f"{mod.where(node)}: {cls.name}.is_compatible: "
                                  f"{ast.unparse(node)}")
                    continue
                (requires_torch if target == "torch_compatible" else requires_cuda).append(spec)
                evidence.append(f"{mod.where(node)}: {ast.unparse(node)}")
    return {
        "name": name,
        "builder": cls.name,
        "min_cc": f"{max(floors)}.0" if floors else None,
        "max_cc": None,
        "requires_cuda": ",".join(dict.fromkeys(requires_cuda)) or None,
        "requires_torch": ",".join(dict.fromkeys(requires_torch)) or None,
        "evidence": evidence,
    }


def _guard(fn: ast.FunctionDef, target: ast.AST) -> str | None:
    """The test of the innermost ``if`` enclosing the ``if`` that holds ``target``."""
    chain: list[ast.If] = []

    def visit(node: ast.AST, stack: list[ast.If]) -> bool:
        if node is target:
            chain.extend(stack)
            return True
        nested = [*stack, node] if isinstance(node, ast.If) else stack
        return any(visit(child, nested) for child in ast.iter_child_nodes(node))

    visit(fn, [])
    outer = [c for c in chain[:-1] if "capability" in ast.unparse(c.test)]
    return ast.unparse(outer[-1].test) if outer else None


def _ops(files: Mapping[str, str], cuda_grid: list[tuple[int, int]],
         unread: list[str]) -> list[dict[str, Any]]:
    ops = []
    for path in sorted(files):
        parts = path.split("/")
        if len(parts) != 2 or parts[1] in _NOT_OPS or not parts[1].endswith(".py"):
            continue  # subfolders are other accelerators' builders (cpu/, npu/, hpu/, ...)
        tree = parse(files, path, unread)
        if tree is None:
            continue
        mod = _Module(path, tree)
        for cls in mod.classes.values():
            if any(
                isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "NAME" for t in n.targets)
                and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                for n in cls.body
            ):
                ops.append(_op_facts(mod, cls, cuda_grid, unread))
    return sorted(ops, key=lambda o: (o["name"], o["builder"]))


# -- the facts -----------------------------------------------------------------------------------


def normalize_paths(files: Mapping[str, str]) -> dict[str, str]:
    """``op_builder/…`` keys: an sdist's own, or a wheel's ``deepspeed/ops/op_builder/…``."""
    own = {p: t for p, t in files.items() if p.startswith("op_builder/")}
    if own:
        return own
    prefix = "deepspeed/ops/"
    return {p[len(prefix):]: t for p, t in files.items() if p.startswith(prefix + "op_builder/")}


def deepspeed_build_facts(files: dict[str, str], cudas: list[str]) -> dict[str, Any]:
    """The op-builder facts of one DeepSpeed release (see the module docstring), from the texts
    of its ``op_builder/**/*.py`` (keys relative to the sdist root) and the CUDA ``major.minor``
    values envgen knows (the keys of ``default_archs``)."""
    files = normalize_paths(files)
    cudas = sorted(dict.fromkeys(cudas), key=_key)
    unread: list[str] = []
    facts: dict[str, Any] = {
        "nvcc_check": None, "cuda_minor_mismatch_ok": None, "skip_cuda_check": None,
        "nvcc_check_skipped_without_gpu": False,
        "cxx_std": [], "nvcc_std": [], "default_archs": None, "ops": [], "unread": unread,
    }
    if BUILDER not in files:
        unread.append(f"{BUILDER}: not in the release")
        return facts
    tree = parse(files, BUILDER, unread)
    if tree is None:
        return facts
    mod = _Module(BUILDER, tree)
    allow = _validate_allow_list(mod.consts.get("cuda_minor_mismatch_ok"), BUILDER, unread)
    check, skip, no_gpu = _nvcc_check(mod, unread)
    if check == "allow-list" and allow is None:
        unread.append(f"{BUILDER}: assert_no_cuda_mismatch() uses cuda_minor_mismatch_ok, "
                      "which is not a literal")
        check = None
    grid_versions = set(cudas) | {v for values in (allow or {}).values() for v in values}
    cuda_grid = sorted({_key(v) for v in grid_versions})
    facts.update(
        nvcc_check=check,
        cuda_minor_mismatch_ok=allow if check == "allow-list" else None,
        skip_cuda_check=skip,
        nvcc_check_skipped_without_gpu=no_gpu,
        cxx_std=_std_rows(mod, "CUDAOpBuilder", "cxx_args", cuda_grid, unread),
        nvcc_std=_std_rows(mod, "CUDAOpBuilder", "nvcc_args", cuda_grid, unread),
        default_archs=_default_archs(mod, cudas, unread),
        ops=_ops(files, cuda_grid, unread),
    )
    return facts
