"""Frozen value records that are frozen dataclasses to every reader, without their start-up cost.

Hand-written (reason: ``dataclasses`` costs ~19 ms to import, as it imports ``inspect``, and
~1.3 ms per class to create, one ``exec`` per generated method; the ~30 value classes on the
path of a one-request command took 40-60 ms of a 145 ms ``envgen resolve``). ``@record`` makes
what ``@dataclass(frozen=True, slots=True, eq=True)`` makes, and the dataclasses module sees a
dataclass: ``dataclasses.fields``, ``asdict``, ``astuple``, ``replace`` and ``is_dataclass``
work on the class and its instances. What differs is only when the work is done:

- ``__init__`` is compiled once a class has made COMPILE_AFTER instances (compiling one costs
  ~0.5 ms here; the first ones are made by a generic ``__init__`` that reads the declaration,
  and records read back from the compiled facts are filled slot by slot);
- ``__eq__``, ``__hash__``, ``__repr__``, pickling and the frozen ``__setattr__`` are shared
  methods that read the fields through one ``operator.attrgetter`` per class;
- ``__dataclass_fields__`` is made the first time something asks for it, by the dataclasses
  module itself from the same declaration (so its ``Field`` objects are the real ones).

Semantics kept from dataclasses: fields are the class's annotations in order (a record base's
first), defaults, ``field()``'s ``default_factory``, ``init``, ``repr`` and ``compare``,
``__post_init__``, ``kw_only``, ``__match_args__``, equality only between instances of the same
class, the hash of the compared field values, assignment raising
``dataclasses.FrozenInstanceError``. Not supported (not used by envgen): ``ClassVar`` and
``InitVar`` fields, ``field(hash=..., metadata=...)``.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # typing is not imported at run time (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_kw):
        return lambda decorator: decorator

__all__ = ["Record", "field", "names", "record", "replace"]


_MISSING = object()  # no default given (and: no value passed for a factory field)
COMPILE_AFTER = 16  # instances of a class made by the generic __init__ before compiling one


class _Factory:
    """A default made anew for each instance (``field(default_factory=...)``)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class _Field:
    """What ``field()`` declares: the default (a value or a ``_Factory``) and the options."""

    __slots__ = ("compare", "default", "init", "repr")

    def __init__(self, default: Any, init: bool, repr: bool, compare: bool) -> None:
        self.default, self.init, self.repr, self.compare = default, init, repr, compare


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None,
          init: bool = True, repr: bool = True, compare: bool = True) -> Any:
    """A field with options, as ``dataclasses.field``: a default or a ``default_factory``
    (made per instance), not a parameter of ``__init__`` (``init=False``: ``__post_init__``
    sets it), left out of the repr (``repr=False``) or of equality and the hash
    (``compare=False``)."""
    if default is not _MISSING and default_factory is not None:
        raise ValueError("cannot specify both default and default_factory")
    made = _Factory(default_factory) if default_factory is not None else default
    return _Field(made, init, repr, compare)


def names(cls: type) -> tuple[str, ...]:
    """The field names of a record class, in order, without asking the dataclasses module."""
    return cls.__record_fields__  # type: ignore[attr-defined]


def replace(obj: Any, /, **changes: Any) -> Any:
    """A copy of record ``obj`` with ``changes`` (``dataclasses.replace``, without importing it)."""
    cls = type(obj)
    values = {n: getattr(obj, n) for n in cls.__record_fields__
              if n not in cls.__record_no_init__}  # as dataclasses: init=False ones are remade
    unknown = changes.keys() - values.keys()
    if unknown:
        raise TypeError(f"{cls.__qualname__} has no field {sorted(unknown)[0]!r} to replace")
    values.update(changes)
    return cls(**values)


class _DataclassFields:
    """``__dataclass_fields__``: made from the record's declaration by ``dataclasses`` itself the
    first time it is read (on the class or an instance), then stored on that class."""

    def __get__(self, obj: Any, cls: type) -> dict[str, Any]:
        if getattr(cls, "__record_types__", None) is None:
            raise AttributeError("__dataclass_fields__")  # Record itself is no dataclass
        import dataclasses

        defaults = cls.__record_defaults__  # type: ignore[attr-defined]
        shown, compared = cls.__record_repr__, cls.__record_compared__  # type: ignore
        ns: dict[str, Any] = {"__annotations__": dict(cls.__record_types__)}  # type: ignore
        for name in cls.__record_fields__:  # type: ignore[attr-defined]
            value = defaults.get(name, _MISSING)
            kw: dict[str, Any] = {"repr": name in shown, "compare": name in compared,
                                  "init": name not in cls.__record_no_init__}  # type: ignore
            if isinstance(value, _Factory):
                kw["default_factory"] = value.make
            elif value is not _MISSING:
                kw["default"] = value
            ns[name] = dataclasses.field(**kw)
        shadow = dataclasses.dataclass(
            type(cls.__name__, (), ns), kw_only=cls.__record_kw_only__)  # type: ignore
        fields = shadow.__dataclass_fields__  # type: ignore[attr-defined]
        type.__setattr__(cls, "__dataclass_fields__", fields)
        return fields


