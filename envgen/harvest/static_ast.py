"""Queries over a parsed module that the static readers share (:mod:`envgen.harvest.static_eval`,
:mod:`envgen.harvest.op_builder`, :mod:`envgen.harvest.setup_checks`): parse a file without
executing it, dotted names, the names a block assigns or mutates, a module's constants, its
functions and classes, the calls to a name.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

LIST_UPDATES = {"append", "extend", "remove", "insert"}


def is_list_update(value: ast.expr) -> bool:
    """Whether ``value`` is ``x.append(v)``, ``extend``, ``remove`` or ``insert(i, v)``."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in LIST_UPDATES
        and isinstance(value.func.value, ast.Name)
        and len(value.args) == (2 if value.func.attr == "insert" else 1)
        and not value.keywords
    )


def parse(
    files: Mapping[str, str], path: str, unread: list[str], failure: str = "does not parse"
) -> ast.Module | None:
    """``files[path]`` parsed (never executed); ``None`` when it is missing or, with
    ``"{path}: {failure} (message, line N)"`` added to ``unread``, when it does not parse."""
    text = files.get(path)
    if text is None:
        return None
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as exc:
        unread.append(f"{path}: {failure} ({exc.msg}, line {exc.lineno})")
        return None


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else ``None``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def assigned(nodes: Iterable[ast.AST]) -> set[str]:
    """The names ``nodes`` bind."""
    return {
        n.id
        for top in nodes
        for n in ast.walk(top)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def mutated(nodes: Iterable[ast.AST]) -> set[str]:
    """The names ``nodes`` bind or change in place (``x.append(...)``, ``x[k] = ...``)."""
    found = assigned(nodes)
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, ast.Expr) and is_list_update(n.value):
                found.add(n.value.func.value.id)  # type: ignore[attr-defined]
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) \
                    and isinstance(n.value, ast.Name):
                found.add(n.value.id)
    return found


def constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments."""
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                with contextlib.suppress(ValueError, TypeError, SyntaxError, RecursionError):
                    found[target.id] = ast.literal_eval(node.value)
    return found


def functions(node: ast.AST, *, nested: bool = True) -> dict[str, ast.FunctionDef]:
    """The functions in ``node`` by name: all of them (the last of a name in :func:`ast.walk`
    order wins), or with ``nested=False`` only those of its own body (a module's, a class's)."""
    found = ast.walk(node) if nested else getattr(node, "body", [])
    return {n.name: n for n in found if isinstance(n, ast.FunctionDef)}


def classes(node: ast.AST, *, nested: bool = True) -> dict[str, ast.ClassDef]:
    """The classes in ``node`` by name, as :func:`functions` finds functions."""
    found = ast.walk(node) if nested else getattr(node, "body", [])
    return {n.name: n for n in found if isinstance(n, ast.ClassDef)}


def calls(node: ast.AST, name: str) -> list[ast.Call]:
    """Calls in ``node`` of a function or method called ``name`` (``name()``, ``x.name()``)."""
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        )
    ]


def calls_to(node: ast.AST, *names: str) -> list[ast.Call]:
    """Calls in ``node`` whose callee is exactly one of the dotted ``names`` (``os.getenv``)."""
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and dotted(n.func) in names]
