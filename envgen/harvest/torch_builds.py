"""torch builds: one record per release × CUDA variant × platform × identical facts.

Which CUDA a build targets comes from its local version label (``+cu121`` → 12.1, pattern in
``sources.toml``) or else from the pinned CUDA runtime requirement (``nvidia-cuda-runtime-cu12
==12.4.127`` → 12.4; CUDA 13 builds pin ``cuda-toolkit[cudart,…]==13.0.2`` instead). No label
and no pin: a CPU build (``cuda`` null). Requirement markers are evaluated for each wheel's own
Python and platform.

Every record also gets ``headers``: what the release's own files say about building against it
(C++ standard, host compiler minimums, ``cpp_extension`` defaults; :mod:`envgen.harvest.
torch_headers`), read from one wheel per release (:func:`header_wheel`: the files read are
identical across a release's builds: on PyPI's 2.5.1 the cp310 and cp312 x86_64 wheels have the
same CRC-32 for every ``torch/include`` member and ``cpp_extension.py``), with that wheel's
``source``; ``null`` when no wheel of the release could be read (reported through
``fetch.progress``, the harvest goes on).

Each CUDA build record also gets ``archs``: the ``-gencode`` targets that build was compiled
for (``{"sm": [...], "ptx": [...], "where", "source"}``), read from its own first wheel's
``ATen/cuda/CUDAConfig.h`` (:mod:`envgen.harvest.torch_archs`); ``null`` for CPU builds and
when the wheel cannot be read (reported the same way).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envgen.errors import HarvestError, NetworkError
from envgen.harvest import integrity
from envgen.harvest.fetcher import Fetcher
from envgen.harvest.metadata import applies, requirements, wheel_environment, wheel_metadata
from envgen.harvest.simple_index import FileLink
from envgen.harvest.tags import WheelInfo, is_final, parse_wheel
from envgen.harvest.torch_archs import read_build_archs
from envgen.harvest.torch_headers import FACT_KEYS, read_header_facts
from envgen.versions import python_key

PIN_FIELDS = ("cuda_runtime", "nccl", "cudnn", "triton")


def pin_value(requirement: Requirement) -> str:
    """``==1.2.3`` → ``1.2.3``; any other specifier is kept as written (``~=3.9.0``)."""
    specs = list(requirement.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return specs[0].version
    return str(requirement.specifier)


def cuda_of_pin(requirement: Requirement) -> str | None:
    for spec in requirement.specifier:
        try:
            release = Version(spec.version.rstrip(".*")).release
        except ValueError:
            continue
        if len(release) >= 2:
            return f"{release[0]}.{release[1]}"
    return None


def select_wheels(
    links: list[FileLink], cfg: dict[str, Any], aliases
) -> list[tuple[FileLink, WheelInfo]]:
    minimum = Version(str(cfg["min_version"]))
    platforms = set(cfg["platforms"])
    chosen = []
    for link in links:
        if link.yanked or not link.filename.endswith(".whl"):
            continue
        wheel = parse_wheel(link.filename, aliases)
        if wheel is None or wheel.platform not in platforms or not wheel.pythons:
            continue
        if canonicalize_name(wheel.project) != canonicalize_name(cfg["project"]):
            continue
        if not is_final(wheel.version) or Version(wheel.version.public) < minimum:
            continue
        chosen.append((link, wheel))
    return chosen


def build_facts(
    wheel: WheelInfo, python: str, reqs: list[Requirement], cfg: dict[str, Any]
) -> dict[str, Any] | None:
    """The facts of one wheel for one of its Pythons; None for a variant we do not track."""
    local = wheel.version.local
    env = wheel_environment(python, wheel.arch or "")
    active = [r for r in reqs if applies(r, env)]
    pins: dict[str, Requirement | None] = dict.fromkeys(PIN_FIELDS)
    for field, pattern in cfg["pins"].items():
        for req in active:
            if re.fullmatch(pattern, canonicalize_name(req.name)) and pins.get(field) is None:
                pins[field] = req
    cuda, cuda_from = None, "none"
    if local:
        match = re.fullmatch(cfg["cuda_local_pattern"], local)
        if match:
            cuda, cuda_from = f"{int(match['major'])}.{int(match['minor'])}", f"local:{local}"
        elif local in cfg.get("cpu_local_labels", ()):
            cuda_from = f"local:{local}"
        else:
            return None  # e.g. +rocm6.1: not a CUDA build
    elif pins["cuda_runtime"] is not None:
        runtime = pins["cuda_runtime"]
        cuda = cuda_of_pin(runtime)
        cuda_from = f"{canonicalize_name(runtime.name)}{runtime.specifier}"
    return {
        "version": wheel.version.public,
        "local": local,
        "cuda": cuda,
        "cuda_from": cuda_from,
        "platform": wheel.platform,
        "wheel_tag": wheel.platform_tag,
        "glibc": wheel.glibc,
        **{field: pin_value(req) if req is not None else None for field, req in pins.items()},
    }


def header_wheel(wheels: list[tuple[FileLink, WheelInfo]]) -> FileLink:
    """The wheel a release's headers are read from: x86_64 first, then the oldest Python (a
    wheel for a newer Python may be uploaded later; the choice should not move), then the
    file name."""
    return min(
        wheels,
        key=lambda w: (
            w[1].arch != "x86_64",
            min(python_key(p) for p in w[1].pythons),
            w[0].filename,
        ),
    )[0]


def release_headers(fetch: Fetcher, index: str, link: FileLink) -> dict[str, Any] | None:
    """``headers`` of the builds of one release: the facts read from ``link`` and its
    ``source``; None (reported through ``fetch.progress``) when the wheel cannot be read.
    Offline cache misses and sha256 mismatches are not swallowed: they stop the refresh like
    everywhere else."""
    if fetch.cache.offline or fetch.http is None:
        facts = read_header_facts(fetch, link)
    else:
        try:
            facts = read_header_facts(fetch, link)
        except (HarvestError, NetworkError) as exc:
            if exc.hint == integrity.MISMATCH_HINT:
                raise
            fetch.progress(
                f"warning: torch headers of {link.url} not read, headers: null ({exc.message})"
            )
            return None
    headers = {key: facts[key] for key in FACT_KEYS}
    headers["source"] = fetch.source(link, index, facts["verified"])
    return headers


def build_archs(fetch: Fetcher, index: str, link: FileLink) -> dict[str, Any] | None:
    """``archs`` of a CUDA build, read from ``link``; None (reported) when unreadable.
    Offline cache misses and sha256 mismatches stop the refresh, as everywhere."""
    if fetch.cache.offline or fetch.http is None:
        archs, verified = read_build_archs(fetch, link)
    else:
        try:
            archs, verified = read_build_archs(fetch, link)
        except (HarvestError, NetworkError) as exc:
            if exc.hint == integrity.MISMATCH_HINT:
                raise
            fetch.progress(f"warning: GPU archs of {link.url} not read, archs: null "
                           f"({exc.message})")
            return None
    if archs is None:
        return None
    return {**archs, "source": fetch.source(link, index, verified)}


def harvest_torch(
    fetch: Fetcher, index: str, links: list[FileLink], cfg: dict[str, Any]
) -> list[dict[str, Any]]:
    wheels = select_wheels(links, cfg, fetch.aliases)
    metas = fetch.map(
        f"{cfg['project']} ({index}): metadata files",
        lambda item: wheel_metadata(fetch.http, fetch.cache, item[0], fetch.whole_limit),
        wheels,
    )
    groups: dict[str, dict[str, Any]] = {}
    releases: dict[str, list[tuple[FileLink, WheelInfo]]] = {}
    for (link, wheel), (meta, _how, verified) in zip(wheels, metas, strict=True):
        reqs = requirements(meta.requires_dist, link.url)
        for python in wheel.pythons:
            facts = build_facts(wheel, python, reqs, cfg)
            if facts is None:
                continue
            mine = releases.setdefault(facts["version"], [])
            if (link, wheel) not in mine:
                mine.append((link, wheel))
            facts["requires_python"] = meta.requires_python or link.requires_python
            facts["index"] = index
            key = json.dumps(facts, sort_keys=True)
            record = groups.setdefault(key, {**facts, "python": [], "sources": []})
            if python not in record["python"]:
                record["python"].append(python)
            if all(s["url"] != link.url for s in record["sources"]):
                record["sources"].append(fetch.source(link, index, verified))
    versions = sorted(releases, key=Version)
    found = fetch.map(
        f"{cfg['project']} ({index}): header files",
        lambda version: release_headers(fetch, index, header_wheel(releases[version])),
        versions,
    )
    headers = dict(zip(versions, found, strict=True))
    records = list(groups.values())
    for record in records:
        record["python"].sort(key=python_key)
        record["sources"].sort(key=lambda s: s["url"])
        record["headers"] = copy.deepcopy(headers[record["version"]])  # no shared dicts
    cuda = [r for r in records if r["cuda"]]
    archs = fetch.map(
        f"{cfg['project']} ({index}): GPU arch lists",
        lambda r: build_archs(fetch, index, _link(links, r["sources"][0]["url"])),
        cuda,
    )
    for record, found in zip(cuda, archs, strict=True):
        record["archs"] = found
    for record in records:
        record.setdefault("archs", None)
    return records


def _link(links: list[FileLink], url: str) -> FileLink:
    return next(link for link in links if link.url == url)


def torch_sort_key(record: dict[str, Any]) -> tuple:
    return (
        Version(record["version"]),
        record["local"] or "",
        record["index"],
        record["platform"],
        record["wheel_tag"],
        [python_key(p) for p in record["python"]],
        json.dumps(record, sort_keys=True),
    )