def _frozen(name: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")


class Record:
    """The methods every record shares (see the module docstring)."""

    __slots__ = ()
    __record_fields__: tuple[str, ...] = ()
    __dataclass_fields__ = _DataclassFields()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        made = cls.__dict__.get("__record_made__", 0) + 1
        if made > COMPILE_AFTER:
            _compile_init(cls)(self, *args, **kwargs)
            return
        type.__setattr__(cls, "__record_made__", made)
        _fill(self, cls, args, kwargs)

    def __eq__(self, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return self.__record_key__(self) == other.__record_key__(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.__record_key__(self))

    def __repr__(self) -> str:
        values = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__record_repr__)
        return f"{type(self).__qualname__}({values})"

    def __setattr__(self, name: str, value: Any) -> None:
        if "__record_fields__" in type(self).__dict__ or name in self.__record_fields__:
            raise _frozen(name)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if "__record_fields__" in type(self).__dict__ or name in self.__record_fields__:
            raise _frozen(name)
        super().__delattr__(name)

    def __getstate__(self) -> tuple:
        return self.__record_values__(self)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__record_fields__, state, strict=True):
            object.__setattr__(self, name, value)

    __record_repr__: tuple[str, ...] = ()
    __record_compared__: tuple[str, ...] = ()
    __record_no_init__: frozenset[str] = frozenset()

    @staticmethod
    def __record_values__(obj: Any) -> tuple:  # replaced per class by one attrgetter
        return ()

    __record_key__ = __record_values__  # the values compared and hashed (per class too)


def _values_getter(fields: tuple[str, ...]) -> Callable[[Any], tuple]:
    if len(fields) > 1:
        return staticmethod(attrgetter(*fields))  # type: ignore[return-value]
    if fields:
        one = attrgetter(fields[0])
        return staticmethod(lambda obj: (one(obj),))  # type: ignore[return-value]
    return staticmethod(lambda obj: ())  # type: ignore[return-value]


def _fill(obj: Any, cls: type, args: tuple, kwargs: dict[str, Any]) -> None:
    """What the compiled ``__init__`` does, read from the class's declaration (the first
    COMPILE_AFTER instances of a class: compiling costs ~0.5 ms, more than a few calls)."""
    fields: tuple[str, ...] = cls.__record_fields__  # type: ignore[attr-defined]
    no_init: frozenset[str] = cls.__record_no_init__  # type: ignore[attr-defined]
    defaults: dict[str, Any] = cls.__record_defaults__  # type: ignore[attr-defined]
    params = [n for n in fields if n not in no_init]
    where = f"{cls.__qualname__}.__init__()"
    values = kwargs
    if args:
        most = 0 if cls.__record_kw_only__ else len(params)  # type: ignore[attr-defined]
        if len(args) > most:
            raise TypeError(f"{where} takes {most + 1} positional argument"
                            f"{'s' if most else ''} but {len(args) + 1} were given")
        values = dict(zip(params[:len(args)], args, strict=True))
        for name in kwargs:
            if name in values:
                raise TypeError(f"{where} got multiple values for argument {name!r}")
        values.update(kwargs)
    for name in values:
        if name not in params:
            raise TypeError(f"{where} got an unexpected keyword argument {name!r}")
    missing = [n for n in params if n not in values and n not in defaults]
    if missing:
        kind = "keyword-only" if cls.__record_kw_only__ else "positional"  # type: ignore
        listed = " and ".join(", ".join(map(repr, missing)).rsplit(", ", 1))
        raise TypeError(f"{where} missing {len(missing)} required {kind} argument"
                        f"{'s' if len(missing) > 1 else ''}: {listed}")
    for name in fields:
        if name in values:
            value = values[name]
        else:
            value = defaults.get(name, _MISSING)
            if value is _MISSING:
                continue  # init=False without a default: __post_init__ sets it
            if isinstance(value, _Factory):
                value = value.make()
        object.__setattr__(obj, name, value)
    if hasattr(cls, "__post_init__"):
        obj.__post_init__()


