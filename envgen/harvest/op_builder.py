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

Per op (each class with a ``NAME`` in a top-level ``op_builder/*.py``), its methods are followed
along its bases across modules (``GDSBuilder(AsyncIOBuilder)``, ``AsyncIOBuilder(OpBuilder)`` of
builder.py), ``super().m()`` evaluated as the next definition of ``m``: its own ``-std=`` rules
where its module overrides ``cxx_args``/``nvcc_args`` with a flag of its own (async_io's
``-std=c++14``), the libraries of the ``has_function()`` link probes and the ``sys.platform``
values its ``is_compatible()`` refuses, and its ``BUILD_VAR``. ``arch_entries``:
``CUDAOpBuilder.compute_capability_args()`` run on each of
:data:`~envgen.harvest.op_builder_archs.ARCH_ENTRIES` as
``TORCH_CUDA_ARCH_LIST``, ahead of time (setup.py) and as a JIT load on a machine with one
GPU: whether it compiles for that arch, drops its ``a``/``f`` suffix, misreads it
(``cc[0] + cc[2]`` of ``10.0`` is ``1.``) or raises (``int('0a')``), with the line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from typing import Any

from envgen.harvest import op_builder_archs as archs
from envgen.harvest import op_builder_model as model
from envgen.harvest.static_ast import (
    calls_to,
    dotted,
    functions,
    parse,
)
from envgen.harvest.static_eval import (
    Failed,
    Opaque,
    Unread,
)

BUILDER = "op_builder/builder.py"
_STD = re.compile(r"^-std=(?:c|gnu)\+\+(\d+)$")
_NOT_OPS = {"builder.py", "__init__.py", "all_ops.py", "builder_names.py"}


def deepspeed_want(path: str) -> bool:
    """The archive members the DeepSpeed reader needs: ``op_builder/**/*.py`` of an sdist (or
    ``deepspeed/ops/op_builder/**/*.py`` of a wheel)."""
    return path.endswith(".py") and path.startswith(("op_builder/", "deepspeed/ops/op_builder/"))


deepspeed_want.tag = "deepspeed-op_builder.v1"  # type: ignore[attr-defined]


def _runs(grid: list[tuple[int, int]], values: list[Any]) -> list[tuple[str, Any]]:
    """``(specifier, value)`` for each run of equal values along ``grid`` (ascending)."""
    out: list[tuple[str, Any]] = []
    start = 0
    for i in range(1, len(grid) + 1):
        if i == len(grid) or values[i] != values[start]:
            parts = []
            if start > 0:
                parts.append(f">={model.label(grid[start])}")
            if i < len(grid):
                parts.append(f"<{model.label(grid[i])}")
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


def _std_of(path: str, value: Any) -> tuple[str, str] | None:
    """The last ``-std=c++NN`` flag in a returned argument list (the one the compiler obeys)
    and where it is written (``path`` unless the flag came from another file)."""
    if isinstance(value, Opaque):
        raise Unread(value.node, value.reason)
    found = None
    for item in value if isinstance(value, list) else []:
        if isinstance(item, Opaque):
            if model.has_std(item.node):
                raise Unread(item.node, f"a -std= flag depends on something unknown: "
                                         f"{item.reason}")
            continue
        match = _STD.match(str(item))
        if match:
            found = (match[1], f"{getattr(item, 'origin', None) or path}:"
                               f"{getattr(item, 'line', 0)}")
    return found


def _grid_rows(evaluate: Callable[[tuple[int, int], tuple[int, int]], Any],
               torches: list[tuple[int, int]], cudas: list[tuple[int, int]],
               failed: list[tuple[str, str]]) -> list[dict[str, str]]:
    """``evaluate(cuda, torch)`` (a ``(std, where)`` or None) over the grid as specifier rows,
    newest first; a point where the evaluated code itself raises (:class:`Failed`) gives no
    row but ``(where, "raises … with torch…")`` in ``failed``. :class:`Unread` propagates."""
    table: list[tuple[Any, ...]] = []
    for torch in torches:
        row = []
        for cuda in cudas:
            try:
                row.append(evaluate(cuda, torch))
            except Failed as exc:
                where = f"{getattr(exc, 'origin', None) or '?'}:{getattr(exc.node, 'lineno', 0)}"
                row.append(("!", exc.error, where))
        table.append(tuple(row))
    rows = []
    for torch_spec, per_cuda in reversed(_runs(torches, table) if len(torches) > 1
                                         else [("", table[0])]):
        runs = _runs(cudas, list(per_cuda)) if len(cudas) > 1 else [("", per_cuda[0])]
        for cuda_spec, found in reversed(runs):
            if found is not None and found[0] == "!":
                where = " and ".join(f"{k}{v}" for k, v in (("torch", torch_spec),
                                                            ("CUDA", cuda_spec)) if v)
                failed.append((found[2], f"raises {found[1]}"
                               + (f" with {where}" if where else "")))
            elif found is not None:
                rows.append({"std": found[0], "torch": torch_spec, "cuda": cuda_spec,
                             "where": found[1]})
    return rows


def _std_rows(
    mod: model.Module, cls: str, method: str, cuda_grid: list[tuple[int, int]], unread: list[str]
) -> list[dict[str, str]]:
    fn = mod.method(cls, method)
    if fn is None:
        unread.append(f"{mod.path}: no {cls}.{method}()")
        return []
    cudas = cuda_grid if _mentions(fn, {"installed_cuda_version"}) else [cuda_grid[-1]]
    failed: list[tuple[str, str]] = []
    try:
        rows = _grid_rows(lambda c, t: _std_of(mod.path, _call_along(
            [(mod, mod.classes[cls], fn)], 0, method, c, t)), _torch_grid(fn), cudas, failed)
    except Unread as exc:
        unread.append(f"{mod.where(exc.node)}: {cls}.{method}(): {exc.reason}")
        return []
    unread += [f"{where}: {cls}.{method}() {what}" for where, what in failed]
    return rows


def _call_along(defs: list[tuple[model.Module, ast.ClassDef, ast.FunctionDef]], i: int,
                method: str, cuda: tuple[int, int], torch: tuple[int, int],
                args: tuple[Any, ...] = ()) -> Any:
    """The value of ``defs[i]`` (one definition of ``method`` along a class chain) at one
    (CUDA, torch) point; its ``super().method(...)`` is the next definition's value."""
    mod, _cls, fn = defs[i]

    def up(*a: Any) -> Any:
        if i + 1 == len(defs):
            return Opaque(fn, f"no base class defines {method}()")
        return _call_along(defs, i + 1, method, cuda, torch, a)

    evaluator = model.evaluator(mod.consts, cuda, torch, model.params(fn, args), origin=mod.path,
                           calls={f"super().{method}": up})
    try:
        return evaluator.function(fn)
    except Failed as exc:
        if getattr(exc, "origin", None) is None:
            exc.origin = mod.path  # type: ignore[attr-defined]
        raise


def _sparse_torch_grid(fns: list[ast.FunctionDef]) -> list[tuple[int, int]]:
    """The points of :func:`_torch_grid` where a comparison of the functions' torch version
    with their integer constants can change (each constant, its neighbours, 0 and the top):
    the same rows at a fraction of the evaluations."""
    full = max((_torch_grid(fn) for fn in fns), key=len)
    if len(full) == 1:
        return full
    ints = {n.value for fn in fns for n in ast.walk(fn)
            if isinstance(n, ast.Constant) and type(n.value) is int and 0 <= n.value < 1000}
    minors = {0, max(m for _, m in full)} | {c + d for c in ints for d in (-1, 0, 1)}
    return [p for p in full if p[1] in minors]


def _op_std_rows(classes: model.Classes, cls: str, method: str, cuda_grid: list[tuple[int, int]],
                 unread: list[str], evidence: list[str],
                 memo: dict[tuple[int, ...], tuple[list, list, list]]) -> list[dict[str, str]]:
    """The ``-std=`` rules of an op whose own module overrides ``method`` with a ``-std=``
    flag of its own (DeepSpeed's async_io: ``-std=c++14``); ``[]`` when it keeps
    builder.py's. Its own rules cover what the override inherits through ``super()``.
    ``memo``: rules already read for the same chain of definitions (gds inherits async_io's)."""
    defs = classes.methods(cls, method)
    own = [d for d in defs if d[0] is not classes.builder]
    if not defs or defs[0][0] is classes.builder or not any(model.has_std(fn) for *_, fn in own):
        return []
    key = tuple(id(fn) for *_, fn in defs)
    if key not in memo:
        memo[key] = _read_op_std(defs, method, cuda_grid)
    rows, failed, unreadable = memo[key]
    unread += [f"{where}: {cls}.{method}(): {why}" for where, why in unreadable]
    evidence += [f"{where}: {cls}.{method}() {what}" for where, what in failed]
    return [dict(r) for r in rows]


def _read_op_std(defs: list[tuple[model.Module, ast.ClassDef, ast.FunctionDef]], method: str,
                 cuda_grid: list[tuple[int, int]]) -> tuple[list, list, list]:
    """(rows, failures, unread) of one chain of ``method`` definitions."""
    fns = [fn for *_, fn in defs]
    cudas = cuda_grid if any(_mentions(fn, {"installed_cuda_version"}) for fn in fns) \
        else [cuda_grid[-1]]
    failed: list[tuple[str, str]] = []
    path = defs[0][0].path
    try:
        rows = _grid_rows(lambda c, t: _std_of(path, _call_along(defs, 0, method, c, t)),
                          _sparse_torch_grid(fns), cudas, failed)
    except Unread as exc:
        where = next((m.where(exc.node) for m, _, fn in defs
                      if any(n is exc.node for n in ast.walk(fn))), path)
        return [], [], [(where, exc.reason)]
    return rows, failed, []


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


def _nvcc_check(mod: model.Module, unread: list[str]) -> tuple[str | None, str | None, bool]:
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
    mod: model.Module, expr: ast.expr, grid: list[tuple[int, int]],
    names: Callable[[tuple[int, int]], dict[str, Any]],
) -> str | None:
    """The specifier of the grid points where ``expr`` is true; None if not one interval."""
    truth = [bool(model.evaluator(mod.consts, p, p, names(p)).expr(expr)) for p in grid]
    runs = _runs(grid, truth)
    true = [spec for spec, value in runs if value]
    if len(true) != 1:
        return None
    return true[0]


