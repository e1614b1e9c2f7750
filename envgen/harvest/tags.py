"""Wheel and sdist file names: platform tags, minimum glibc, Python versions.

The manylinux legacy aliases (manylinux1 → 2.5, …) are data, read from
``matrix/curated/policy.toml`` ``[manylinux_aliases]`` and passed in by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from envgen.versions import dotted_key

_PEP600 = re.compile(r"^manylinux_(\d+)_(\d+)_(?P<arch>.+)$")
_LEGACY = re.compile(r"^(?P<alias>manylinux\d+)_(?P<arch>.+)$")
_BARE = re.compile(r"^linux_(?P<arch>.+)$")
_CPYTHON = re.compile(r"^cp(\d)(\d+)$")


@dataclass(frozen=True)
class WheelInfo:
    filename: str
    project: str
    version: Version
    pythons: tuple[str, ...]  # "3.11", "3.13t"; empty for py3/py2.py3 (any Python)
    platform_tag: str  # as published, e.g. "manylinux_2_24_x86_64.manylinux_2_28_x86_64"
    arch: str | None  # "x86_64" / "aarch64" for Linux wheels, None for "any", "" for others
    glibc: str | None  # minimum glibc; None for bare linux_* tags and pure wheels

    @property
    def platform(self) -> str | None:
        return f"linux-{self.arch}" if self.arch else None


def linux_tag(tag: str, aliases: Mapping[str, str]) -> tuple[str, str | None] | None:
    """``(arch, min_glibc)`` of a Linux platform tag; ``None`` for other platforms."""
    match = _PEP600.match(tag)
    if match:
        return match["arch"], f"{match[1]}.{match[2]}"
    match = _LEGACY.match(tag)
    if match and match["alias"] in aliases:
        return match["arch"], str(aliases[match["alias"]])
    match = _BARE.match(tag)
    if match:
        return match["arch"], None
    return None


def python_version(interpreter: str, abi: str) -> str | None:
    """``cp311``/``cp311`` → ``3.11``; ABI ``cp313t`` → ``3.13t``; ``py3`` → None."""
    match = _CPYTHON.match(interpreter)
    if not match:
        return None
    version = f"{match[1]}.{match[2]}"
    return version + "t" if abi.endswith("t") and abi.startswith("cp") else version


def parse_wheel(filename: str, aliases: Mapping[str, str]) -> WheelInfo | None:
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    pythons = sorted({p for t in tags if (p := python_version(t.interpreter, t.abi))})
    platforms = sorted({t.platform for t in tags})
    arch: str | None = ""
    glibc: str | None = None
    if platforms == ["any"]:
        arch = None
    else:
        found = [linux_tag(p, aliases) for p in platforms]
        if found and all(found):
            arches = {f[0] for f in found if f}
            if len(arches) == 1:
                arch = arches.pop()
                versions = [f[1] for f in found if f and f[1]]
                # The wheel installs where ANY of its tags is satisfied: the lowest glibc wins.
                glibc = min(versions, key=dotted_key) if versions else None
    stem = filename[: -len(".whl")]
    platform_tag = stem.split("-")[-1]
    return WheelInfo(filename, str(name), version, tuple(pythons), platform_tag, arch, glibc)


def parse_sdist(filename: str) -> tuple[str, Version] | None:
    try:
        name, version = parse_sdist_filename(filename)
    except InvalidSdistFilename:
        return None
    return str(name), version


def is_final(version: Version) -> bool:
    return not (version.is_prerelease or version.is_devrelease)


def glibc_max(values: list[str]) -> str | None:
    return max(values, key=dotted_key) if values else None
