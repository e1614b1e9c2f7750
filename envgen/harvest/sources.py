"""``matrix/sources.toml`` (what to harvest, from where, and the ``[refresh]`` safety limits) and
the manylinux aliases of ``matrix/curated/policy.toml``; selecting indexes from ``--index`` /
``--all-indexes``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from envgen.errors import DataError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


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
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError as exc:
        raise DataError(f"{path} is missing", hint="restore it from the repository") from exc
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: invalid TOML ({exc})", hint="fix the syntax error") from exc


def load_sources(matrix_dir: Path) -> Sources:
    path = Path(matrix_dir) / "sources.toml"
    doc = _read_toml(path)
    try:
        indexes = tuple(
            Index(i["name"], i["url"], tuple(i.get("projects", ())), bool(i.get("default", False)))
            for i in doc["index"]
        )
        sources = Sources(
            indexes=indexes,
            torch=dict(doc.get("torch", {})),
            frameworks=tuple(doc.get("frameworks", ())),
            cuda_toolkits=tuple(doc.get("cuda_toolkits", ())),
            refresh=dict(doc.get("refresh", {})),
            path=path,
        )
    except (KeyError, TypeError) as exc:
        raise DataError(
            f"{path}: missing or malformed key {exc}", hint="see matrix/README.md"
        ) from exc
    names = [i.name for i in indexes]
    if len(set(names)) != len(names):
        raise DataError(f"{path}: duplicate index names", hint="give every [[index]] its own name")
    return sources


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
    path = Path(matrix_dir) / "curated" / "policy.toml"
    table = _read_toml(path).get("manylinux_aliases")
    if not isinstance(table, dict):
        raise DataError(f"{path}: no [manylinux_aliases] table", hint="see matrix/README.md")
    return {k: str(v) for k, v in table.items() if k not in ("source", "note")}


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
