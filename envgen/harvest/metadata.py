"""Core metadata (METADATA / PKG-INFO): fetch it for a wheel and parse it.

Order for a wheel: the cache (keyed by the wheel's sha256) → PEP 658 ``<url>.metadata`` (tried
even when the page does not advertise it, since PyPI's HTML pages here omit the attribute but
usually serve the file) → on 404, ``*.dist-info/METADATA`` read out of the wheel
(:mod:`envgen.harvest.remote_zip`: the whole wheel when it is small enough, else by Range).

The ``.metadata`` bytes are checked against the sha256 the index states for them
(``data-core-metadata="sha256=…"`` / ``"core-metadata": {"sha256": …}``) when it states one;
a wheel's bytes against the wheel's sha256 (see :mod:`envgen.harvest.integrity` for the
``verified`` levels). Only checked facts are cached, with their level.
"""

from __future__ import annotations

import email.parser
import json
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement

from envgen.errors import HarvestError
from envgen.harvest import integrity
from envgen.harvest.cache import Cache, file_key
from envgen.harvest.http import Http
from envgen.harvest.remote_zip import read_members
from envgen.harvest.simple_index import FileLink

# v2: entries carry "verified" and are written only after the bytes were checked (entries of
# older envgen versions were not, so they are not read).
CACHE_MEMBER = "METADATA.v2.json"


@dataclass(frozen=True)
class CoreMetadata:
    name: str
    version: str
    requires_python: str | None
    requires_dist: tuple[str, ...]


def parse_metadata(text: str, where: str) -> CoreMetadata:
    message = email.parser.HeaderParser().parsestr(text)
    name, version = message.get("Name"), message.get("Version")
    if not name or not version:
        raise HarvestError(
            f"{where}: metadata is truncated or invalid (no Name/Version)",
            hint="the index served a broken metadata file; retry later or report it to the index",
        )
    return CoreMetadata(
        name=name.strip(),
        version=version.strip(),
        requires_python=(message.get("Requires-Python") or "").strip() or None,
        requires_dist=tuple(v.strip() for v in message.get_all("Requires-Dist") or ()),
    )


def requirements(lines: tuple[str, ...] | list[str], where: str) -> list[Requirement]:
    parsed = []
    for line in lines:
        try:
            parsed.append(Requirement(line))
        except InvalidRequirement as exc:
            raise HarvestError(f"{where}: invalid requirement {line!r} ({exc})") from exc
    return parsed


def applies(requirement: Requirement, environment: Mapping[str, str]) -> bool:
    """Whether ``requirement`` holds in ``environment`` without any extra."""
    if requirement.marker is None:
        return True
    return requirement.marker.evaluate({**environment, "extra": ""})


def wheel_environment(python: str, arch: str) -> dict[str, str]:
    """PEP 508 marker environment of a CPython ``python`` (``3.13t`` ok) on Linux ``arch``."""
    version = python.rstrip("t")
    return {
        "python_version": version,
        "python_full_version": version + ".0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": arch,
    }


def wheel_metadata(
    http: Http | None, cache: Cache, link: FileLink, whole_limit: int = 0
) -> tuple[CoreMetadata, str, str]:
    """``(metadata, how, verified)`` of a wheel; ``how`` is ``"pep658"`` or ``"wheel"``,
    ``verified`` one of :data:`envgen.harvest.integrity.LEVELS`."""
    key = file_key(link.sha256, link.url)
    entry = cache.get_json(key, CACHE_MEMBER, ("from", "text", "verified"))
    if entry is not None:
        return parse_metadata(entry["text"], link.url), entry["from"], entry["verified"]
    if cache.offline or http is None:
        raise cache.offline_miss(link.url + ".metadata")
    response = http.get(link.url + ".metadata")
    if response is not None:
        where = link.url + ".metadata"
        verified = integrity.check(where, link.core_metadata_sha256, response.content)
        if verified == integrity.SHA256:
            verified = integrity.METADATA_SHA256
        text, how = response.content.decode("utf-8", "replace"), "pep658"
    else:
        members, verified = read_members(
            http,
            link.url,
            lambda n: n.endswith(".dist-info/METADATA") and n.count("/") == 1,
            sha256=link.sha256,
            whole_limit=whole_limit,
        )
        if not members:
            raise HarvestError(f"{link.url}: wheel has no .dist-info/METADATA")
        text, how, where = (
            next(iter(members.values())).decode("utf-8", "replace"),
            "wheel",
            link.url,
        )
    metadata = parse_metadata(text, where)  # validate before caching
    entry = {"from": how, "text": text, "verified": verified}
    cache.put_blob(key, CACHE_MEMBER, json.dumps(entry).encode())
    return metadata, how, verified
