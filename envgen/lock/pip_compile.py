"""Resolve the pip part of a lock with uv, for the target Python and platform.

Input: requirement lines, the target Python and manylinux platform, the indexes. Output: the
locked packages (:class:`PipPackage`: every usable wheel and sdist with URL and sha256).

``uv pip compile --python-version X.Y --python-platform <arch>-manylinux_<glibc>`` resolves for
a Python this machine may not have (pip-tools cannot). Its PEP 751 output (pylock.toml) lists,
per package, exactly the distributions usable on the target with URL and sha256 — the pip
lock and the pip half of conda-lock.yml are both written from it, so uv runs once. The file is
read with ``packaging.pylock``; hand-written on top of it only the check that every file has
a sha256 (PEP 751 accepts any hash; the locks pin sha256), to name the index that gave none.
uv runs once per lock: a target glibc newer than this uv's list of manylinux tags is clamped
from the list uv prints when it refuses the tag (one more run, only then).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from packaging.pylock import PackageSdist, PackageWheel, Pylock, PylockValidationError
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envgen.errors import EnvgenError, NetworkError
from envgen.proc import TOOL_TIMEOUT_VAR, limit, run, time_limit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

COMPILE_TIMEOUT = 1800.0  # uv pip compile, each run (ENVGEN_TOOL_TIMEOUT replaces it)
_PLATFORM = re.compile(r"\b[a-z0-9_]+-manylinux_\d+_\d+\b")


@dataclass(frozen=True, slots=True)
class Dist:
    url: str
    sha256: str
    filename: str


@dataclass(frozen=True, slots=True)
class PipPackage:
    name: str
    version: str
    wheels: tuple[Dist, ...]
    sdist: Dist | None

    @property
    def hashes(self) -> tuple[str, ...]:
        """Every acceptable file's sha256, sorted (what the requirements lock lists)."""
        files = [*self.wheels, *([self.sdist] if self.sdist else [])]
        return tuple(sorted({d.sha256 for d in files}))

    def primary(self, python_version: str, python_platform: str) -> Dist:
        """The file an installer on the target picks: the wheel with the most specific tag
        the target supports, else the sdist."""
        ranked = target_tags(python_version, python_platform)
        best, best_rank = None, len(ranked)
        for wheel in self.wheels:
            try:
                tags = parse_wheel_filename(wheel.filename)[3]
            except InvalidWheelFilename:
                continue
            rank = min((ranked.get(t, best_rank) for t in tags), default=best_rank)
            if rank < best_rank:
                best, best_rank = wheel, rank
        if best is not None:
            return best
        if self.sdist is not None:
            return self.sdist
        raise EnvgenError(f"no file of {self.name} {self.version} installs on "
                          f"Python {python_version} {python_platform}",
                          hint="report this: uv chose a package without a usable file")


_LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}


@functools.lru_cache(maxsize=32)
def target_tags(python_version: str, python_platform: str) -> dict[Tag, int]:
    """Wheel tags a CPython ``python_version`` on ``<arch>-manylinux_<major>_<minor>``
    accepts, most preferred first (rank 0), as pip would order them on that machine."""
    arch, _, tag = python_platform.partition("-")
    major, minor = (int(x) for x in tag.removeprefix("manylinux_").split("_")[:2])
    platforms = []
    for m in range(minor, -1, -1):
        platforms.append(f"manylinux_{major}_{m}_{arch}")
        if (major, m) in _LEGACY:
            platforms.append(f"{_LEGACY[(major, m)]}_{arch}")
    platforms.append(f"linux_{arch}")
    version = tuple(int(x) for x in python_version.split("."))
    tags = [*cpython_tags(version, platforms=platforms),
            *compatible_tags(version, platforms=platforms)]
    return {t: i for i, t in reversed(list(enumerate(tags)))}


class PipResolveError(EnvgenError):
    """uv found no set of versions satisfying the requirements."""


@functools.cache
def uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError as exc:  # pragma: no cover - uv is a dependency
        raise EnvgenError("the uv package is not installed",
                          hint="pip install uv (envgen depends on it)") from exc
    return find_uv_bin()


