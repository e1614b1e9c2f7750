"""Framework releases (DeepSpeed, Megatron-Core, Colossal-AI): requirements per final release.

Metadata comes from a wheel when the release has one that installs on Linux (a pure wheel
first, then x86_64, then others; PEP 658 or Range reads), else from the sdist
(:mod:`envgen.harvest.sdist`). Yanked files are ignored; Windows/macOS wheels are ignored.

``requires_torch`` is the specifier of the torch requirement that applies without any extra
on Linux (markers evaluated for the wheel's Python, or the running interpreter's for sdists):
``""`` for an unpinned ``torch``, null when torch is not required at all.

``files`` lists the release's real files (whether a non-yanked sdist exists; every non-yanked
Linux or pure wheel with its Python versions, ABI, platform and glibc) so a resolver can refuse a
release with no file for its target. ``build`` holds facts read from the release's own build
code by the reader :data:`BUILD_READERS` registers for the framework (DeepSpeed: its
``op_builder``, :mod:`envgen.harvest.op_builder`), from the sdist if there is one, else a wheel:
``{"read": true, "from", "source", "error": null, ...facts}``; a release whose files cannot be
read (404, corrupt archive, no build file) gets ``{"read": false, "error": "..."}`` here and
:mod:`envgen.harvest.update` keeps its previous facts and reports it. Frameworks without a
reader get ``null``.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from envgen.errors import EnvgenError, HarvestError
from envgen.harvest import integrity
from envgen.harvest.fetcher import Fetcher
from envgen.harvest.metadata import applies, requirements, wheel_environment, wheel_metadata
from envgen.harvest.op_builder import BUILDER, deepspeed_build_facts, deepspeed_want
from envgen.harvest.op_builder import normalize_paths as _ds_paths
from envgen.harvest.release_files import read_release_files
from envgen.harvest.sdist import read_sdist
from envgen.harvest.simple_index import FileLink
from envgen.harvest.tags import WheelInfo, glibc_max, is_final, parse_sdist, parse_wheel
from envgen.versions import python_key

Reader = Callable[[dict[str, str], list[str]], dict[str, Any]]


def _deepspeed_reader(files: dict[str, str], cudas: list[str]) -> dict[str, Any]:
    if BUILDER not in _ds_paths(files):
        raise HarvestError(f"no {BUILDER} in the release")
    return deepspeed_build_facts(files, cudas)


# framework (normalized project name) -> (which archive members to read, their reader). A
# reader raises HarvestError when the release lacks the files it needs.
BUILD_READERS: dict[str, tuple[Callable[[str], bool], Reader]] = {
    "deepspeed": (deepspeed_want, _deepspeed_reader),
}
try:  # Colossal-AI / Megatron-Core readers, where that module exists
    from envgen.harvest import setup_checks as _setup_checks
except ImportError:  # pragma: no cover - depends on the checkout
    _setup_checks = None  # type: ignore[assignment]
if _setup_checks is not None:
    for _name, _want, _reader in (
        ("colossalai", "COLOSSALAI_WANT", "colossalai_build_facts"),
        ("megatron-core", "MEGATRON_CORE_WANT", "megatron_core_build_facts"),
    ):
        if hasattr(_setup_checks, _want) and hasattr(_setup_checks, _reader):
            BUILD_READERS[_name] = (getattr(_setup_checks, _want), getattr(_setup_checks, _reader))


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
    releases: dict[Version, dict[str, list]] = defaultdict(
        lambda: {"wheels": [], "sdists": [], "windows": []})
    for link in links:
        if link.yanked:
            continue
        if link.filename.endswith(".whl"):
            wheel = parse_wheel(link.filename, aliases)
            if wheel is None:
                continue
            if wheel.arch == "":  # not Linux, not pure: Windows x86-64 wheels are listed apart
                if "win_amd64" not in wheel.platform_tag.split("."):
                    continue
                version, bucket, item = wheel.version, "windows", (link, wheel)
            else:
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


def _wheel_abi(filename: str) -> str:
    try:
        tags = parse_wheel_filename(filename)[3]
    except ValueError:
        return "none"
    return ".".join(sorted({t.abi for t in tags}))


def release_files(files: dict[str, list]) -> dict[str, Any]:
    """``{"sdist": bool, "wheels": [...], "windows": [...]}``: the release's non-yanked sdist,
    Linux/pure wheels, and the Python versions of its Windows x86-64 wheels (``files`` as
    :func:`_releases` groups them; yanked files are already left out)."""
    wheels = [
        {
            "filename": link.filename,
            "python": list(wheel.pythons),
            "abi": _wheel_abi(link.filename),
            "platform": wheel.platform or "any",
            "glibc": wheel.glibc,
        }
        for link, wheel in files["wheels"]
    ]
    windows = sorted({p for _, w in files.get("windows", ()) for p in w.pythons}, key=python_key)
    return {"sdist": bool(files["sdists"]), "wheels": sorted(wheels, key=lambda w: w["filename"]),
            "windows": windows}


# every key a harvested ``build`` has (null / empty where the reader stated nothing), so that
# records of all three frameworks, read or not, have one shape (harvested-frameworks schema)
BUILD_KEYS: dict[str, Any] = {
    "read": False, "from": None, "source": None, "error": None, "nvcc_check": None,
    "nvcc_mismatch": None, "nvcc_check_skipped_without_gpu": None,
    "cuda_minor_mismatch_ok": None, "skip_cuda_check": None, "cxx_std": [], "nvcc_std": [],
    "default_archs": None, "default_archs_where": None, "arch_entries": None, "ops": [],
    "op_names": [], "requires_torch": None, "requires_cuda": None, "unread": [],
}
OP_KEYS: dict[str, Any] = {
    "builder": None, "build_var": None, "min_cc": None, "max_cc": None,
    "requires_cuda": None, "requires_torch": None, "evidence": [], "needs_gpu": None,
    "gpu_override": None, "optional": None, "cxx_std": [], "nvcc_std": [], "libraries": [],
    "refuses_platforms": [],
}
_NAMING_KEYS = ("builder", "build_var")  # name an op; state nothing about it


def complete_build(build: dict[str, Any] | None) -> dict[str, Any] | None:
    """``build`` with every key of :data:`BUILD_KEYS` (and each op with every key of
    :data:`OP_KEYS`); keys a reader adds beyond those are kept for the schema to judge."""
    if build is None:
        return None
    out = {**BUILD_KEYS, **build}
    ops = [{**OP_KEYS, **op} for op in out["ops"] or []]
    # every op's name; the full record only for ops whose build code states something (a floor,
    # a requirement, a GPU gate): the rest would repeat empty keys ~900 times in the snapshot
    out["op_names"] = sorted({op["name"] for op in ops} | set(out["op_names"] or ()))
    out["ops"] = [op for op in ops if any(op[k] not in (None, [], False) for k in OP_KEYS
                                          if k not in _NAMING_KEYS)]
    for rule in (*out["cxx_std"], *out["nvcc_std"],
                 *(r for op in out["ops"] for r in (*op["cxx_std"], *op["nvcc_std"]))):
        rule.setdefault("torch", "")
        rule.setdefault("cuda", "")
        rule.setdefault("where", None)
    return out


def read_build(
    fetch: Fetcher, framework: str, files: dict[str, list], cudas: list[str]
) -> dict[str, Any] | None:
    return complete_build(_read_build(fetch, framework, files, cudas))


def _read_build(
    fetch: Fetcher, framework: str, files: dict[str, list], cudas: list[str]
) -> dict[str, Any] | None:
    """The ``build`` value of a release (see the module docstring); None without a reader."""
    if framework not in BUILD_READERS:
        return None
    want, reader = BUILD_READERS[framework]
    if files["sdists"]:
        link, kind = sorted(files["sdists"], key=lambda s: s[0].filename)[0][0], "sdist"
    else:
        chosen = _pick_wheel(files["wheels"])
        if chosen is None:
            return {"read": False, "error": "the release has no sdist or Linux/pure wheel"}
        link, kind = chosen[0], "wheel"
    try:
        members, verified = read_release_files(
            fetch.http, fetch.cache, link, want, fetch.whole_limit
        )
        facts = reader(members, cudas)
    except HarvestError as exc:
        if exc.hint == integrity.MISMATCH_HINT:  # tampered bytes stop the refresh, as anywhere
            raise
        return {"read": False, "error": exc.message}
    except EnvgenError as exc:  # offline and not cached
        return {"read": False, "error": exc.message}
    except (SyntaxError, ValueError, RecursionError) as exc:
        return {"read": False, "error": f"{link.url}: {type(exc).__name__}: {exc}"}
    source = {"url": link.url, "sha256": link.sha256, "verified": verified}
    return {"read": True, "from": kind, "source": source, "error": None, **facts}


def _read(
    fetch: Fetcher,
    project: str,
    index: str,
    version: Version,
    files: dict[str, list],
    cudas: list[str] | None = None,
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
        "files": release_files(files),
        "build": read_build(fetch, canonicalize_name(project), files, cudas or []),
    }


def harvest_framework(
    fetch: Fetcher,
    index: str,
    links: list[FileLink],
    cfg: dict[str, Any],
    cudas: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One record per final release; ``cudas``: the CUDA ``major.minor`` values the build
    readers evaluate for (e.g. DeepSpeed's default arch list per nvcc)."""
    releases = _releases(links, cfg, fetch.aliases)
    versions = sorted(releases)
    versions = [v for v in versions if releases[v]["wheels"] or releases[v]["sdists"]]
    return fetch.map(
        f"{cfg['project']} ({index}): releases",
        lambda v: _read(fetch, cfg["project"], index, v, releases[v], cudas),
        versions,
    )


def framework_sort_key(record: dict[str, Any]) -> tuple:
    return (record["framework"], Version(record["version"]))
