"""Reading a release's build code statically: one restricted evaluator plus the AST helpers
the harvesters share (:mod:`envgen.harvest.op_builder`, :mod:`envgen.harvest.setup_checks`).

Hand-written: no library evaluates untrusted Python both safely and statically (unexecuted).

The code comes from PyPI and is untrusted: it is parsed with :mod:`ast` and never imported or
executed. :class:`Evaluator` interprets a whitelisted subset of Python over an environment of
plain values, with the build machine modelled by the caller (stand-ins for calls, known
attribute values). What lies outside the whitelist is reported, never guessed: in *strict* mode
it raises :class:`Unread`; in *lenient* mode it becomes an :class:`Opaque` value that flows on,
and only raises :class:`Unread` where it would decide something that matters (a ``return``, or
a statement the caller calls *decisive*, under a condition that cannot be read).
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# -- the restricted evaluator ------------------------------------------------------------------


class Unread(Exception):
    """A node the evaluator does not interpret (the caller records it in its ``unread``)."""

    def __init__(self, node: ast.AST, reason: str = "") -> None:
        self.node = node
        self.reason = reason or f"{type(node).__name__} is outside the evaluator's whitelist"
        super().__init__(self.reason)


class Opaque:
    """A value outside the whitelist (lenient mode); ``node`` is where it came from."""

    def __init__(self, node: ast.AST, reason: str) -> None:
        self.node, self.reason = node, reason


class SourceStr(str):
    """A string constant that remembers its line."""

    line: int = 0


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def is_opaque(*values: Any) -> bool:
    return any(isinstance(v, Opaque) for v in values)


_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}
_BUILTINS: dict[str, Callable[..., Any]] = {
    "int": int, "str": str, "len": len, "tuple": tuple, "list": list,
}
_STR_METHODS = {"split", "join", "replace", "strip", "startswith", "endswith", "lower"}
# statements that bind no name: skipped in lenient mode (no effect on the values read)
_SKIPPED = (ast.Expr, ast.Import, ast.ImportFrom, ast.Pass, ast.Assert)


class Evaluator:
    """Evaluates a whitelisted subset of Python over an environment ``env`` of plain values.

    Expressions: constants (strings as :class:`SourceStr`), names, lists, tuples, dicts,
    subscripts and slices, comparisons, ``and``/``or``/``not``/``-``, ``+ - *``, ``str % x``,
    conditional expressions, f-strings without format specs; calls of ``int``/``str``/``len``/
    ``tuple``/``list``, of string ``split``/``join``/``replace``/``strip``/``startswith``/
    ``endswith``/``lower``, and of the stand-ins in ``calls`` (dotted callee name -> a Python
    callable given the evaluated arguments). Attribute chains are known only through ``attrs``
    (dotted name -> value). A Python error while evaluating (``int("")``) is :class:`Unread`.

    Statements: ``=`` / annotated ``=`` to names or (nested) tuples/lists of names, ``+=`` and
    the like, ``if``/``else``, ``pass``, ``return`` (only under :meth:`function`); assignments to
    ``os.environ[KEY]`` are collected in :attr:`environ`.

    ``strict`` (the default): anything else raises :class:`Unread`; ``list.append`` /
    ``list.extend`` expression statements are evaluated. Lenient (``strict=False``): an unknown
    value is :class:`Opaque`; statements that bind no name (expression statements, imports,
    asserts) are skipped; other attribute/subscript targets are ignored; a ``try`` body is run
    and the names it assigns become opaque if it fails; an ``if`` whose condition is opaque
    makes the names it assigns opaque, unless a branch holds a ``return`` or a statement for
    which ``decisive`` is true, which is :class:`Unread`.
    """

    def __init__(
        self,
        env: Mapping[str, Any] | None = None,
        calls: Mapping[str, Callable[..., Any]] | None = None,
        *,
        attrs: Mapping[str, Any] | None = None,
        strict: bool = True,
        decisive: Callable[[ast.stmt], bool] | None = None,
    ) -> None:
        self.env: dict[str, Any] = dict(env or {})
        self.calls = dict(calls or {})
        self.attrs = dict(attrs or {})
        self.strict = strict
        self.decisive = decisive or (lambda node: False)
        self.environ: dict[str, Any] = {}
        self._in_function = False

    def unknown(self, node: ast.AST, reason: str) -> Opaque:
        """What the evaluator cannot compute: :class:`Unread` (strict) or :class:`Opaque`."""
        if self.strict:
            raise Unread(node, reason)
        return Opaque(node, reason)

    def function(self, fn: ast.FunctionDef) -> Any:
        """Runs ``fn``'s body; its ``return`` value (``None`` without one)."""
        self._in_function = True
        try:
            self.run(fn.body)
        except _Return as result:
            return result.value
        finally:
            self._in_function = False
        return None

    # statements
    def run(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Pass) or (not self.strict and isinstance(node, _SKIPPED)):
            return
        if isinstance(node, ast.Return) and self._in_function:
            raise _Return(self.expr(node.value) if node.value else None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = self.expr(node.value) if node.value else None
            for target in targets:
                self.bind(target, value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self.env[node.target.id] = self.binop(
                node, node.op, self.expr(node.target), self.expr(node.value)
            )
        elif isinstance(node, ast.If):
            self.if_(node)
        elif isinstance(node, ast.Try) and not self.strict:
            try:
                self.run(node.body)
            except Unread as exc:
                for name in assigned([node]):
                    self.env[name] = Opaque(exc.node, exc.reason)
        elif isinstance(node, ast.Expr) and _list_update(node.value):
            self.list_update(node, node.value)  # type: ignore[arg-type]
        else:
            raise Unread(node, f"`{type(node).__name__}` statement is not evaluated")

    def if_(self, node: ast.If) -> None:
        test = self.expr(node.test)
        if isinstance(test, Opaque):
            branches = node.body + node.orelse
            if any(isinstance(n, ast.Return) or self.decisive(n) for n in branches):
                raise Unread(node.test, f"condition `{ast.unparse(node.test)}`: {test.reason}")
            for name in assigned(branches):
                self.env[name] = Opaque(node, "assigned under an unreadable condition")
            return
        self.run(node.body if test else node.orelse)

    def list_update(self, node: ast.stmt, call: ast.Call) -> None:
        """``name.append(x)`` / ``name.extend(xs)`` on a list (strict mode)."""
        target = self.expr(call.func.value)  # type: ignore[attr-defined]
        method = call.func.attr  # type: ignore[attr-defined]
        if not isinstance(target, list):
            raise Unread(node, f"{method} on a non-list")
        value = self.expr(call.args[0])
        target.append(value) if method == "append" else target.extend(value)

    def bind(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (tuple, list)) and len(value) == len(target.elts):
                for elt, item in zip(target.elts, value, strict=True):
                    self.bind(elt, item)
            elif self.strict:
                raise Unread(target, "unpacking of an unknown value or of the wrong length")
            else:
                for name in assigned([target]):
                    self.env[name] = Opaque(target, "unpacking of an unknown value")
        elif isinstance(target, ast.Subscript) and dotted(target.value) == "os.environ":
            key = self.expr(target.slice)
            if not is_opaque(key):
                self.environ[key] = value
        elif self.strict:
            raise Unread(target)
        # lenient: attribute / subscript targets (self.enable_bf16 = ...) do not matter

    # expressions
    def expr(self, node: ast.expr) -> Any:
        try:
            return self._expr(node)
        except (Unread, _Return):
            raise
        except Exception as exc:  # the evaluated Python itself failed (int(""), a bad index)
            raise Unread(node, f"{type(exc).__name__} evaluating `{ast.unparse(node)}`") from exc

    def _expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                text = SourceStr(node.value)
                text.line = node.lineno
                return text
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            return self.unknown(node, f"`{node.id}` is not known statically")
        if isinstance(node, ast.Attribute):
            name = dotted(node)
            if name in self.attrs:
                return self.attrs[name]
            return self.unknown(node, f"`{ast.unparse(node)}` is not known statically")
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.expr(e) for e in node.elts if not isinstance(e, ast.Starred)]
            if len(items) != len(node.elts):
                return self.unknown(node, "starred element")
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return self.unknown(node, "dict unpacking")
            return {self.expr(k): self.expr(v) for k, v in zip(node.keys, node.values,  # type: ignore[arg-type]
                                                                strict=True)}
        if isinstance(node, ast.Subscript):
            value, index = self.expr(node.value), self.expr(node.slice)
            if is_opaque(value, index):
                return self.unknown(node, f"`{ast.unparse(node)}` is not known statically")
            return value[index]
        if isinstance(node, ast.Slice):
            parts = [self.expr(p) if p is not None else None for p in (node.lower, node.upper,
                                                                       node.step)]
            return self.unknown(node, "slice of unknowns") if is_opaque(*parts) else slice(*parts)
        if isinstance(node, ast.Compare):
            left = self.expr(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.expr(right_node)
                if is_opaque(left, right):
                    return self.unknown(node, f"`{ast.unparse(node)}` compares an unknown value")
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for value_node in node.values:
                result = self.expr(value_node)
                if isinstance(result, Opaque):
                    return result
                if isinstance(node.op, ast.And) and not result:
                    return result
                if isinstance(node.op, ast.Or) and result:
                    return result
            return result
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand)
            if isinstance(operand, Opaque):
                return operand
            if isinstance(node.op, ast.Not):
                return not operand
            if isinstance(node.op, ast.USub):
                return -operand
            return self.unknown(node, "unary operator")
        if isinstance(node, ast.BinOp):
            return self.binop(node, node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test)
            if isinstance(test, Opaque):
                return Opaque(node, test.reason)
            return self.expr(node.body if test else node.orelse)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value_node in node.values:
                if isinstance(value_node, ast.FormattedValue):
                    if value_node.format_spec is not None:
                        return self.unknown(node, "f-string format spec")
                    value = self.expr(value_node.value)
                    if isinstance(value, Opaque):
                        return Opaque(node, value.reason)
                    parts.append(str(value))
                else:
                    parts.append(str(self.expr(value_node)))
            return "".join(parts)
        if isinstance(node, ast.Call):
            return self.call(node)
        return self.unknown(node, f"`{type(node).__name__}` is not evaluated")

    def call(self, node: ast.Call) -> Any:
        if node.keywords:
            return self.unknown(node, f"`{ast.unparse(node)}`: keyword arguments")
        args = [self.expr(a) for a in node.args]
        name = dotted(node.func)
        if name in self.calls:
            return self.calls[name](*args)  # type: ignore[index]
        if name in _BUILTINS:
            if is_opaque(*args):
                return self.unknown(node, f"`{ast.unparse(node)}` of an unknown value")
            return _BUILTINS[name](*args)  # type: ignore[index]
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
            owner = self.expr(node.func.value)
            if isinstance(owner, str) and not is_opaque(*args):
                return getattr(str(owner), node.func.attr)(*args)
        return self.unknown(node, f"call `{ast.unparse(node.func)}()` is not evaluated")

    def binop(self, node: ast.AST, op: ast.operator, left: Any, right: Any) -> Any:
        if isinstance(op, ast.Add) and isinstance(left, list):
            return left + (right if isinstance(right, list) else [right])
        if is_opaque(left, right):
            return self.unknown(node, "arithmetic on an unknown value")
        if isinstance(op, ast.Add):
            return left + right
        if isinstance(op, ast.Sub):
            return left - right
        if isinstance(op, ast.Mult):
            return left * right
        if isinstance(op, ast.Mod) and isinstance(left, str):
            return left % right
        return self.unknown(node, f"operator `{type(op).__name__}`")


def _list_update(value: ast.expr) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("append", "extend")
        and isinstance(value.func.value, ast.Name)
        and len(value.args) == 1
        and not value.keywords
    )


# -- AST helpers ---------------------------------------------------------------------------------


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