def _compile_init(cls: type) -> Callable[..., None]:
    """The class's ``__init__`` (as dataclasses writes it), compiled now and set on the class."""
    fields: tuple[str, ...] = cls.__record_fields__  # type: ignore[attr-defined]
    defaults: dict[str, Any] = cls.__record_defaults__  # type: ignore[attr-defined]
    kw_only: bool = cls.__record_kw_only__  # type: ignore[attr-defined]
    no_init: frozenset[str] = cls.__record_no_init__  # type: ignore[attr-defined]
    env: dict[str, Any] = {"__set": object.__setattr__, "__MISSING": _MISSING}
    params, body = [], []
    for i, name in enumerate(fields):
        value = defaults.get(name, _MISSING)
        if name in no_init:
            if isinstance(value, _Factory):
                env[f"__make_{i}"] = value.make
                body.append(f"__set(self, {name!r}, __make_{i}())")
            elif value is not _MISSING:
                env[f"__default_{i}"] = value
                body.append(f"__set(self, {name!r}, __default_{i})")
        elif value is _MISSING:
            params.append(name)
            body.append(f"__set(self, {name!r}, {name})")
        elif isinstance(value, _Factory):
            env[f"__make_{i}"] = value.make
            params.append(f"{name}=__MISSING")
            body.append(f"__set(self, {name!r}, __make_{i}() if {name} is __MISSING else {name})")
        else:
            env[f"__default_{i}"] = value
            params.append(f"{name}=__default_{i}")
            body.append(f"__set(self, {name!r}, {name})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    star = ["*"] if kw_only and params else []
    source = (f"def __init__(self, {', '.join([*star, *params])}):\n    "
              + ("\n    ".join(body) or "pass") + "\n")
    exec(compile(source, f"<record {cls.__qualname__}.__init__>", "exec"), env)
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    type.__setattr__(cls, "__init__", init)
    return init


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type | None = None, /, *, kw_only: bool = False, slots: bool = True,
           eq: bool = True) -> Any:
    """The class as a frozen record: ``@record`` or ``@record(kw_only=True)``. ``slots=False``
    keeps an instance ``__dict__`` (for ``functools.cached_property``); ``eq=False`` compares
    and hashes by identity."""

    def wrap(cls: type) -> type:
        return _make(cls, kw_only=kw_only, slots=slots, eq=eq)

    return wrap if cls is None else wrap(cls)


def _make(cls: type, *, kw_only: bool, slots: bool, eq: bool) -> type:
    ns = dict(cls.__dict__)
    own = ns.get("__annotations__", {})
    base = next((b for b in cls.__mro__[1:] if "__record_fields__" in b.__dict__), None)
    types = dict(base.__record_types__) if base else {}  # type: ignore[attr-defined]
    defaults = dict(base.__record_defaults__) if base else {}  # type: ignore[attr-defined]
    no_init = set() if base is None else set(base.__record_no_init__)  # type: ignore
    hidden = set() if base is None else set(base.__record_fields__) - set(
        base.__record_repr__)  # type: ignore[attr-defined]
    ignored = set() if base is None else set(base.__record_fields__) - set(
        base.__record_compared__)  # type: ignore[attr-defined]
    for name, annotation in own.items():
        if "ClassVar" in str(annotation) or "InitVar" in str(annotation):
            raise TypeError(f"{cls.__qualname__}.{name}: records have no ClassVar/InitVar fields")
        types[name] = annotation
        if name in ns:
            value = ns.pop(name)
            if isinstance(value, _Field):
                no_init.update([name] if not value.init else [])
                hidden.update([name] if not value.repr else [])
                ignored.update([name] if not value.compare else [])
                value = value.default
            if value is not _MISSING:
                defaults[name] = value
    fields = tuple(types)
    compared = tuple(n for n in fields if n not in ignored)
    if not kw_only:
        seen_default = None
        for name in fields:
            if name in no_init:
                continue
            if name in defaults:
                seen_default = name
            elif seen_default:
                raise TypeError(f"{cls.__qualname__}: non-default argument {name!r} follows "
                                f"default argument {seen_default!r}")
    for name in ("__dict__", "__weakref__"):
        ns.pop(name, None)
    if slots:
        ns["__slots__"] = tuple(n for n in own if n not in (base.__record_fields__ if base
                                                              else ()))  # type: ignore
    ns.update(__record_fields__=fields, __record_types__=types, __record_defaults__=defaults,
              __record_kw_only__=kw_only, __record_values__=_values_getter(fields),
              __record_key__=_values_getter(compared), __record_compared__=compared,
              __record_repr__=tuple(n for n in fields if n not in hidden),
              __record_no_init__=frozenset(no_init),
              __match_args__=() if kw_only else tuple(n for n in fields if n not in no_init))
    if not eq:
        ns.update(__eq__=object.__eq__, __hash__=object.__hash__)
    elif "__eq__" in ns and ns.get("__hash__") is None:
        ns["__hash__"] = Record.__hash__  # as dataclasses: frozen and eq give a field hash
    bases = cls.__bases__ if base or Record in cls.__mro__ else (Record, *(
        b for b in cls.__bases__ if b is not object))
    return type(cls)(cls.__name__, bases, ns)
