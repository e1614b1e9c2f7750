"""Validate a parsed data file (JSON, or TOML read with tomllib) against its JSON Schema.

Input: a document and the name of a schema in this folder (``<name>.schema.json``, draft
2020-12), optionally one of its ``$defs``. Output: every way the document breaks the schema, as
:class:`SchemaError` values (the JSON path, the keyword, the value, the subschema), in document
order; :meth:`SchemaError.message` says what is wrong using the subschema's ``description`` (or
``x-message``), e.g. ``'x' is not a CUDA major.minor ("12.1")``.

Two libraries, each where it is fast (``benchmarks/bench_schemas.py`` measures both):
``fastjsonschema`` decides whether a document is valid — it compiles a schema into Python code,
~8× faster than ``jsonschema`` on the matrix and ~20× on a record — and stops at the first
problem; only when a document is invalid does ``jsonschema`` (imported then) list every problem
with its path. So both must agree: a schema may use only the keywords both implement alike
(draft-07, which fastjsonschema implements, and 2020-12 differ elsewhere).

Hand-written here, each for a measured reason: the keyword check (:func:`supported`: the two
libraries must agree); rewriting a schema before fastjsonschema compiles it (:func:`_inline`:
its code then checks the matrix ~1.7× faster and takes a third of the time to compile); and a
cache of the code it generates (``<cache>/schemas/``, named by the schema's content; no library
keeps it, and generating and compiling it costs 1–15 ms a schema a process). The cache only
ever saves time.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent

Path_ = tuple[str | int, ...]

FORMAT = 4  # bump when the way the fast validators are generated changes
KEEP = 100  # compiled validators kept in the cache (envgen ships ~20 schemas)
# keywords both libraries implement alike; ``$ref`` only local and without sibling keywords
# (draft-07 ignores them, 2020-12 applies them), ``items`` only as one schema
_KEYWORDS = frozenset({
    "type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum",
    "minItems", "maxItems", "uniqueItems", "items", "properties", "required",
    "additionalProperties", "patternProperties", "propertyNames", "allOf", "anyOf", "oneOf",
    "not", "$ref"})
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description",
                          "examples"})  # and any "x-…" (x-message)
_ONE = ("items", "additionalProperties", "propertyNames", "not")  # keywords holding a schema
_MANY = ("allOf", "anyOf", "oneOf")  # … a list of schemas
_NAMED = ("properties", "patternProperties", "$defs")  # … a name → schema table
# errors at the same place: the type first, so a wrong type is reported before anything finer
_RANK = {kw: i for i, kw in enumerate((
    "type", "const", "enum", "pattern", "minLength", "maxLength", "minimum", "maximum",
    "minItems", "maxItems", "uniqueItems", "items", "required", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "allOf", "anyOf", "oneOf",
    "not", "false"))}


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


@cache
def load_schema(name: str) -> dict:
    """The parsed ``<name>.schema.json``."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


class Validator:
    """One schema, compiled for both libraries: :meth:`is_valid` (fastjsonschema, at once)
    and :meth:`errors` (jsonschema, built the first time a document is invalid)."""

    def __init__(self, schema: dict) -> None:
        self.schema = schema
        self._fast, self._invalid = _fast(schema)
        self._full: Any = None

    def is_valid(self, doc: Any) -> bool:
        try:
            self._fast(doc)
        except self._invalid:
            return False
        return True

    def errors(self, doc: Any) -> list[SchemaError]:
        """Every problem, sorted by path (list indexes before keys), the type first."""
        if self._full is None:
            self._full = _full_validator(self.schema)
        found = [_error(e) for e in self._full.iter_errors(doc)]
        found.sort(key=lambda e: (tuple((0, x) if isinstance(x, int) else (1, x)
                                        for x in e.path), _RANK.get(e.keyword, 99)))
        return found

    def check(self, doc: Any) -> list[SchemaError]:
        """Every way ``doc`` breaks the schema; ``[]`` when it is valid."""
        try:
            return [] if self.is_valid(doc) else self.errors(doc)
        except RecursionError:  # lists of lists thousands deep (compared for uniqueItems)
            return [SchemaError((), "depth", doc, {"x-message": "is nested too deeply"})]


