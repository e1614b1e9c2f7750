"""Framework releases (DeepSpeed, Megatron-Core, Colossal-AI): requirements per final release.

Metadata comes from a wheel when the release has one that installs on Linux (a pure wheel
first, then x86_64, then others; PEP 658 or Range reads), else from the sdist
(:mod:`envgen.harvest.sdist`). Yanked files are ignored; Windows/macOS wheels are ignored.

``requires_torch`` is the specifier of the torch requirement that applies without any extra
on Linux (markers evaluated for the wheel's Python, or the running interpreter's for sdists):
``""`` for an unpinned ``torch``, null when torch is not required at all.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envgen.harvest.fetcher import Fetcher
from envgen.harvest.metadata import applies, requirements, wheel_environment, wheel_metadata
from envgen.harvest.sdist import read_sdist
from envgen.harvest.simple_index import FileLink
from envgen.harvest.tags import WheelInfo, glibc_max, is_final, parse_sdist, parse_wheel
from envgen.versions import python_key


def requires_torch(lines, where: str, python: str, arch: str) -> str | None:
    env = wheel_environment(python, arch)
    found: list[SpecifierSet] = [
        r.specifier
        for r in requirements(list(lines), where)
        if canonicalize_name(r.name) == "torch" and applies(r, env)
    ]
    if not found:
        return None
    combined = SpecifierSet()
    for spec in found:
        combined &= spec
    return str(combined)


def _releases(
    links: list[FileLink], cfg: dict[str, Any], aliases
) -> dict[Version, dict[str, list]]:
    minimum = Version(str(cfg["min_version"]))
    releases: dict[Version, dict[str, list]] = defaultdict(lambda: {"wheels": [], "sdists": []})
    for link in links:
        if link.yanked:
            continue
        if link.filename.endswith(".whl"):
            wheel = parse_wheel(link.filename, aliases)
            if wheel is None or wheel.arch == "":  # not Linux, not pure
                continue
            version, bucket, item = wheel.version, "wheels", (link, wheel)
        else:
            parsed = parse_sdist(link.filename)
            if parsed is None or not link.filename.endswith(".tar.gz"):
                continue
            version, bucket, item = parsed[1], "sdists", (link, None)
        if is_final(version) and version >= minimum:
            releases[version][bucket].append(item)
    return releases


def _pick_wheel(wheels: list[tuple[FileLink, WheelInfo]]) -> tuple[FileLink, WheelInfo] | None:
    ranked = sorted(
        wheels,
        key=lambda w: (
            w[1].arch is not None,
            w[1].arch != "x86_64",
            [python_key(p) for p in w[1].pythons],
            w[0].filename,
        ),
    )
    return ranked[0] if ranked else None


def _read(
    fetch: Fetcher, project: str, index: str, version: Version, files: dict[str, list]
) -> dict[str, Any]:
    chosen = _pick_wheel(files["wheels"])
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if chosen is not None:
        link, wheel = chosen
        meta, how, verified = wheel_metadata(fetch.http, fetch.cache, link, fetch.whole_limit)
        lines, requires_python = meta.requires_dist, meta.requires_python
        python, arch = (wheel.pythons[0] if wheel.pythons else here), wheel.arch or "x86_64"
    else:
        link = sorted(files["sdists"], key=lambda s: s[0].filename)[0][0]
        sdist = read_sdist(fetch.http, fetch.cache, link)
        lines, requires_python, how = sdist.requires, sdist.requires_python, sdist.metadata_from
        verified = sdist.verified
        python, arch = here, "x86_64"
    binaries = [w for _, w in files["wheels"] if w.arch]
    pythons = sorted({p for w in binaries for p in w.pythons}, key=python_key)
    return {
        "framework": canonicalize_name(project),
        "version": str(version),
        "requires_python": requires_python or link.requires_python,
        "requires_torch": requires_torch(lines, link.url, python, arch),
        "wheel_python": pythons or None,
        "wheel_glibc": glibc_max([w.glibc for w in binaries if w.glibc]),
        "metadata_from": how,
        "source": fetch.source(link, index, verified),
    }


def harvest_framework(
    fetch: Fetcher, index: str, links: list[FileLink], cfg: dict[str, Any]
) -> list[dict[str, Any]]:
    releases = _releases(links, cfg, fetch.aliases)
    versions = sorted(releases)
    versions = [v for v in versions if releases[v]["wheels"] or releases[v]["sdists"]]
    return fetch.map(
        f"{cfg['project']} ({index}): releases",
        lambda v: _read(fetch, cfg["project"], index, v, releases[v]),
        versions,
    )


def framework_sort_key(record: dict[str, Any]) -> tuple:
    return (record["framework"], Version(record["version"]))
