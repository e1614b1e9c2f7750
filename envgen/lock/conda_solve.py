"""Solve the conda part of a lock with py-rattler, for the target machine, not this one.

rattler (the solver under pixi) needs no conda binary. The target's virtual packages
(``__cuda``, ``__glibc``, ``__linux``, ``__archspec``) come from the plan, so a laptop without a
GPU locks for an H100 node. Channel repodata is cached on disk (``<cache>/rattler``);
``offline`` solves from that cache only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import EnvgenError, NetworkError, UsageError
from envgen.lock.plan import CondaPlan


@dataclass(frozen=True, slots=True)
class CondaPackage:
    """One locked conda package: enough to download, verify and install it."""

    name: str
    version: str
    build: str
    build_number: int
    subdir: str
    url: str
    sha256: str
    md5: str
    depends: tuple[str, ...]
    constrains: tuple[str, ...]
    channel: str
    size: int | None
    noarch: str | None
    file_name: str


class CondaSolveError(EnvgenError):
    """The channels cannot satisfy the specs (exit 1: the request itself was feasible)."""


@contextlib.contextmanager
def ca_bundle(ca_cert: Path | None) -> Iterator[None]:
    """Point rattler's TLS (system roots, which honour SSL_CERT_FILE) at ``ca_cert``."""
    if ca_cert is None:
        yield
        return
    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(ca_cert)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("SSL_CERT_FILE", None)
        else:
            os.environ["SSL_CERT_FILE"] = saved


def _virtual_packages(plan: CondaPlan):
    import rattler

    return [rattler.GenericVirtualPackage(rattler.PackageName(name), rattler.Version(version),
                                          rattler.BuildString(build))
            for name, version, build in plan.virtual]


def _hex(value) -> str:
    if value is None:
        return ""
    return value.hex() if isinstance(value, (bytes, bytearray)) else str(value)


def _record(r) -> CondaPackage:
    noarch = r.noarch
    noarch_s = None
    if noarch is not None and (noarch.python or noarch.generic):
        noarch_s = "python" if noarch.python else "generic"
    return CondaPackage(
        name=r.name.normalized, version=str(r.version), build=str(r.build),
        build_number=int(r.build_number), subdir=str(r.subdir), url=str(r.url),
        sha256=_hex(r.sha256), md5=_hex(r.md5), depends=tuple(r.depends),
        constrains=tuple(r.constrains), channel=str(r.channel or ""),
        size=r.size, noarch=noarch_s, file_name=str(r.file_name),
    )


_URL = re.compile(r"(?:https?|file)://[^\s'\"`)]+")


def _explain_fetch(exc: Exception, plan: CondaPlan, offline: bool) -> EnvgenError:
    text = str(exc)
    urls = _URL.findall(text)
    channel = next((c for c in plan.channels if any(u.startswith(c) for u in urls)),
                   urls[0] if urls else ", ".join(plan.channels))
    if offline:
        return NetworkError(
            f"--offline: no cached repodata for {channel}",
            hint="run the same `envgen make` once online to fill the cache, or drop --offline")
    return NetworkError(
        f"cannot read conda channel {channel}: "
        f"{text.splitlines()[0].strip(chr(39) + chr(34)) if text else repr(exc)}",
        hint="replace it with a reachable mirror: --channel URL (repeatable; replaces the "
        "default channels), --channel-alias URL for a mirror of conda.anaconda.org, or "
        "--ca-cert FILE behind a TLS-intercepting proxy")


def solve_conda(plan: CondaPlan, *, cache_dir: Path, offline: bool = False,
                ca_cert: Path | None = None, exclude_newer: str | None = None,
                progress: Callable[[str], None] = lambda _m: None) -> list[CondaPackage]:
    """Solve ``plan.specs`` against ``plan.channels`` for ``plan.subdir``; best versions."""
    import rattler
    from rattler import exceptions as rx

    progress(f"solving conda packages for {plan.subdir} from {', '.join(plan.channels)}")
    cache_action = "force-cache-only" if offline else "cache-or-fetch"
    kwargs = {}
    if exclude_newer:
        import datetime as dt

        kwargs["exclude_newer"] = dt.datetime.fromisoformat(exclude_newer.replace("Z", "+00:00"))
        kwargs["timestamp_policy"] = "allow-missing"
    channels = [rattler.Channel(url) for url in plan.channels]
    try:
        with ca_bundle(ca_cert):  # the HTTP client reads the roots when it is built
            try:
                gateway = rattler.Gateway(
                    cache_dir=cache_dir / "rattler",
                    default_config=rattler.SourceConfig(cache_action=cache_action))
            except ValueError as exc:
                raise UsageError(f"cannot build an HTTPS client ({exc}); the CA bundle "
                                 f"{ca_cert or '$SSL_CERT_FILE'} is not a readable PEM file",
                                 hint="pass --ca-cert FILE with your proxy's CA certificates "
                                 "in PEM format") from None
            records = asyncio.run(rattler.solve(
                sources=channels, specs=list(plan.specs), gateway=gateway,
                platforms=[plan.subdir, "noarch"], virtual_packages=_virtual_packages(plan),
                **kwargs))
    except rx.SolverError as exc:
        raise CondaSolveError(
            "the conda channels cannot satisfy the toolchain for this combination:\n"
            + _indent(str(exc)),
            hint="the conflicting packages are named above; check that the channels carry them "
            "for this CUDA/Python (--channel), or pick another combination with envgen resolve"
        ) from None
    except (rx.FetchRepoDataError, rx.GatewayError, rx.IoError) as exc:
        raise _explain_fetch(exc, plan, offline) from None
    except rx.InvalidMatchSpecError as exc:
        raise EnvgenError(f"curated/toolchain.toml has an invalid conda spec: {exc}",
                          hint="fix the spec in matrix/curated/toolchain.toml") from None
    return sorted((_record(r) for r in records), key=lambda p: p.name)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines())