def _class_constant(classes: model.Classes, cls: str, name: str) -> str | None:
    """A string class attribute (``NAME``, ``BUILD_VAR``) along ``cls``'s chain."""
    for _mod, current in classes.chain(cls):
        for n in current.body:
            if (isinstance(n, ast.Assign) and any(getattr(t, "id", "") == name
                                                  for t in n.targets)
                    and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)):
                return n.value.value
    return None


def _compatibility(classes: model.Classes, cls: str, unread: list[str]
                   ) -> tuple[list[str], list[str], list[str]]:
    """``(libraries, refused platforms, evidence)`` from the op's ``is_compatible()`` along its
    chain (outside builder.py; a definition's ``super().is_compatible(...)`` leads on): the
    libraries of its ``has_function(func, (libs,))`` link probes and the ``sys.platform`` values
    for which it returns False."""
    libraries: list[str] = []
    platforms: list[str] = []
    evidence: list[str] = []
    for mod, _c, fn in classes.methods(cls, "is_compatible"):
        if mod is classes.builder:
            break
        probes, tests, follows = [], [], False
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "has_function":
                    probes.append(node)
                elif node.func.attr == "is_compatible" and isinstance(
                        node.func.value, ast.Call) and dotted(node.func.value.func) == "super":
                    follows = True
            elif isinstance(node, ast.If) and any(
                    isinstance(n, ast.Attribute) and dotted(n) == "sys.platform"
                    for n in ast.walk(node.test)):
                tests.append(node)
        for call in probes:
            kw = {k.arg: k.value for k in call.keywords}
            func = call.args[0] if call.args else kw.get("funcname")
            libs = call.args[1] if len(call.args) > 1 else kw.get("libraries")
            try:
                names = ast.literal_eval(libs) if libs is not None else None
                probe = ast.literal_eval(func) if func is not None else None
            except ValueError:
                names = None
            if not (isinstance(names, tuple) and all(isinstance(x, str) for x in names)):
                unread.append(f"{mod.where(call)}: {cls}: has_function() with libraries that "
                              "are not a literal tuple")
                continue
            libraries += names
            evidence.append(f"{mod.where(call)}: has_function({probe!r}, {names!r})")
        for node in tests:
            test = node.test
            refuses = any(isinstance(n, ast.Return) and isinstance(n.value, ast.Constant)
                          and n.value.value is False for n in node.body)
            if (isinstance(test, ast.Compare) and len(test.ops) == 1
                    and isinstance(test.ops[0], ast.Eq) and dotted(test.left) == "sys.platform"
                    and isinstance(test.comparators[0], ast.Constant) and refuses):
                platforms.append(test.comparators[0].value)
                evidence.append(f"{mod.where(node)}: {ast.unparse(test)}: return False")
            else:
                unread.append(f"{mod.where(node)}: {cls}.is_compatible: "
                              f"{ast.unparse(test)}")
        if not follows:
            break
    return list(dict.fromkeys(libraries)), list(dict.fromkeys(platforms)), evidence