def uv_version() -> str:
    try:
        out = run([uv_binary(), "--version"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "?"
    return out.stdout.split()[1] if out.returncode == 0 and out.stdout.split()[1:] else "?"


@functools.cache
def uv_platforms() -> tuple[str, ...]:
    """The --python-platform values this uv accepts (listed by its own help): each uv release
    knows manylinux tags up to some glibc, and refuses newer ones."""
    try:
        out = run([uv_binary(), "pip", "compile", "--help"], capture_output=True, text=True,
                  timeout=60).stdout
    except subprocess.TimeoutExpired:
        raise time_limit("uv pip compile --help", 60, None, hint="uv hangs at start-up: "
                         "check `uv --version` by hand") from None
    return tuple(dict.fromkeys(_PLATFORM.findall(out)))


def clamp_platform(python_platform: str, known: tuple[str, ...]) -> str:
    """``python_platform``, or the newest of the manylinux tags ``known`` below it: a target
    whose glibc is newer than uv's list (Debian 13's 2.41) runs every wheel of the older tags,
    and wheels tagged newer than uv knows are not published."""
    if not known or python_platform in known:
        return python_platform
    arch, _, tag = python_platform.partition("-")
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)", tag)
    if not m:
        return python_platform
    want = (int(m.group(1)), int(m.group(2)))
    older = [(tuple(map(int, k.rsplit("_", 2)[1:])), k) for k in known
             if k.startswith(f"{arch}-manylinux_")]
    older = [(v, k) for v, k in older if v <= want]
    return max(older)[1] if older else python_platform


def compile_command(requirements_in: Path, output: Path, *, python_version: str,
                    python_platform: str, index_url: str, extra_index_urls: tuple[str, ...],
                    cache_dir: Path, offline: bool, exclude_newer: str | None,
                    constraints: Path | None = None) -> list[str]:
    """The exact uv command line (also what the benchmark compares envgen against)."""
    cmd = [uv_binary(), "pip", "compile", str(requirements_in), "-o", str(output),
           *(["--constraints", str(constraints)] if constraints else []),
           "--format", "pylock.toml", "--generate-hashes", "--no-header", "--quiet",
           "--python-version", python_version, "--python-platform", python_platform,
           # uv must not hunt for (or download) a Python of the target version: markers are
           # evaluated for --python-version; the running interpreter only hosts the resolve.
           "--python", sys.executable, "--no-python-downloads", "--no-config",
           "--cache-dir", str(cache_dir / "uv"), "--index-url", index_url]
    for url in extra_index_urls:
        cmd += ["--extra-index-url", url]
    if extra_index_urls:
        # torch+cuXYZ lives only on PyTorch's index while its dependencies live on both;
        # choose the best version across indexes (every file is hash-pinned afterwards).
        cmd += ["--index-strategy", "unsafe-best-match"]
    if offline:
        cmd.append("--offline")
    if exclude_newer:
        cmd += ["--exclude-newer", exclude_newer]
    return cmd


_UNREACHABLE = re.compile(
    r"(?:Failed to fetch|Could not connect|error sending request|dns error|"
    r"connection (?:refused|reset)|tcp connect error|certificate|Request failed after)",
    re.IGNORECASE)
_URL = re.compile(r"`?((?:https?|file)://[^\s`'\"]+)`?")


def _failure(stderr: str, urls: list[str], offline: bool) -> EnvgenError:
    text = stderr.strip()
    if offline and ("offline" in text.lower() or "cache" in text.lower()):
        return NetworkError("--offline: the uv cache lacks what this lock needs:\n"
                            + _indent(text),
                            hint="run the same `envgen make` once online to fill the cache, "
                            "or drop --offline")
    if _UNREACHABLE.search(text):
        seen = _URL.findall(text)
        base = next((u for u in urls if any(s.startswith(u) for s in seen)),
                    seen[0] if seen else ", ".join(urls))
        tls = "certificate" in text.lower()
        return NetworkError(
            f"cannot read Python package index {base}:\n{_indent(text)}",
            hint=("pass --ca-cert FILE (your proxy's CA bundle)" if tls else
                  "use a reachable mirror: --index-url URL replaces PyPI, --torch-index-url "
                  "URL replaces PyTorch's index, --extra-index-url URL adds one"))
    return PipResolveError(
        "uv cannot resolve the pip packages for this combination:\n" + _indent(text),
        hint="the conflicting requirements are named above; try another combination "
        "(envgen resolve) or an index that has them (--index-url / --extra-index-url)")


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()[-25:])


def _dist(d: PackageWheel | PackageSdist) -> Dist:
    return Dist(url=d.url or d.path or "", sha256=d.hashes.get("sha256", ""),
                filename=d.filename)


def parse_pylock(text: str) -> list[PipPackage]:
    """The packages of a PEP 751 lock (``packaging.pylock``), each with its usable
    distributions, sorted by name."""
    try:
        doc = tomllib.loads(text)
        lock = Pylock.from_dict(doc)
    except tomllib.TOMLDecodeError as exc:
        raise EnvgenError(f"uv wrote a pylock.toml that is not TOML ({exc})",
                          hint="report this with `uv --version`") from None
    except PylockValidationError as exc:
        _no_sha256(doc)
        raise EnvgenError(f"uv wrote a pylock.toml envgen cannot read ({exc})",
                          hint="report this with `uv --version`: envgen reads PEP 751 "
                          "lock-version 1.x") from None
    out = []
    for p in lock.packages:
        wheels = tuple(_dist(w) for w in p.wheels or ())
        sdist = _dist(p.sdist) if p.sdist else None
        if not wheels and sdist is None:
            source = p.vcs or p.directory or p.archive
            where = getattr(source, "url", None) or getattr(source, "path", None) or source
            raise EnvgenError(f"uv locked {p.name} without a downloadable file ({where})",
                              hint="lock only index packages: drop direct URL requirements")
        for d in (*wheels, *([sdist] if sdist else [])):
            if not d.sha256:
                raise _unhashed(d.url)
        out.append(PipPackage(name=p.name, version=str(p.version), wheels=wheels, sdist=sdist))
    return sorted(out, key=lambda p: p.name)


