"""matrix/curated/doctor.toml as typed values: the finding kinds (severity, fix pattern, root
cause, the real symptom and the citation of the rule), the study's fix patterns, which
platforms each framework supports, the system pieces builds need (with install commands per
OS family) and how to install a gcc major.

The thresholds themselves (nvcc's maximum gcc, a release's nvcc check, torch's CUDA, driver
floors, …) are the resolver's facts; this file holds only what the doctor adds to them.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgen.errors import DataError, UsageError
from envgen.schemas.check import check, where
from envgen.userfile import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILE = "curated/doctor.toml"


@dataclass(frozen=True)
class Kind:
    id: str
    severity: str
    pattern: str | None
    title: str
    source: str
    root_cause: str | None = None
    symptom: str | None = None


@dataclass(frozen=True)
class Pattern:
    id: str
    name: str
    source: str
    share: str | None = None


@dataclass(frozen=True)
class Requirement:
    id: str
    framework: str
    ops: tuple[str, ...]
    what: str
    source: str
    symptom: str | None = None
    install: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Catalog:
    kinds: dict[str, Kind]
    patterns: dict[str, Pattern]
    platforms: dict[str, tuple[tuple[str, ...], str, str | None]]  # fw → (platforms, src, note)
    requirements: dict[str, Requirement]
    compiler_install: dict[str, str]
    compiler_source: str
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    def kind(self, kind: str) -> Kind:
        try:
            return self.kinds[kind]
        except KeyError:
            raise DataError(f"{FILE} has no [[kind]] {kind!r}",
                            hint=f"add it (id, severity, pattern, title, source) to {FILE}"
                            ) from None

    def pattern_name(self, pattern: str | None) -> str | None:
        p = self.patterns.get(pattern or "")
        return p.name if p else None

    def section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name, {})
        return value if isinstance(value, dict) else {}


def _at(doc: dict, path: tuple) -> str:
    """``curated/doctor.toml kind[6].source (libaio_missing)``: where a schema error is, with
    the id (or framework) of the record it is in."""
    if not path:
        return FILE
    rows = doc.get(path[0])
    rec = (rows[path[1]] if len(path) > 1 and isinstance(path[1], int)
           and isinstance(rows, list) and path[1] < len(rows) else None)
    name = rec.get("id", rec.get("framework")) if isinstance(rec, dict) else None
    plain = isinstance(name, str) and 0 < len(name) <= 40 and name.isprintable()
    return f"{FILE} {where(path)}" + (f" ({name})" if plain else "")


@functools.lru_cache(maxsize=8)
def load_catalog(matrix_dir: Path) -> Catalog:
    """The doctor's data in ``matrix_dir``; a DataError naming the file and the field when it is
    missing or malformed."""
    path = Path(matrix_dir) / FILE
    try:
        doc = tomllib.loads(read_text(path, "matrix"))
    except FileNotFoundError:
        raise DataError(f"{path} is missing", hint="restore it from envgen's matrix/ "
                        "(`git checkout matrix/curated/doctor.toml`)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, UsageError) as exc:
        raise DataError(f"{path} cannot be read: {exc}", hint="fix its TOML syntax") from None
    errors = check(doc, "curated-doctor")
    if errors:
        shown = "\n  ".join(f"{_at(doc, e.path)}: {e.message()}" for e in errors[:5])
        more = f"\n  … and {len(errors) - 5} more" if len(errors) > 5 else ""
        raise DataError(f"{path} has {len(errors)} problem(s):\n  {shown}{more}",
                        hint=f"fix {FILE} (its header comment documents the fields; the schema "
                        "is envgen/schemas/curated-doctor.schema.json)")
    try:
        kinds = {k["id"]: Kind(id=k["id"], severity=k["severity"], pattern=k.get("pattern"),
                               title=k["title"], source=k["source"],
                               root_cause=k.get("root_cause"), symptom=k.get("symptom"))
                 for k in doc.get("kind", [])}
        patterns = {p["id"]: Pattern(id=p["id"], name=p["name"], source=p["source"],
                                     share=p.get("share"))
                    for p in doc.get("pattern", [])}
        platforms = {p["framework"]: (tuple(p["platforms"]), p["source"],
                                      p.get("unsupported_note"))
                     for p in doc.get("platform", [])}
        requirements = {r["id"]: Requirement(
            id=r["id"], framework=r.get("framework", "torch"), ops=tuple(r.get("ops", ())),
            what=r.get("what", r["id"]), source=r["source"], symptom=r.get("symptom"),
            install={k: v for k, v in r.get("install", {}).items() if isinstance(v, str)})
            for r in doc.get("requirement", [])}
        compilers = doc.get("compiler_install", {})
        root_causes = {r["id"] for r in doc.get("root_cause", [])}
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path}: a record lacks field {exc}",
                        hint="every [[kind]] needs id, severity, title, source; every "
                        "[[pattern]] id, name, source; every [[platform]] framework, "
                        "platforms, source; every [[requirement]] id, source") from None
    for k in kinds.values():
        if k.severity not in ("error", "warning", "info"):
            raise DataError(f"{path}: kind {k.id} has severity {k.severity!r}",
                            hint="use error, warning or info")
        if k.pattern and patterns and k.pattern not in patterns:
            raise DataError(f"{path}: kind {k.id} names pattern {k.pattern!r}, which no "
                            "[[pattern]] defines", hint="add the pattern or fix the id")
        if k.root_cause and k.root_cause not in root_causes:
            raise DataError(f"{path}: kind {k.id} names root_cause {k.root_cause!r}, which no "
                            "[[root_cause]] defines", hint="add the root cause or fix the id")
    return Catalog(kinds=kinds, patterns=patterns, platforms=platforms,
                   requirements=requirements,
                   compiler_install={k: v for k, v in compilers.items()
                                     if isinstance(v, str) and k not in ("source", "note")},
                   compiler_source=str(compilers.get("source", "")), raw=doc)
