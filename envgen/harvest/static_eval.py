"""Reading a release's build code statically: one restricted evaluator, which the harvesters
share (:mod:`envgen.harvest.op_builder`, :mod:`envgen.harvest.setup_checks`); the AST queries
they share are :mod:`envgen.harvest.static_ast`'s.

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
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from envgen.harvest.static_ast import assigned, dotted, is_list_update, mutated

# -- the restricted evaluator ------------------------------------------------------------------


class Unread(Exception):
    """A node the evaluator does not interpret (the caller records it in its ``unread``)."""

    def __init__(self, node: ast.AST, reason: str = "") -> None:
        self.node = node
        self.reason = reason or f"{type(node).__name__} is outside the evaluator's whitelist"
        super().__init__(self.reason)


class Failed(Unread):
    """The evaluated code itself raised (``int("0a")``, ``list.remove`` of a missing item, a
    ``raise`` statement): what the real code does at that point, given the modelled machine.
    ``error`` is the exception as Python prints its last line."""

    def __init__(self, node: ast.AST, error: str) -> None:
        self.error = error
        what = ast.unparse(node) if not isinstance(node, ast.stmt) else type(node).__name__
        super().__init__(node, f"{error} (evaluating `{what[:120]}`)")


class Opaque:
    """A value outside the whitelist (lenient mode); ``node`` is where it came from."""

    def __init__(self, node: ast.AST, reason: str) -> None:
        self.node, self.reason = node, reason

    def _order(self, _other: Any) -> bool:
        """Ordering an unknown value (inside a tuple, by ``sorted``) is not a failure of the
        evaluated code: it is unread."""
        raise Unread(self.node, f"an unknown value is compared: {self.reason}")

    __lt__ = __le__ = __gt__ = __ge__ = _order


class SourceStr(str):
    """A string constant (or f-string) that remembers its line and, where the evaluator was
    told, its file (``origin``)."""

    line: int = 0
    origin: str | None = None


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Lambda:
    """A ``lambda`` the evaluated code made: called by the same evaluator, never by Python."""

    def __init__(self, node: ast.Lambda, env: dict[str, Any]) -> None:
        self.node, self.env = node, env


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
    "int": int, "str": str, "len": len, "tuple": tuple, "list": list, "bool": bool,
    "sorted": sorted, "any": any, "all": all, "min": min, "max": max, "range": range,
    "map": map,
}
# builtins that call a function they are given (only a whitelisted builtin or a lambda)
_HIGHER = {"sorted", "map", "min", "max"}
_STR_METHODS = {"split", "join", "replace", "strip", "startswith", "endswith", "lower"}
_CONTAINER_METHODS = {dict: {"get", "items", "keys", "values"}, list: {"index", "count"},
                      tuple: {"index", "count"}}
_MAX_STEPS = 100_000  # loop iterations per evaluator: a bound, not a model of anything
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

    Also list, generator and set comprehensions, ``lambda`` (called only by this evaluator),
    ``sorted``/``map``/``min``/``max`` (their function argument a whitelisted builtin or a
    lambda; keyword arguments only for builtins), ``any``/``all``/``range``/``bool``, dict
    ``get``/``items``/``keys``/``values`` and list ``index``/``count``, and
    ``super().name(...)``, looked up in ``calls`` as ``"super().name"``. A Python error of the
    evaluated code itself (``int("0a")``), ``list.remove`` of a missing item or a ``raise``
    statement is :class:`Failed`: what the real code would do on the modelled machine.

    Statements: ``=`` / annotated ``=`` to names, (nested) tuples/lists of names or
    subscripts of a known dict or list, ``+=`` and the like (to a name or such a subscript),
    ``if``/``else``, ``for`` over a known sequence (``break``/``continue``; no ``else``),
    ``pass``, ``raise``, ``return`` (only under :meth:`function`), ``list.append`` /
    ``extend`` / ``remove`` / ``insert`` on a name; assignments to ``os.environ[KEY]`` are
    collected in :attr:`environ`.

    ``strict`` (the default): anything else raises :class:`Unread`. Lenient
    (``strict=False``): an unknown value is :class:`Opaque`; other statements that bind no name
    (expression statements, imports, asserts) are skipped; other attribute/subscript targets
    are ignored; a list update on an unknown value makes that name opaque; a ``try`` body is
    run and the names it assigns become opaque if it fails; an ``if`` whose condition is
    opaque, or a ``for`` over an unknown value, makes the names it assigns opaque, unless a
    branch holds a ``return`` or a statement for which ``decisive`` is true, which is
    :class:`Unread`.
    """

    def __init__(
        self,
        env: Mapping[str, Any] | None = None,
        calls: Mapping[str, Callable[..., Any]] | None = None,
        *,
        attrs: Mapping[str, Any] | None = None,
        strict: bool = True,
        decisive: Callable[[ast.stmt], bool] | None = None,
        origin: str | None = None,
    ) -> None:
        self.origin = origin  # the file of the code evaluated, kept on its strings
        self.env: dict[str, Any] = dict(env or {})
        self.calls = dict(calls or {})
        self.attrs = dict(attrs or {})
        self.strict = strict
        self.decisive = decisive or (lambda node: False)
        self.environ: dict[str, Any] = {}
        self._in_function = False
        self._steps = 0
        self._loops = 0

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
        if isinstance(node, ast.Expr) and is_list_update(node.value):
            self.list_update(node, node.value)  # type: ignore[arg-type]
            return
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
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
            target = node.target
            owner, index = self.expr(target.value), self.expr(target.slice)
            if is_opaque(owner, index) or not isinstance(owner, (dict, list)):
                self.bind(target, self.unknown(target, "update of an unknown container"))
                return
            try:
                current = owner[index]
            except (KeyError, IndexError, TypeError) as exc:
                raise Failed(target, f"{type(exc).__name__}: {exc}") from exc
            self.bind(target, self.binop(node, node.op, current, self.expr(node.value)))
        elif isinstance(node, ast.If):
            self.if_(node)
        elif isinstance(node, ast.For):
            self.for_(node)
        elif isinstance(node, ast.Break) and self._loops:
            raise _Break()
        elif isinstance(node, ast.Continue) and self._loops:
            raise _Continue()
        elif isinstance(node, ast.Raise):
            raise Failed(node, f"raise {ast.unparse(node.exc) if node.exc else ''}".strip())
        elif isinstance(node, ast.Try) and not self.strict:
            try:
                self.run(node.body)
            except Unread as exc:
                for name in mutated([node]):
                    self.env[name] = Opaque(exc.node, exc.reason)
        else:
            raise Unread(node, f"`{type(node).__name__}` statement is not evaluated")

    def if_(self, node: ast.If) -> None:
        test = self.expr(node.test)
        if isinstance(test, Opaque):
            branches = node.body + node.orelse
            if any(isinstance(n, ast.Return) or self.decisive(n) for n in branches):
                raise Unread(node.test, f"condition `{ast.unparse(node.test)}`: {test.reason}")
            for name in mutated(branches):
                self.env[name] = Opaque(node, "assigned under an unreadable condition")
            return
        self.run(node.body if test else node.orelse)

    def for_(self, node: ast.For) -> None:
        items = self.expr(node.iter)
        if isinstance(items, Opaque) or not isinstance(items, (list, tuple, dict, str, range)):
            if self.strict or any(isinstance(n, ast.Return) or self.decisive(n)
                                  for n in node.body):
                reason = items.reason if isinstance(items, Opaque) else "not a sequence"
                raise Unread(node.iter, f"loop over `{ast.unparse(node.iter)}`: {reason}")
            for name in mutated(node.body) | assigned([node.target]):
                self.env[name] = Opaque(node, "assigned in a loop over an unknown value")
            return
        if node.orelse:
            raise Unread(node, "`for ... else` is not evaluated")
        self._loops += 1
        try:
            for item in list(items):
                self._steps += 1
                if self._steps > _MAX_STEPS:
                    raise Unread(node, f"more than {_MAX_STEPS} loop steps")
                self.bind(node.target, item)
                try:
                    self.run(node.body)
                except _Continue:
                    continue
                except _Break:
                    break
        finally:
            self._loops -= 1

    def list_update(self, node: ast.stmt, call: ast.Call) -> None:
        """``name.append(x)`` / ``extend(xs)`` / ``remove(x)`` / ``insert(i, x)`` on a list."""
        owner = call.func.value  # type: ignore[attr-defined]
        target = self.expr(owner)
        method = call.func.attr  # type: ignore[attr-defined]
        if not isinstance(target, list):
            if self.strict or self.decisive(node):
                raise Unread(node, f"{method} on a non-list")
            self.env[owner.id] = Opaque(node, f"{method} on an unknown value")
            return
        args = [self.expr(a) for a in call.args]
        if method == "remove" and not is_opaque(*args) and args[0] not in target:
            raise Failed(node, "ValueError: list.remove(x): x not in list")
        if method == "remove" and is_opaque(*args):
            self.env[owner.id] = Opaque(node, "remove of an unknown value")
            return
        getattr(target, method)(*args)

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
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and isinstance(self.env.get(target.value.id), (dict, list)):
            key = self.expr(target.slice)
            if is_opaque(key):
                self.env[target.value.id] = self.unknown(target, "a store at an unknown key")
                return
            try:
                self.env[target.value.id][key] = value
            except (IndexError, TypeError) as exc:
                raise Failed(target, f"{type(exc).__name__}: {exc}") from exc
        elif self.strict:
            raise Unread(target)
        # lenient: attribute / subscript targets (self.enable_bf16 = ...) do not matter

    # expressions
    def expr(self, node: ast.expr) -> Any:
        try:
            return self._expr(node)
        except (Unread, _Return, _Break, _Continue):
            raise
        except Exception as exc:  # the evaluated Python itself failed (int(""), a bad index)
            if "Opaque" in str(exc):  # an unknown value reached Python (";".join([unknown]))
                raise Unread(node, f"an unknown value in `{ast.unparse(node)}`") from exc
            raise Failed(node, f"{type(exc).__name__}: {exc}") from exc

    def _expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return self.source_str(node.value, node)
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in _BUILTINS:  # a builtin passed as a value: map(int, ...)
                return _BUILTINS[node.id]
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
            return self.source_str("".join(parts), node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            items = self.comprehension(node, node.generators, node.elt)
            if isinstance(items, Opaque):
                return items
            return set(items) if isinstance(node, ast.SetComp) else items
        if isinstance(node, ast.Lambda):
            args = node.args
            if (args.vararg or args.kwarg or args.kwonlyargs or args.defaults
                    or args.posonlyargs):
                return self.unknown(node, "a lambda with more than plain parameters")
            return _Lambda(node, dict(self.env))
        return self.unknown(node, f"`{type(node).__name__}` is not evaluated")

    def source_str(self, text: str, node: ast.AST) -> SourceStr:
        out = SourceStr(text)
        out.line, out.origin = getattr(node, "lineno", 0), self.origin
        return out

    def comprehension(self, node: ast.expr, generators: list[ast.comprehension],
                      elt: ast.expr) -> list[Any] | Opaque:
        """The items of a comprehension, its names bound in a scope of their own."""
        saved = dict(self.env)
        out: list[Any] = []

        def walk(level: int) -> Opaque | None:
            if level == len(generators):
                out.append(self.expr(elt))
                return None
            gen = generators[level]
            items = self.expr(gen.iter)
            if gen.is_async or isinstance(items, Opaque):
                return Opaque(node, items.reason if isinstance(items, Opaque) else "async")
            for item in list(items):
                self._steps += 1
                if self._steps > _MAX_STEPS:
                    raise Unread(node, f"more than {_MAX_STEPS} loop steps")
                self.bind(gen.target, item)
                tests = [self.expr(t) for t in gen.ifs]
                if any(isinstance(t, Opaque) for t in tests):
                    return Opaque(node, "a comprehension filter of an unknown value")
                if all(tests):
                    stop = walk(level + 1)
                    if stop is not None:
                        return stop
            return None

        try:
            stop = walk(0)
        finally:
            self.env = saved
        if stop is not None:
            return self.unknown(node, stop.reason)
        return out

    def apply(self, node: ast.AST, fn: Any, args: list[Any]) -> Any:
        """Call a function value the evaluated code passes around: a lambda it made or a
        whitelisted builtin; anything else is unknown."""
        if isinstance(fn, _Lambda):
            params = [a.arg for a in fn.node.args.args]
            if len(params) != len(args):
                raise Failed(node, f"TypeError: the lambda takes {len(params)} arguments")
            saved = self.env
            self.env = {**fn.env, **dict(zip(params, args, strict=True))}
            try:
                return self.expr(fn.node.body)
            finally:
                self.env = saved
        if any(fn is b for b in _BUILTINS.values()) and fn not in (map, sorted, min, max):
            if is_opaque(*args):
                return self.unknown(node, "a builtin of an unknown value")
            return fn(*args)
        return self.unknown(node, "a call of a value that is not a whitelisted function")

    def call(self, node: ast.Call) -> Any:
        name = dotted(node.func)
        if name is None and isinstance(node.func, ast.Attribute) and isinstance(
                node.func.value, ast.Call) and dotted(node.func.value.func) == "super" \
                and not node.func.value.args:
            name = f"super().{node.func.attr}"
        if any(k.arg is None for k in node.keywords) or any(
                isinstance(a, ast.Starred) for a in node.args):
            return self.unknown(node, f"`{ast.unparse(node)}`: unpacked arguments")
        if node.keywords and name not in _BUILTINS:
            return self.unknown(node, f"`{ast.unparse(node)}`: keyword arguments")
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if name in self.calls:
            return self.calls[name](*args)  # type: ignore[index]
        if name in self.env and isinstance(self.env[name], _Lambda):
            return self.apply(node, self.env[name], args)
        if name in _BUILTINS:
            if is_opaque(*args, *kwargs.values()):
                return self.unknown(node, f"`{ast.unparse(node)}` of an unknown value")
            if name in _HIGHER:
                return self.higher(node, name, args, kwargs)
            return _BUILTINS[name](*args, **kwargs)  # type: ignore[index]
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            owner = self.expr(node.func.value)
            if method in _STR_METHODS and isinstance(owner, str) and not is_opaque(*args):
                return getattr(str(owner), method)(*args)
            kinds = _CONTAINER_METHODS.get(type(owner), ())
            if method in kinds and not is_opaque(*args):
                result = getattr(owner, method)(*args)
                return list(result) if method in ("items", "keys", "values") else result
        return self.unknown(node, f"call `{ast.unparse(node.func)}()` is not evaluated")

    def higher(self, node: ast.Call, name: str, args: list[Any],
               kwargs: dict[str, Any]) -> Any:
        """``sorted`` / ``map`` / ``min`` / ``max`` whose function arguments this evaluator
        calls itself (:meth:`apply`)."""
        if set(kwargs) - {"key", "reverse", "default"}:
            return self.unknown(node, f"`{name}` with keyword arguments {sorted(kwargs)}")
        if name == "map":
            if len(args) != 2:
                return self.unknown(node, "map over more than one sequence")
            return [self.apply(node, args[0], [item]) for item in list(args[1])]
        key = kwargs.pop("key", None)
        if key is not None:
            pairs = [(self.apply(node, key, [item]), i, item)
                     for i, item in enumerate(list(args[0]) if len(args) == 1 else args)]
            if any(isinstance(p[0], Opaque) for p in pairs):
                return self.unknown(node, f"`{name}` by a key of unknown values")
            if name == "sorted":
                return [item for _, _, item in sorted(pairs, reverse=bool(
                    kwargs.get("reverse")))]
            chosen = (min if name == "min" else max)(pairs, **kwargs)
            return chosen[2]
        return _BUILTINS[name](*args, **kwargs)

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