@cache
def validator(name: str, definition: str | None = None) -> Validator:
    """The compiled schema ``name`` (or its ``$defs/<definition>``), once per process."""
    root = load_schema(name)
    if definition is None:
        return Validator(root)
    root["$defs"][definition]  # a KeyError for a definition that is not there
    keep = {k: root[k] for k in ("$schema", "$id", "$defs") if k in root}
    return Validator({**keep, "$ref": f"#/$defs/{definition}"})


def check(doc: Any, name: str, definition: str | None = None) -> list[SchemaError]:
    """Every way ``doc`` breaks schema ``name`` (or its ``$defs/<definition>``), in document
    order."""
    return validator(name, definition).check(doc)


# ------------------------------------------------------------------------------ compiling

def supported(schema: Any, at: str = "#") -> None:
    """ValueError naming the first keyword of ``schema`` that the two libraries might read
    differently (see the module docstring); the ``$ref``-only root of a definition is fine."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise ValueError(f"{at}: a schema must be an object or a boolean")
    unknown = sorted(k for k in schema if k not in _KEYWORDS and k not in _ANNOTATIONS
                     and not k.startswith("x-"))
    if unknown:
        raise ValueError(f"{at}: schema keyword(s) {unknown} are not supported")
    ref = schema.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith("#/")):
        raise ValueError(f"{at}: only local $ref are supported, not {ref!r}")
    if "const" in schema and "enum" in schema:
        raise ValueError(f"{at}: const and enum together (keep one)")
    if ref is not None and len(schema.keys() & _KEYWORDS) > 1:
        raise ValueError(f"{at}: $ref with other keywords beside it (wrap them in allOf)")
    for kw in _ONE:
        if kw in schema:
            if kw == "items" and not isinstance(schema[kw], (dict, bool)):
                raise ValueError(f"{at}/items: only one schema for every item is supported")
            supported(schema[kw], f"{at}/{kw}")
    for kw in _MANY:
        for i, sub in enumerate(schema.get(kw, ())):
            supported(sub, f"{at}/{kw}/{i}")
    for kw in _NAMED:
        for key, sub in schema.get(kw, {}).items():
            supported(sub, f"{at}/{kw}/{key}")


class Invalid(ValueError):
    """What the generated validators raise for an invalid document (in place of
    fastjsonschema's exceptions, which take the same arguments)."""

    def __init__(self, message: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(message)


class _NoDecimal:
    """The generated code's ``Decimal`` (its number checks accept one): no value here is a
    Decimal, as documents come from json and tomllib, which make floats."""


# The generated code's first lines import these; they are given to it instead, so that running
# a cached validator does not import fastjsonschema (~20 ms with typing and decimal).
_IMPORTS = ("from decimal import Decimal\n",
            "from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException\n")
_GIVEN = {"Decimal": _NoDecimal, "JsonSchemaValueException": Invalid,
          "JsonSchemaValuesException": Invalid}


def _generator_version() -> str:
    """fastjsonschema's version (part of the cache key), read from its version.py without
    importing the package; imported when that file cannot be found or read."""
    loaded = sys.modules.get("fastjsonschema")
    if loaded is not None:  # the one that generates the code (conda-lock vendors another)
        return loaded.VERSION
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("fastjsonschema")
    for folder in (spec.submodule_search_locations or ()) if spec else ():
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as fh:
                found = re.search(r"""^VERSION\s*=\s*["']([^"']+)["']""", fh.read(), re.M)
        except OSError:
            continue
        if found:
            return found[1]
    import fastjsonschema

    return fastjsonschema.VERSION


def _fast(schema: dict) -> tuple[Callable[[Any], Any], type[Exception]]:
    """fastjsonschema's validator of ``schema`` and the exception it raises for an invalid
    document: the code it generates, compiled, from the user's cache (written the first time;
    marshal, as the bytecode cache of imports may be off: PYTHONDONTWRITEBYTECODE). The code
    runs with :data:`_GIVEN` for the names it would import."""
    text = json.dumps(schema, sort_keys=True, ensure_ascii=True)
    raw = f"{FORMAT} {_generator_version()} {sys.version} {text}".encode()
    try:
        path: Path | None = _cache_dir() / f"{hashlib.sha256(raw).hexdigest()[:32]}.marshal"
    except Exception:  # no usable cache directory (a bad ENVGEN_CACHE_DIR): no cache
        path = None
    try:
        name, code = marshal.loads(path.read_bytes()) if path else (None, None)
    except Exception:  # unreadable or damaged: generate it again
        name = code = None
    if code is None:
        import fastjsonschema

        supported(schema)
        source = fastjsonschema.compile_to_code(_inline(schema), use_default=False,
                                                detailed_exceptions=False)
        for line in _IMPORTS:  # (code that imports otherwise keeps its imports, and works)
            source = source.replace(line, "", 1)
        name = re.search(r"^def (\w+)\(", source, re.M)[1]  # the root's function comes first
        code = compile(source, f"<schema {schema.get('$id')}>", "exec")
        if path is not None:
            _store(path, marshal.dumps((name, code)))
    namespace: dict[str, Any] = dict(_GIVEN)
    exec(code, namespace)
    return namespace[name], namespace["JsonSchemaValueException"]


def _inline(schema: dict) -> dict:
    """``schema`` as fastjsonschema gets it: each (local) ``$ref`` replaced by what it points
    to — its code for a ``$ref`` formats the path of every value passed to it; inlined, the
    matrix is checked ~1.7× faster — and each ``const`` as the same one-value ``enum`` (its
    short errors cannot word a ``const``; the long ones make 2.5× the code to compile). A copy:
    fastjsonschema rewrites the ``$ref``s of the schema it is given."""
    def resolve(ref: str) -> Any:
        node: Any = schema
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(x, seen) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: v if k in ("enum", "const", "$defs") else walk(v, seen)
               for k, v in node.items() if k != "$ref"}
        if "const" in out:
            out["enum"] = [out.pop("const")]
        ref = node.get("$ref")
        if ref is None:
            return out
        if ref in seen:
            raise ValueError(f"a recursive $ref ({ref}) is not supported")
        return {**walk(resolve(ref), (*seen, ref)), **out}

    inlined = walk(schema, ())
    inlined.pop("$defs", None)
    return inlined


def _cache_dir() -> Path:
    from envgen.config import cache_root

    return cache_root() / "schemas"


def _store(path: Path, data: bytes) -> None:
    """Write one compiled validator; the oldest go when there are more than KEEP (each edit
    of a schema, each upgrade, adds one)."""
    from envgen.atomic import write_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, data, durable=False)
        kept = sorted(path.parent.glob("*.marshal"), key=lambda p: p.stat().st_mtime_ns,
                      reverse=True)
        for old in kept[KEEP:]:
            old.unlink(missing_ok=True)
    except Exception:  # a read-only or full cache: the next run generates it again
        pass


