"""Validate a parsed data file (JSON, or TOML read with tomllib) against its JSON Schema.

The schemas in this folder are ordinary draft 2020-12 schemas; the test suite checks them with
``jsonschema`` (against the metaschema, and that both agree on every error). envgen itself does
not use ``jsonschema`` here: validation is on the hot path of every command (each ``envgen
resolve`` reads the harvested snapshot), and importing ``jsonschema`` (~75 ms) then validating
the committed snapshot with it (~100 ms) would cost far more than the ~8 ms of a whole resolve;
this validator takes ~2 ms for it (~6 ms in a fresh process, compiling the schemas included).
Each schema is compiled once per process into plain Python closures for the keywords these
schemas use (``type``, ``enum``,
``const``, ``pattern``, ``minLength``, ``minimum``, ``maximum``, ``minItems``, ``uniqueItems``,
``items``, ``properties``, ``required``, ``additionalProperties``, ``patternProperties``,
``propertyNames``, ``allOf``, local ``$ref``); a schema using any other keyword is refused when
compiled, so the two validators cannot silently disagree.

Errors carry the JSON path of the value, the keyword it failed and the (sub)schema holding it;
:meth:`SchemaError.message` says what is wrong using that subschema's ``description`` (or
``x-message``), e.g. ``'x' is not a CUDA major.minor ("12.1")``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent

Path_ = tuple[str | int, ...]
Check = Callable[[Any, Any, list], None]

_ANNOTATIONS = {"$schema", "$id", "$defs", "$comment", "title", "description", "x-message"}
_KEYWORDS = {"type", "enum", "const", "pattern", "minLength", "minimum", "maximum", "minItems",
             "uniqueItems", "items", "properties", "required", "additionalProperties",
             "patternProperties", "propertyNames", "allOf", "$ref"}


@dataclass(frozen=True, slots=True)
class SchemaError:
    path: Path_  # where the value is: keys and list indexes from the document's root
    keyword: str  # the schema keyword it failed ("type", "pattern", "required", …)
    instance: Any  # the value (for "propertyNames": the key; for "required": the object)
    schema: dict  # the (sub)schema holding the keyword
    detail: Any = None  # "required": the missing key; "additionalProperties": the extra keys

    def message(self) -> str:
        s, kw = self.schema, self.keyword
        if kw == "required":
            return f"missing {self.detail!r}"
        if kw == "additionalProperties":
            return f"unknown key(s) {', '.join(map(str, self.detail))}"
        if "x-message" in s:
            return str(s["x-message"])
        value = show(self.instance)
        what = s.get("description")
        if kw == "propertyNames":
            return f"key {value} is not {what or 'allowed'}"
        if what:
            return f"{value} is not {what}"
        return f"{value} fails {kw} {show(s.get(kw))}"


def show(value: Any, limit: int = 80) -> str:
    """A value as the user wrote it, on one line: strings quoted with escapes, JSON otherwise."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None or isinstance(value, (bool, int, float, list, dict)):
        try:
            text = json.dumps(value, ensure_ascii=True, default=str)
        except (ValueError, RecursionError):  # circular or deep: never fail while reporting
            text = f"a {type(value).__name__}"
    else:  # e.g. a TOML date
        text = f"{value} (a TOML {type(value).__name__})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def where(path: Path_) -> str:
    """``builds[3].python[0]``, ``conda.releases["11.7"]``; ``""`` for the root."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=True)}]"
    return out


# ------------------------------------------------------------------------------ compiling

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true/false are not 1/0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return a == b


def _unwind(p: Any) -> Path_:
    """The internal path (``None`` for the root, else ``(parent, key)``) as a tuple."""
    parts: list[str | int] = []
    while p is not None:
        p, key = p
        parts.append(key)
    return tuple(reversed(parts))


def _err(out: list, p: Any, keyword: str, v: Any, s: dict, detail: Any = None) -> None:
    out.append((p, keyword, v, s, detail))


class _Compiler:
    """Compiles a schema into checks ``check(value, path, out)`` that append
    ``(path, keyword, value, subschema, detail)`` for each error; ``path`` is ``None`` for the
    root and ``(parent path, key)`` below it (cheaper to build than tuples for every value)."""

    def __init__(self, root: dict) -> None:
        self.root = root
        self.memo: dict[int, Check] = {}

    def ref(self, ref: str) -> dict:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported, not {ref!r}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return lambda v, p, out: None
        if schema is False:
            return lambda v, p, out: _err(out, p, "false", v, {})
        key = id(schema)
        if key in self.memo:
            return self.memo[key]
        slot: list[Check] = []
        self.memo[key] = lambda v, p, out: slot[0](v, p, out)  # for recursive schemas
        keywords = set(schema) - _ANNOTATIONS
        unknown = keywords - _KEYWORDS
        if unknown:
            raise ValueError(f"schema keyword(s) {sorted(unknown)} are not supported")
        fused = self._fused(schema, keywords)
        checks = [fused] if fused is not None else [
            c for c in (getattr(self, "_" + kw.lstrip("$"))(schema) for kw in _ORDER
                        if kw in schema) if c is not None]
        if len(checks) == 1:
            run = checks[0]
        else:
            def run(v, p, out, checks=tuple(checks)):
                for c in checks:
                    c(v, p, out)
        slot.append(run)
        self.memo[key] = run
        return run

    # The common shapes (a string with a pattern, a list of items, a table of known keys) as
    # one closure each: the same checks as the keyword methods below, fewer calls.
    def _fused(self, s: dict, keywords: set[str]) -> Check | None:
        kind = s.get("type")
        nullable = isinstance(kind, list) and len(kind) == 2 and "null" in kind
        base = next(k for k in kind if k != "null") if nullable else kind
        if base == "string" and keywords <= {"type", "pattern", "minLength"}:
            return self._string(s, nullable)
        if base == "array" and keywords <= {"type", "items", "minItems", "uniqueItems"}:
            return self._array(s, nullable)
        if base == "object" and not nullable and keywords <= {
                "type", "properties", "required", "additionalProperties", "patternProperties",
                "propertyNames"}:
            return self._object(s)
        return None

    def _string(self, s: dict, nullable: bool) -> Check:
        search = re.compile(s["pattern"]).search if "pattern" in s else None
        least = s.get("minLength", 0)
        good: set[str] = set()  # strings that passed: a snapshot repeats most of its values

        def check(v, p, out):
            if isinstance(v, str):
                if v in good:
                    return
                ok = True
                if search is not None and search(v) is None:
                    _err(out, p, "pattern", v, s)
                    ok = False
                if len(v) < least:
                    _err(out, p, "minLength", v, s)
                    ok = False
                if ok and len(good) < 100_000:
                    good.add(v)
            elif not (nullable and v is None):
                _err(out, p, "type", v, s)
        return check

    def _array(self, s: dict, nullable: bool) -> Check:
        item = self.compile(s["items"]) if "items" in s else None
        least = s.get("minItems", 0)
        unique = self._uniqueItems(s) if s.get("uniqueItems") else None

        def check(v, p, out):
            if isinstance(v, list):
                if len(v) < least:
                    _err(out, p, "minItems", v, s)
                if unique is not None:
                    unique(v, p, out)
                if item is not None:
                    for i, x in enumerate(v):
                        item(x, (p, i), out)
            elif not (nullable and v is None):
                _err(out, p, "type", v, s)
        return check

    def _object(self, s: dict) -> Check:
        props = {k: self.compile(sub) for k, sub in s.get("properties", {}).items()}
        pats = tuple((re.compile(k).search, self.compile(sub))
                     for k, sub in s.get("patternProperties", {}).items())
        required = tuple(s.get("required", ()))
        extra = s.get("additionalProperties", True)
        extra_check = None if isinstance(extra, bool) else self.compile(extra)
        names = self.compile(s["propertyNames"]) if "propertyNames" in s else None
        closed = extra is False
        simple = not pats and names is None and extra_check is None

        def check(v, p, out):
            if not isinstance(v, dict):
                _err(out, p, "type", v, s)
                return
            for name in required:
                if name not in v:
                    _err(out, p, "required", v, s, name)
            unknown = []
            if simple:  # properties only: the records of every matrix file
                for k, x in v.items():
                    sub = props.get(k)
                    if sub is not None:
                        sub(x, (p, k), out)
                    elif closed:
                        unknown.append(k)
            else:
                for k, x in v.items():
                    sub = props.get(k)
                    if sub is not None:
                        sub(x, (p, k), out)
                    matched = sub is not None
                    for search, psub in pats:
                        if search(k) is not None:
                            psub(x, (p, k), out)
                            matched = True
                    if not matched:
                        if extra_check is not None:
                            extra_check(x, (p, k), out)
                        elif closed:
                            unknown.append(k)
                    if names is not None:
                        found: list = []
                        names(k, p, found)
                        for e in found:
                            _err(out, p, "propertyNames", k, e[3])
            if unknown:
                _err(out, p, "additionalProperties", v, s, tuple(unknown))
        return check

    # one method per keyword: each returns a check, or None when the keyword is a no-op
    def _ref(self, s: dict) -> Check:
        return self.compile(self.ref(s["$ref"]))

    def _type(self, s: dict) -> Check:
        names = [s["type"]] if isinstance(s["type"], str) else list(s["type"])
        preds = tuple(_TYPES[n] for n in names)

        def check(v, p, out):
            if not any(f(v) for f in preds):
                _err(out, p, "type", v, s)
        return check

    def _enum(self, s: dict) -> Check:
        options = tuple(s["enum"])
        if all(isinstance(o, str) for o in options):
            allowed = frozenset(options)

            def check(v, p, out):
                if not (isinstance(v, str) and v in allowed):
                    _err(out, p, "enum", v, s)
        else:
            def check(v, p, out):
                if not any(_equal(v, o) for o in options):
                    _err(out, p, "enum", v, s)
        return check

    def _const(self, s: dict) -> Check:
        const = s["const"]

        def check(v, p, out):
            if not _equal(v, const):
                _err(out, p, "const", v, s)
        return check

    def _pattern(self, s: dict) -> Check:
        search = re.compile(s["pattern"]).search

        def check(v, p, out):
            if isinstance(v, str) and search(v) is None:
                _err(out, p, "pattern", v, s)
        return check

    def _minLength(self, s: dict) -> Check:
        n = s["minLength"]

        def check(v, p, out):
            if isinstance(v, str) and len(v) < n:
                _err(out, p, "minLength", v, s)
        return check

    def _minimum(self, s: dict) -> Check:
        n = s["minimum"]

        def check(v, p, out):
            if _is_number(v) and v < n:
                _err(out, p, "minimum", v, s)
        return check

    def _maximum(self, s: dict) -> Check:
        n = s["maximum"]

        def check(v, p, out):
            if _is_number(v) and v > n:
                _err(out, p, "maximum", v, s)
        return check

    def _minItems(self, s: dict) -> Check:
        n = s["minItems"]

        def check(v, p, out):
            if isinstance(v, list) and len(v) < n:
                _err(out, p, "minItems", v, s)
        return check

    def _uniqueItems(self, s: dict) -> Check | None:
        if not s["uniqueItems"]:
            return None

        def check(v, p, out):
            if isinstance(v, list) and len(v) > 1:
                if all(isinstance(x, str) for x in v):
                    repeated = len(set(v)) != len(v)
                else:
                    repeated = any(_equal(v[i], v[j]) for i in range(len(v))
                                   for j in range(i + 1, len(v)))
                if repeated:
                    _err(out, p, "uniqueItems", v, s)
        return check

    def _items(self, s: dict) -> Check:
        item = self.compile(s["items"])

        def check(v, p, out):
            if isinstance(v, list):
                for i, x in enumerate(v):
                    item(x, (p, i), out)
        return check

    def _required(self, s: dict) -> Check | None:
        names = tuple(s["required"])
        if not names:
            return None

        def check(v, p, out):
            if isinstance(v, dict):
                for name in names:
                    if name not in v:
                        _err(out, p, "required", v, s, name)
        return check

    def _properties(self, s: dict) -> Check:
        props = {k: self.compile(sub) for k, sub in s["properties"].items()}

        def check(v, p, out):
            if isinstance(v, dict):
                for k, x in v.items():
                    sub = props.get(k)
                    if sub is not None:
                        sub(x, (p, k), out)
        return check

    def _patternProperties(self, s: dict) -> Check:
        pats = tuple((re.compile(k).search, self.compile(sub))
                     for k, sub in s["patternProperties"].items())

        def check(v, p, out):
            if isinstance(v, dict):
                for k, x in v.items():
                    for search, sub in pats:
                        if search(k) is not None:
                            sub(x, (p, k), out)
        return check

    def _additionalProperties(self, s: dict) -> Check | None:
        known = frozenset(s.get("properties", ()))
        pats = tuple(re.compile(k).search for k in s.get("patternProperties", ()))
        extra = s["additionalProperties"]
        if extra is True:
            return None

        def extras(v: dict) -> list[str]:
            return [k for k in v if k not in known and not any(m(k) for m in pats)]

        if extra is False:
            def check(v, p, out):
                if isinstance(v, dict):
                    keys = extras(v)
                    if keys:
                        _err(out, p, "additionalProperties", v, s, tuple(keys))
            return check
        sub = self.compile(extra)

        def check_each(v, p, out):
            if isinstance(v, dict):
                for k in extras(v):
                    sub(v[k], (p, k), out)
        return check_each

    def _propertyNames(self, s: dict) -> Check:
        sub = self.compile(s["propertyNames"])

        def check(v, p, out):
            if isinstance(v, dict):
                for k in v:
                    found: list = []
                    sub(k, p, found)
                    for e in found:
                        _err(out, p, "propertyNames", k, e[3])
        return check

    def _allOf(self, s: dict) -> Check:
        subs = tuple(self.compile(sub) for sub in s["allOf"])

        def check(v, p, out):
            for sub in subs:
                sub(v, p, out)
        return check


# type first, so a wrong type is reported before anything finer
_ORDER = ("type", "const", "enum", "pattern", "minLength", "minimum", "maximum", "minItems",
          "uniqueItems", "items", "required", "properties", "patternProperties",
          "additionalProperties", "propertyNames", "allOf", "$ref")
assert set(_ORDER) == _KEYWORDS


@cache
def load_schema(name: str) -> dict:
    """The parsed ``<name>.schema.json``."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def validator(name: str, definition: str | None = None) -> Check:
    """The compiled schema ``name`` (or its ``$defs/<definition>``), once per process."""
    root = load_schema(name)
    compiler = _Compiler(root)
    return compiler.compile(root if definition is None else root["$defs"][definition])


def check(doc: Any, name: str, definition: str | None = None) -> list[SchemaError]:
    """Every way ``doc`` breaks schema ``name`` (or its ``$defs/<definition>``), in document
    order."""
    found: list = []
    try:
        validator(name, definition)(doc, None, found)
    except RecursionError:  # lists of lists thousands deep (compared for uniqueItems)
        found = [(None, "depth", doc, {"x-message": "is nested too deeply"}, None)]
    out = [SchemaError(_unwind(p), kw, v, s, detail) for p, kw, v, s, detail in found]
    out.sort(key=lambda e: tuple((0, x) if isinstance(x, int) else (1, x) for x in e.path))
    return out
