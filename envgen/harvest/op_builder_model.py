"""The build machine DeepSpeed's op builders are read on, and the reader's view of their
modules (see :mod:`envgen.harvest.op_builder`): Linux with CUDA visible, no ``DS_*``
variables, ``installed_cuda_version()`` and ``TORCH_MAJOR``/``TORCH_MINOR`` set to the grid point
being evaluated; a module's constants, functions and classes, and an op class's methods found
along its bases across modules. Shared by op_builder.py and op_builder_archs.py.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Mapping
from typing import Any

from envgen.harvest.static_ast import (
    classes,
    constants,
    functions,
)
from envgen.harvest.static_eval import (
    Evaluator,
)

# attribute chains whose value is known on the modelled build machine
KNOWN_ATTRS: dict[str, Any] = {
    "sys.platform": "linux",
    "torch.utils.cpp_extension.CUDA_HOME": "/usr/local/cuda",
    "self.build_for_cpu": False,
    "self.jit_mode": False,
}
# calls whose result is known on the modelled build machine
KNOWN_CALLS: dict[str, Any] = {
    "self.is_rocm_pytorch": False,
    "OpBuilder.is_rocm_pytorch": False,
    "self.is_sycl_enabled": False,
    "torch.cuda.is_available": True,
}


def unset_env(key: Any = None, default: Any = None, *_: Any) -> Any:
    """``os.getenv`` / ``os.environ.get`` with no ``DS_*`` variable set: the default."""
    return default


@functools.lru_cache(maxsize=1 << 16)  # asked again of the same nodes at every grid point
def has_std(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("-std=")
        for n in ast.walk(node)
    )


def evaluator(consts: Mapping[str, Any], cuda: tuple[int, int], torch: tuple[int, int],
               names: Mapping[str, Any] | None = None, origin: str | None = None,
               calls: Mapping[str, Callable[..., Any]] | None = None,
               attrs: Mapping[str, Any] | None = None,
               decisive: Callable[[ast.stmt], bool] = has_std) -> Evaluator:
    """A lenient :class:`Evaluator` for one (nvcc CUDA, torch) point; a branch holding a
    ``-std=`` flag is decisive (unless ``decisive`` says otherwise)."""
    stand_ins: dict[str, Callable[..., Any]] = {
        name: (lambda *_, value=value: value) for name, value in KNOWN_CALLS.items()
    }
    stand_ins.update({"installed_cuda_version": lambda *_: cuda,
                      "os.getenv": unset_env, "os.environ.get": unset_env, **(calls or {})})
    env = {"TORCH_MAJOR": torch[0], "TORCH_MINOR": torch[1], **consts, **(names or {})}
    known = {**KNOWN_ATTRS, "torch.__version__": f"{torch[0]}.{torch[1]}.0", **(attrs or {})}
    return Evaluator(env, stand_ins, attrs=known, strict=False, decisive=decisive,
                     origin=origin)


def params(fn: ast.FunctionDef, args: tuple[Any, ...]) -> dict[str, Any]:
    """``fn``'s parameters after ``self`` bound to ``args``, the rest to their literal
    defaults (a default that is not a literal stays unbound: unknown)."""
    names = [a.arg for a in fn.args.args][1:]
    bound = dict(zip(names, args, strict=False))
    defaults = fn.args.defaults
    for name, default in zip(names[len(names) - len(defaults):], defaults, strict=True):
        if name not in bound:
            try:
                bound[name] = ast.literal_eval(default)
            except ValueError:
                continue
    return bound


# -- the module ----------------------------------------------------------------------------------


class Module:
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


class Classes:
    """The classes of ``builder.py`` and of each op module, by name, so an op's methods are
    found along its bases across modules (``GDSBuilder(AsyncIOBuilder)``,
    ``AsyncIOBuilder(TorchCPUOpBuilder)``); an op module's own class wins over builder.py's."""

    def __init__(self, builder: Module, ops: list[Module]) -> None:
        self.builder = builder
        self.table: dict[str, tuple[Module, ast.ClassDef]] = {
            name: (builder, cls) for name, cls in builder.classes.items()}
        for mod in ops:
            self.table.update({name: (mod, cls) for name, cls in mod.classes.items()})
        self.memo: dict[tuple[int, ...], tuple[list, list, list]] = {}  # see _op_std_rows

    def chain(self, name: str) -> list[tuple[Module, ast.ClassDef]]:
        """The class ``name`` and its bases, depth first (single inheritance in practice)."""
        out: list[tuple[Module, ast.ClassDef]] = []
        todo = [name]
        while todo:
            found = self.table.get(todo.pop(0))
            if found is None or any(found[1] is c for _, c in out):
                continue
            out.append(found)
            todo = [b.id for b in found[1].bases if isinstance(b, ast.Name)] + todo
        return out

    def methods(self, name: str, method: str) -> list[tuple[Module, ast.ClassDef,
                                                             ast.FunctionDef]]:
        """Every definition of ``method`` along ``name``'s chain, the one Python calls first."""
        return [(mod, cls, fn) for mod, cls in self.chain(name)
                if (fn := functions(cls, nested=False).get(method)) is not None]


def key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def label(point: tuple[int, int]) -> str:
    return str(point[0]) if point[1] == 0 else f"{point[0]}.{point[1]}"
