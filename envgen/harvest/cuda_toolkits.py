"""CUDA toolkits from NVIDIA's nvcc wheels: max host gcc and clang, and the sm architectures of
ptxas.

One record per CUDA ``major.minor``, from the newest final patch release. Only two members are
read (from the whole wheel, downloaded and checked against its sha256, when it is below
``[refresh] max_whole_download_mb``; else by Range requests): ``…/crt/host_config.h``
(``#if __GNUC__ > N`` → max gcc N; the ``#if`` around ``#error -- unsupported clang
version!``, ``(__clang_major__ >= N) || …`` → max clang N - 1) and ``…/bin/ptxas`` (its
``compute_NN[a|f]`` table → ``sm_NN[a|f]``; ptxas also carries legacy ``sm_11``/``sm_20``
message strings, so ``sm_*`` strings are not used). Members are found by suffix: CUDA 12
wheels use ``nvidia/cuda_nvcc/``, CUDA 13 wheels ``nvidia/cu13/``. CUDA 13 moved
``host_config.h`` into a companion project (``host_config_project`` in sources.toml, same
version). The derived facts are cached by the
wheel's sha256, with how the bytes were checked; a record's ``verified`` is the weaker of its
nvcc wheel's and its companion's.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from envgen.errors import HarvestError
from envgen.harvest.fetcher import Fetcher
from envgen.harvest.integrity import weakest
from envgen.harvest.simple_index import FileLink
from envgen.harvest.tags import WheelInfo, is_final, parse_wheel
from envgen.harvest.torch_headers import guarded_errors
from envgen.versions import dotted_key

HOST_CONFIG = "/crt/host_config.h"
PTXAS = "/bin/ptxas"
_GNUC = re.compile(rb"#\s*if\s+__GNUC__\s*>\s*(\d+)")
# No leading \b: ptxas's string table can glue an entry to the previous string with no NUL
# between them (13.0.88 has b"...malloccompute_75\x00compute_80"), which \b would miss.
_COMPUTE = re.compile(rb"compute_(\d{2,3})([af]?)(?![0-9A-Za-z_])")
_CLANG_ERROR = re.compile(r"--\s*unsupported clang version", re.IGNORECASE)  # not "HOS"/"Grace"
_CLANG_ABOVE = re.compile(r"(?<![\w])__clang_major__\s*(>=?)\s*(\d+)")
# v3: written after the bytes were checked, with "verified"; v4: with "max_clang"
CACHE_MEMBER = "nvcc-facts-v4.json"


def max_gcc(host_config: bytes) -> int | None:
    found = [int(n) for n in _GNUC.findall(host_config)]
    return max(found) if found else None


def max_clang(host_config: bytes) -> int | None:
    """The newest host clang major nvcc accepts: from the ``#if`` branch holding ``#error --
    unsupported clang version!`` (the generic Linux check; Grace and HOS clang have their own
    messages), ``__clang_major__ >= N`` → N - 1, ``__clang_major__ > N`` → N. None when the
    header has no such check."""
    found = []
    for guard in guarded_errors(host_config.decode("utf-8", "replace")):
        if _CLANG_ERROR.match(guard.message):
            found += [int(n) - (op == ">=") for op, n in _CLANG_ABOVE.findall(guard.condition)]
    return max(found) if found else None


def archs(ptxas: bytes) -> list[str]:
    found = {(int(num), suffix.decode()) for num, suffix in _COMPUTE.findall(ptxas)}
    return [f"sm_{num}{suffix}" for num, suffix in sorted(found)]


def _toolkit_facts(members: dict[str, bytes]) -> dict[str, Any]:
    facts: dict[str, Any] = {"max_gcc": None, "max_clang": None, "archs": None}
    for name, data in members.items():
        if name.endswith(HOST_CONFIG):
            facts["max_gcc"], facts["max_clang"] = max_gcc(data), max_clang(data)
        else:
            facts["archs"] = archs(data) or None
    return facts


def wheel_facts(fetch: Fetcher, link: FileLink) -> dict[str, Any]:
    """``{"max_gcc": int|None, "max_clang": int|None, "archs": [..]|None, "verified": level}`` of
    one wheel (cached by sha256)."""
    return fetch.wheel_facts(link, CACHE_MEMBER, ("max_gcc", "max_clang", "archs"),
                             lambda n: n.endswith((HOST_CONFIG, PTXAS)), _toolkit_facts)


def _linux_wheels(links: list[FileLink], aliases) -> list[tuple[FileLink, WheelInfo]]:
    out = []
    for link in links:
        wheel = parse_wheel(link.filename, aliases) if link.filename.endswith(".whl") else None
        if wheel and wheel.arch and not link.yanked and is_final(wheel.version):
            out.append((link, wheel))
    return out


def _read_one(
    fetch: Fetcher,
    index: str,
    cfg: dict[str, Any],
    version: Version,
    wheels: list,
    companions: list,
) -> dict[str, Any]:
    mine = sorted(
        (w for w in wheels if w[1].version == version),
        key=lambda w: (w[1].arch != "x86_64", w[0].filename),
    )
    link, wheel = mine[0]
    facts = wheel_facts(fetch, link)
    gcc, clang, verified = facts["max_gcc"], facts["max_clang"], facts["verified"]
    if gcc is None:
        others = sorted(
            (w for w in companions if w[1].version == version and w[1].arch == wheel.arch),
            key=lambda w: w[0].filename,
        )
        if others:
            companion = wheel_facts(fetch, others[0][0])
            gcc, clang = companion["max_gcc"], companion["max_clang"]
            verified = weakest(verified, companion["verified"])
    if gcc is None or not facts["archs"]:
        raise HarvestError(
            f"{link.url}: no crt/host_config.h gcc limit or no ptxas compute_ table",
            hint="NVIDIA changed the wheel layout; adjust [[cuda_toolkits]] in sources.toml",
        )
    return {
        "cuda": f"{version.release[0]}.{version.release[1]}",
        "nvcc_package": canonicalize_name(cfg["project"]),
        "nvcc_version": str(version),
        "max_gcc": gcc,
        "max_clang": clang,
        "archs": facts["archs"],
        "platforms": sorted({w.platform for _, w in mine}),
        "source": fetch.source(link, index, verified),
    }


def harvest_toolkits(
    fetch: Fetcher,
    index: str,
    links_by_project: dict[str, list[FileLink]],
    cfgs: tuple[dict[str, Any], ...],
) -> list[dict[str, Any]]:
    jobs = []
    for cfg in cfgs:
        if cfg["project"] not in links_by_project:
            continue
        wheels = _linux_wheels(links_by_project[cfg["project"]], fetch.aliases)
        companions = _linux_wheels(
            links_by_project.get(cfg.get("host_config_project", ""), []), fetch.aliases
        )
        newest: dict[tuple[int, int], Version] = {}
        for _, wheel in wheels:
            minor = wheel.version.release[:2]
            if len(minor) == 2 and wheel.version > newest.get(minor, Version("0")):
                newest[minor] = wheel.version
        jobs += [(cfg, v, wheels, companions) for _, v in sorted(newest.items())]
    records = fetch.map(
        f"cuda toolkits ({index}): nvcc wheels", lambda job: _read_one(fetch, index, *job), jobs
    )
    best: dict[str, dict[str, Any]] = {}
    for record in records:  # the same minor from two projects: the newer nvcc wins
        old = best.get(record["cuda"])
        if old is None or Version(record["nvcc_version"]) > Version(old["nvcc_version"]):
            best[record["cuda"]] = record
    return [best[k] for k in sorted(best, key=dotted_key)]