@cache
def _validator_class() -> type:
    """Draft 2020-12 as jsonschema implements it, except that ``required`` names the missing
    key in ``validator_value`` and ``propertyNames`` reports the key that failed."""
    from jsonschema import Draft202012Validator, ValidationError
    from jsonschema.validators import extend

    def required(validator, names, instance, schema):
        if validator.is_type(instance, "object"):
            for name in names:
                if name not in instance:
                    yield ValidationError(f"{name!r} is a required property",
                                          validator_value=name)

    def property_names(validator, names, instance, schema):
        if validator.is_type(instance, "object"):
            for key in instance:
                for error in validator.descend(instance=key, schema=names):
                    yield ValidationError(error.message, validator="propertyNames",
                                          instance=key, schema=error.schema)

    return extend(Draft202012Validator, {"required": required,
                                         "propertyNames": property_names})


def _full_validator(schema: dict) -> Any:
    from jsonschema.validators import validator_for

    if validator_for(schema).__name__ != "Draft202012Validator":
        raise ValueError(f"{schema.get('$id')}: envgen's schemas are draft 2020-12")
    return _validator_class()(schema)


def _error(e: Any) -> SchemaError:
    """A jsonschema error as a SchemaError."""
    path = tuple(e.absolute_path)
    if e.validator is None:  # the schema `false`
        return SchemaError(path, "false", e.instance, {})
    schema = e.schema if isinstance(e.schema, dict) else {}
    detail = None
    if e.validator == "required":
        detail = e.validator_value
    elif e.validator == "additionalProperties":
        known = schema.get("properties", {})
        patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
        detail = tuple(k for k in e.instance
                       if k not in known and not any(p.search(k) for p in patterns))
    return SchemaError(path, e.validator, e.instance, schema, detail)
