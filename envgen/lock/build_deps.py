"""The build dependencies of the sdists a pip lock installs, hash-locked like the lock itself.

Input: the locked packages (:class:`~envgen.lock.pip_compile.PipPackage`), the target Python
and platform, the indexes. Output: a :class:`BuildLock` — for each package the target installs
from an sdist (DeepSpeed, Colossal-AI), the requirements its build backend needs, and those
requirements resolved and hash-pinned by uv for the target (``build-requirements.lock.txt``).

Why: pip and uv build an sdist in an isolated environment whose build requirements they
download *without* hash checks, even under ``--require-hashes`` (pypa/pip#13984; uv checks
only hashes it is given). With the build lock, every
install path installs the build requirements first (``--require-hashes``), then the lock with
``--no-build-isolation``: nothing unhashed is downloaded.

The requirements are read from the sdist itself (its ``pyproject.toml`` ``[build-system]
requires``, PEP 518), downloaded once and checked against the lock's sha256; a project without
a ``[build-system]`` table gets pip's fallback, a fact of matrix/curated/toolchain.toml
(``[sdist_build] fallback_requires``). The framework's own build requirements
(``[build.<framework>]``) are already in the lock, since the ops build needs them beside torch;
resolving with the lock's pins as constraints keeps both at the same versions.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from envgen.errors import DataError, EnvgenError, NetworkError
from envgen.lock.pip_compile import Dist, PipPackage, PipResolveError, compile_pip_lock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

@dataclass(frozen=True)
class SdistBuild:
    """One package the target builds from its sdist, and what its build backend needs."""

    name: str
    version: str
    requires: tuple[str, ...]
    source: str  # "pyproject.toml", or "pip's fallback: no [build-system] table"


@dataclass(frozen=True)
class BuildLock:
    sdists: tuple[SdistBuild, ...]
    packages: tuple[PipPackage, ...]

    @property
    def requirements(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for s in self.sdists for r in s.requires))


def built_from_sdist(pip: tuple[PipPackage, ...] | list[PipPackage], python_version: str,
                     python_platform: str) -> list[tuple[PipPackage, Dist]]:
    """The packages whose file for the target is an sdist (no wheel installs there)."""
    out = []
    for p in pip:
        dist = p.primary(python_version, python_platform)
        if p.sdist is not None and dist is p.sdist:
            out.append((p, dist))
    return out


def read_build_requires(data: bytes, filename: str, fallback: tuple[str, ...]
                        ) -> tuple[tuple[str, ...], str]:
    """(requirements, where they came from) of an sdist's bytes (.tar.gz or .zip);
    ``fallback``: what one without a [build-system] table is built with."""
    text = _pyproject(data, filename)
    if text is None:
        return _fallback(fallback, filename), "pip's fallback: no pyproject.toml"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EnvgenError(f"{filename}: its pyproject.toml is not valid TOML ({exc})",
                          hint="pip cannot build it either; pick another version") from None
    table = doc.get("build-system")
    if table is None:
        return _fallback(fallback, filename), "pip's fallback: no [build-system] table"
    requires = table.get("requires") if isinstance(table, dict) else None
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise EnvgenError(f"{filename}: [build-system] has no list of strings in 'requires'",
                          hint="PEP 518 makes it required; pip cannot build this sdist either")
    return tuple(r.strip() for r in requires if r.strip()), "pyproject.toml"


def _fallback(fallback: tuple[str, ...], filename: str) -> tuple[str, ...]:
    if not fallback:
        raise DataError(f"{filename} declares no build requirements and the matrix names no "
                        "fallback for that", hint="add [sdist_build] fallback_requires to "
                        "curated/toolchain.toml (pip's: setuptools>=40.8.0)")
    return fallback


def _pyproject(data: bytes, filename: str) -> str | None:
    """The text of the sdist's top-level pyproject.toml (``<name>-<version>/pyproject.toml``)."""
    try:
        if filename.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                names = [n for n in z.namelist() if _top_level(n)]
                return z.read(names[0]).decode("utf-8") if names else None
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            member = next((m for m in tar.getmembers() if m.isfile() and _top_level(m.name)),
                          None)
            handle = tar.extractfile(member) if member else None
            return handle.read().decode("utf-8") if handle else None
    except (tarfile.TarError, zipfile.BadZipFile, OSError, UnicodeDecodeError) as exc:
        raise EnvgenError(f"{filename} is not a readable sdist ({exc})",
                          hint="the index served a broken file; try again or another mirror"
                          ) from None


