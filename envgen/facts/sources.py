"""``matrix/sources.toml`` (what to harvest, from where, and the ``[refresh]`` safety limits) and
the manylinux aliases of ``matrix/curated/policy.toml``; selecting indexes from ``--index`` /
``--all-indexes``."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from packaging.version import InvalidVersion, Version

from envgen.errors import DataError, UsageError
from envgen.schemas.check import check, where
from envgen.schemas.read import read_toml

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass


@dataclass(frozen=True)
class Index:
    name: str
    url: str
    projects: tuple[str, ...]
    default: bool = False
    adhoc: bool = False  # given on the command line with a name sources.toml does not know


@dataclass(frozen=True)
class Sources:
    indexes: tuple[Index, ...]
    torch: dict[str, Any] = field(default_factory=dict)
    frameworks: tuple[dict[str, Any], ...] = ()
    cuda_toolkits: tuple[dict[str, Any], ...] = ()
    # [[os_packages]]: OS releases whose CUDA toolkit package is harvested (os_packages.py)
    os_packages: tuple[dict[str, Any], ...] = ()
    refresh: dict[str, Any] = field(default_factory=dict)  # raw [refresh]; see refresh_policy
    path: Path | None = None  # the sources.toml read

    def all_projects(self) -> tuple[str, ...]:
        names = [self.torch["project"]] if self.torch else []
        names += [f["project"] for f in self.frameworks]
        for toolkit in self.cuda_toolkits:
            names += [toolkit["project"]] + (
                [toolkit["host_config_project"]] if toolkit.get("host_config_project") else []
            )
        return tuple(names)


def _read_toml(path: Path) -> dict[str, Any]:
    return read_toml(path, fix=f"fix {path.name}", missing_hint="restore it from the repository")


def _schema_problems(doc: Any, schema: str, definition: str | None = None,
                     prefix: tuple = ()) -> list[tuple[str, str]]:
    """``(dotted key, message)`` of every way ``doc`` breaks the schema."""
    return [(where((*prefix, *e.path)), e.message()) for e in check(doc, schema, definition)]


def _raise(path: Path, problems: list[tuple[str, str]], hint: str) -> None:
    if not problems:
        return
    lines = [f"{key or '(top level)'}: {what}" for key, what in problems]
    source = f"{path}:{problems[0][0]}" if len(problems) == 1 and problems[0][0] else str(path)
    raise DataError(f"{path} has {len(problems)} problem(s):\n  " + "\n  ".join(lines),
                    hint=hint, source=source)


def _regex_problems(doc: dict) -> list[tuple[str, str]]:
    """The [torch] patterns must compile; cuda_local_pattern needs (?P<major>) (?P<minor>)."""
    torch = doc.get("torch")
    if not isinstance(torch, dict):
        return []
    out = []
    patterns = [("torch.cuda_local_pattern", torch.get("cuda_local_pattern"))]
    pins = torch.get("pins")
    if isinstance(pins, dict):
        patterns += [(where(("torch", "pins", k)), v) for k, v in pins.items()]
    for key, pattern in patterns:
        if not isinstance(pattern, str):
            continue
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            out.append((key, f"{pattern!r} is not a regular expression ({exc})"))
            continue
        if key == "torch.cuda_local_pattern" and not {"major", "minor"} <= set(
                compiled.groupindex):
            out.append((key, f"{pattern!r} has no (?P<major>…) and (?P<minor>…) groups"))
    return out


def _version_problems(doc: dict) -> list[tuple[str, str]]:
    """Every ``min_version`` must parse."""
    tables: list[tuple[tuple, Any]] = [(("torch",), doc.get("torch"))]
    frameworks = doc.get("frameworks")
    tables += [(("frameworks", i), fw)
               for i, fw in enumerate(frameworks if isinstance(frameworks, list) else ())]
    out = []
    for path, table in tables:
        value = table.get("min_version") if isinstance(table, dict) else None
        if isinstance(value, str):
            try:
                Version(value)
            except InvalidVersion:
                out.append((where((*path, "min_version")), f"{value!r} is not a PEP 440 version"))
    return out


DEV_PACKAGE = "nvidia-cuda-dev"  # [[os_packages]] dev_package when not given


def _os_package_problems(doc: dict) -> list[tuple[str, str]]:
    """Each OS id at most once in [[os_packages]] (one toolkit record per OS)."""
    rows = doc.get("os_packages")
    ids = [r.get("os") for r in (rows if isinstance(rows, list) else ())
           if isinstance(r, dict) and isinstance(r.get("os"), str)]
    return [("os_packages", f"duplicate os {name!r}: one [[os_packages]] table per OS")
            for name in sorted({n for n in ids if ids.count(n) > 1})]


SOURCES_HINT = ("fix matrix/sources.toml (its header comment and matrix/README.md document every "
                "key; the schema is envgen/schemas/sources.schema.json)")


def load_sources(matrix_dir: Path) -> Sources:
    """matrix/sources.toml, checked against envgen/schemas/sources.schema.json and for what a
    schema cannot say (patterns that compile, versions that parse, distinct index names)."""
    path = Path(matrix_dir) / "sources.toml"
    doc = _read_toml(path)
    problems = _schema_problems(doc, "sources")
    bad = {key for key, _ in problems}
    problems += [p for p in _regex_problems(doc) + _version_problems(doc) if p[0] not in bad]
    rows = doc.get("index")
    names = [i.get("name") for i in (rows if isinstance(rows, list) else ())
             if isinstance(i, dict) and isinstance(i.get("name"), str)]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(("index", f"duplicate index name {name!r}: give every [[index]] its "
                         "own name"))
    problems += _os_package_problems(doc)
    _raise(path, problems, SOURCES_HINT)
    indexes = tuple(
        Index(i["name"], i["url"], tuple(i.get("projects", ())), i.get("default", False))
        for i in doc["index"]
    )
    return Sources(
        indexes=indexes,
        torch=dict(doc.get("torch", {})),
        frameworks=tuple(doc.get("frameworks", ())),
        cuda_toolkits=tuple(doc.get("cuda_toolkits", ())),
        os_packages=tuple({"dev_package": DEV_PACKAGE, **row}
                          for row in doc.get("os_packages", ())),
        refresh=dict(doc.get("refresh", {})),
        path=path,
    )


@dataclass(frozen=True)
class RefreshPolicy:
    """``[refresh]`` of sources.toml: the limits that keep a bad index answer out of matrix/."""

    max_removed_share: float  # of a harvested file's records from the harvested indexes
    max_whole_download_mb: float  # wheels up to this size are downloaded whole and hashed

    @property
    def whole_limit(self) -> int:
        return int(self.max_whole_download_mb * 1024 * 1024)


REFRESH_EXAMPLE = "[refresh] with max_removed_share = 0.05 and max_whole_download_mb = 64"


def refresh_policy(sources: Sources) -> RefreshPolicy:
    """The validated ``[refresh]`` table (only ``envgen matrix update`` needs it)."""
    where = str(sources.path or "matrix/sources.toml")
    values = {}
    for key, low, high in (("max_removed_share", 0.0, 1.0), ("max_whole_download_mb", 0.0, None)):
        value = sources.refresh.get(key)
        source = f"{where}:refresh.{key}"
        if value is None:
            raise DataError(
                f"{where} has no [refresh] {key}",
                hint=f"add {REFRESH_EXAMPLE} (see matrix/README.md)",
                source=source,
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            low <= value and (high is None or value <= high)
        ):
            bounds = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
            raise DataError(
                f"{where}: [refresh] {key} = {value!r} is not a number {bounds}",
                hint=f"use e.g. {REFRESH_EXAMPLE} (see matrix/README.md)",
                source=source,
            )
        values[key] = float(value)
    return RefreshPolicy(**values)


def load_manylinux_aliases(matrix_dir: Path) -> dict[str, str]:
    """``[manylinux_aliases]`` of curated/policy.toml (checked against that table's part of
    envgen/schemas/curated-policy.schema.json)."""
    path = Path(matrix_dir) / "curated" / "policy.toml"
    table = _read_toml(path).get("manylinux_aliases")
    if not isinstance(table, dict):
        raise DataError(f"{path}: no [manylinux_aliases] table", hint="see matrix/README.md",
                        source=f"{path}:manylinux_aliases")
    problems = _schema_problems(table, "curated-policy", "manylinux_aliases",
                                ("manylinux_aliases",))
    _raise(path, problems, "fix [manylinux_aliases] in matrix/curated/policy.toml (alias = "
           "\"glibc major.minor\", e.g. manylinux2014 = \"2.17\")")
    return {k: v for k, v in table.items() if k not in ("source", "note")}


def select_indexes(
    sources: Sources, requested: list[str] | tuple[str, ...] = (), all_indexes: bool = False
) -> list[Index]:
    """Default indexes, plus ``NAME`` (a configured index), plus ``NAME=URL`` (a mirror: replaces
    the URL of the configured index of that name, or adds an ad-hoc index harvesting every
    configured project); ``all_indexes`` selects every configured index."""
    by_name = {i.name: i for i in sources.indexes}
    chosen = {i.name: i for i in sources.indexes if i.default or all_indexes}
    for item in requested:
        name, sep, url = item.partition("=")
        name, url = name.strip(), url.strip()
        if not sep:
            if name not in by_name:
                raise UsageError(
                    f"unknown index {name!r}",
                    hint=f"known: {', '.join(sorted(by_name))}; or pass NAME=URL for a mirror",
                    source="--index",
                )
            chosen[name] = by_name[name]
            continue
        parsed = urlparse(url)
        if not name or parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(
                f"bad --index {item!r}", hint="use NAME=URL, e.g. pypi=https://mirror/simple/",
                source="--index",
            )
        if name in by_name:
            base = by_name[name]
            chosen[name] = Index(name, url, base.projects, base.default)
        else:
            chosen[name] = Index(name, url, sources.all_projects(), False, adhoc=True)
    order = [i.name for i in sources.indexes]
    return sorted(
        chosen.values(),
        key=lambda i: (order.index(i.name) if i.name in order else len(order), i.name),
    )