def _op_facts(mod: model.Module, cls: ast.ClassDef, cuda_grid: list[tuple[int, int]],
              unread: list[str], classes: model.Classes) -> dict[str, Any]:
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
    cxx_std = _op_std_rows(classes, cls.name, "cxx_args", cuda_grid, unread, evidence,
                           classes.memo)
    nvcc_std = _op_std_rows(classes, cls.name, "nvcc_args", cuda_grid, unread, evidence,
                            classes.memo)
    libraries, platforms, found = _compatibility(classes, cls.name, unread)
    return {
        "name": name,
        "builder": cls.name,
        "build_var": _class_constant(classes, cls.name, "BUILD_VAR"),
        "min_cc": f"{max(floors)}.0" if floors else None,
        "max_cc": None,
        "requires_cuda": ",".join(dict.fromkeys(requires_cuda)) or None,
        "requires_torch": ",".join(dict.fromkeys(requires_torch)) or None,
        "cxx_std": cxx_std,
        "nvcc_std": nvcc_std,
        "libraries": libraries,
        "refuses_platforms": platforms,
        "evidence": evidence + found,
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
         unread: list[str], builder: model.Module) -> list[dict[str, Any]]:
    modules = []
    for path in sorted(files):
        parts = path.split("/")
        if len(parts) != 2 or parts[1] in _NOT_OPS or not parts[1].endswith(".py"):
            continue  # subfolders are other accelerators' builders (cpu/, npu/, hpu/, ...)
        tree = parse(files, path, unread)
        if tree is not None:
            modules.append(model.Module(path, tree))
    classes = model.Classes(builder, modules)
    ops = []
    for mod in modules:
        for cls in mod.classes.values():
            if any(
                isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "NAME" for t in n.targets)
                and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                for n in cls.body
            ):
                ops.append(_op_facts(mod, cls, cuda_grid, unread, classes))
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
    cudas = sorted(dict.fromkeys(cudas), key=model.key)
    unread: list[str] = []
    facts: dict[str, Any] = {
        "nvcc_check": None, "cuda_minor_mismatch_ok": None, "skip_cuda_check": None,
        "nvcc_check_skipped_without_gpu": False,
        "cxx_std": [], "nvcc_std": [], "default_archs": None, "default_archs_where": None,
        "arch_entries": None, "ops": [], "unread": unread,
    }
    if BUILDER not in files:
        unread.append(f"{BUILDER}: not in the release")
        return facts
    tree = parse(files, BUILDER, unread)
    if tree is None:
        return facts
    mod = model.Module(BUILDER, tree)
    allow = _validate_allow_list(mod.consts.get("cuda_minor_mismatch_ok"), BUILDER, unread)
    check, skip, no_gpu = _nvcc_check(mod, unread)
    if check == "allow-list" and allow is None:
        unread.append(f"{BUILDER}: assert_no_cuda_mismatch() uses cuda_minor_mismatch_ok, "
                      "which is not a literal")
        check = None
    grid_versions = set(cudas) | {v for values in (allow or {}).values() for v in values}
    cuda_grid = sorted({model.key(v) for v in grid_versions})
    facts.update(
        nvcc_check=check,
        cuda_minor_mismatch_ok=allow if check == "allow-list" else None,
        skip_cuda_check=skip,
        nvcc_check_skipped_without_gpu=no_gpu,
        cxx_std=_std_rows(mod, "CUDAOpBuilder", "cxx_args", cuda_grid, unread),
        nvcc_std=_std_rows(mod, "CUDAOpBuilder", "nvcc_args", cuda_grid, unread),
        default_archs=archs.default_archs(mod, cudas, unread),
        default_archs_where=(mod.where(mod.funcs["get_default_compute_capabilities"])
                             if "get_default_compute_capabilities" in mod.funcs else None),
        arch_entries=archs.arch_entries(mod, unread),
        ops=_ops(files, cuda_grid, unread, mod),
    )
    return facts