def _top_level(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return len(parts) == 2 and parts[1] == "pyproject.toml"


def fetch(dist: Dist, cache_dir: Path, *, offline: bool, ca_cert: Path | None) -> bytes:
    """The sdist's bytes, checked against the lock's sha256; cached by hash under
    ``<cache>/sdists/`` (``--offline`` reads only the cache)."""
    cached = cache_dir / "sdists" / dist.sha256
    if cached.is_file():
        data = cached.read_bytes()
        if hashlib.sha256(data).hexdigest() == dist.sha256:
            return data
    if offline:
        raise NetworkError(f"--offline: {dist.filename} (an sdist whose build dependencies the "
                           "lock pins) is not in the cache",
                           hint="run the same `envgen make` once online, or drop --offline")
    data = _download(dist.url, ca_cert)
    got = hashlib.sha256(data).hexdigest()
    if got != dist.sha256:
        raise EnvgenError(f"{dist.url} does not match the sha256 uv locked ({got} ≠ "
                          f"{dist.sha256})",
                          hint="the index serves different bytes than a moment ago; check the "
                          "mirror, then run envgen make again")
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.part")
    tmp.write_bytes(data)
    os.replace(tmp, cached)
    return data


def _download(url: str, ca_cert: Path | None) -> bytes:
    parts = urlsplit(url)
    if parts.scheme in ("", "file"):
        return Path(unquote(parts.path) if parts.scheme else url).read_bytes()
    import requests

    from envgen.http import make_session

    session = make_session(str(ca_cert) if ca_cert else None, pool_size=1)
    try:
        response = session.get(url, timeout=60)
    except requests.RequestException as exc:
        raise NetworkError(f"cannot download {url} ({type(exc).__name__})",
                           hint="check the network, or --ca-cert FILE behind a TLS proxy"
                           ) from None
    if response.status_code != 200:
        raise NetworkError(f"cannot download {url}: HTTP {response.status_code}",
                           hint="check the index (--index-url) and try again")
    return response.content


def lock_build_deps(pip: tuple[PipPackage, ...], *, python_version: str, python_platform: str,
                    cache_dir: Path, fallback: tuple[str, ...], offline: bool = False,
                    ca_cert: Path | None = None,
                    progress: Callable[[str], None] = lambda _m: None,
                    **compile_options) -> BuildLock | None:
    """The build lock of ``pip`` for the target, or None when every package installs from
    a wheel. ``fallback``: the requirements of an sdist that declares none;
    ``compile_options``: the index options of :func:`compile_pip_lock`."""
    todo = built_from_sdist(pip, python_version, python_platform)
    if not todo:
        return None
    sdists = []
    for package, dist in todo:
        requires, source = read_build_requires(
            fetch(dist, cache_dir, offline=offline, ca_cert=ca_cert), dist.filename, fallback)
        sdists.append(SdistBuild(package.name, package.version, requires, source))
    names = ", ".join(f"{s.name} {s.version}" for s in sdists)
    progress(f"  {names}: built from source on the target; locking its build dependencies")
    lock = BuildLock(tuple(sdists), ())
    requirements = lock.requirements
    if not requirements:
        return lock
    pins = tuple(f"{p.name}=={p.version}" for p in pip)
    common = dict(python_version=python_version, python_platform=python_platform,
                  cache_dir=cache_dir, offline=offline, ca_cert=ca_cert,
                  what="build dependencies", progress=progress, **compile_options)
    try:  # the same versions as the lock where both name a package (one env holds both)
        packages = compile_pip_lock(requirements, constraints=pins, **common).packages
    except PipResolveError:
        # a backend that needs another version than the lock pins: it builds with that one
        # (installed first), then the lock's own version replaces it
        packages = compile_pip_lock(requirements, **common).packages
    nested = built_from_sdist(packages, python_version, python_platform)
    if nested:
        raise EnvgenError(f"the build dependency {nested[0][0].name} {nested[0][0].version} "
                          f"(needed to build {names}) has no wheel for Python {python_version} "
                          f"{python_platform}",
                          hint="envgen hash-locks one level of builds; use an index that has "
                          "that wheel (--extra-index-url), or another framework version")
    return BuildLock(tuple(sdists), tuple(packages))