def _unhashed(url: str) -> EnvgenError:
    return EnvgenError(f"the index gave no sha256 for {url}",
                       hint="use an index that publishes hashes (PEP 503 #sha256=)")


def _no_sha256(doc: dict) -> None:
    """The error for a file without a sha256 (which PEP 751 calls invalid, in its words)."""
    for p in doc.get("packages", ()) if isinstance(doc, dict) else ():
        files = [*(p.get("wheels") or ()), *([p["sdist"]] if p.get("sdist") else [])] \
            if isinstance(p, dict) else []
        for f in files:
            if isinstance(f, dict) and not (f.get("hashes") or {}).get("sha256"):
                raise _unhashed(f.get("url") or f.get("path") or "?")


class PipLock(NamedTuple):
    """The packages of a pip lock and uv's PEP 751 text of it (written as pylock.toml)."""

    packages: list[PipPackage]
    pylock: str


def compile_pip(requirements: tuple[str, ...], **kwargs) -> list[PipPackage]:
    """The packages only: see :func:`compile_pip_lock`."""
    return compile_pip_lock(requirements, **kwargs).packages


def compile_pip_lock(requirements: tuple[str, ...], *, python_version: str,
                     python_platform: str, index_url: str, extra_index_urls: tuple[str, ...],
                     cache_dir: Path, offline: bool = False, exclude_newer: str | None = None,
                     ca_cert: Path | None = None, constraints: tuple[str, ...] = (),
                     what: str = "pip packages",
                     progress: Callable[[str], None] = lambda _m: None) -> PipLock:
    """Resolve and hash-pin ``requirements`` for the target; one uv run. ``constraints``:
    requirement lines that limit versions without adding packages (uv's --constraints)."""
    progress(f"resolving {what} for Python {python_version} ({python_platform}) with uv")
    env = dict(os.environ)
    for key in ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX",
                "UV_FIND_LINKS", "PIP_FIND_LINKS", "UV_PYTHON"):
        env.pop(key, None)  # the lock's sources are exactly the ones named on the line
    if ca_cert is not None:
        env["SSL_CERT_FILE"] = str(ca_cert)
    with tempfile.TemporaryDirectory(prefix="envgen-uv-") as tmp:
        req_in, out = Path(tmp) / "requirements.in", Path(tmp) / "pylock.toml"
        req_in.write_text("".join(f"{r}\n" for r in requirements), encoding="utf-8")
        cons = None
        if constraints:
            cons = Path(tmp) / "constraints.txt"
            cons.write_text("".join(f"{c}\n" for c in constraints), encoding="utf-8")

        def compile_for(platform: str) -> subprocess.CompletedProcess:
            cmd = compile_command(req_in, out, python_version=python_version,
                                  python_platform=platform, index_url=index_url,
                                  extra_index_urls=extra_index_urls, cache_dir=cache_dir,
                                  offline=offline, exclude_newer=exclude_newer,
                                  constraints=cons)
            seconds = limit(COMPILE_TIMEOUT)
            try:
                return run(cmd, capture_output=True, text=True, env=env, timeout=seconds)
            except subprocess.TimeoutExpired:
                raise time_limit("uv pip compile (resolving the pip packages)", seconds,
                                 TOOL_TIMEOUT_VAR, hint="a slow or unreachable index makes it "
                                 "wait: check --index-url, or use a nearer mirror") from None

        proc = compile_for(python_platform)
        if proc.returncode != 0 and f"'{python_platform}' for '--python-platform" in proc.stderr:
            # a glibc newer than this uv's tags: uv lists the ones it knows
            listed = proc.stderr.partition("possible values:")[2]
            platform = clamp_platform(python_platform,
                                      tuple(dict.fromkeys(_PLATFORM.findall(listed))))
            if platform != python_platform:
                progress(f"  uv knows manylinux tags up to {platform}; resolving for it (a "
                         f"{python_platform} machine runs those wheels)")
                proc = compile_for(platform)
        if proc.returncode != 0:
            raise _failure(proc.stderr, [index_url, *extra_index_urls], offline)
        text = out.read_text(encoding="utf-8")
        return PipLock(parse_pylock(text), text)
