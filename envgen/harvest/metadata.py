"""Core metadata (METADATA / PKG-INFO): fetch it for a wheel and parse it.

Order for a wheel: the cache (keyed by the wheel's sha256) → PEP 658 ``<url>.metadata`` (tried
even when the page does not advertise it, since PyPI's HTML pages here omit the attribute but
usually serve the file) → on 404, ``*.dist-info/METADATA`` read out of the wheel with HTTP
Range requests (:mod:`envgen.harvest.remote_zip`).
"""

from __future__ import annotations

import email.parser
import json
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement

from envgen.errors import HarvestError
from envgen.harvest.cache import Cache, file_key
from envgen.harvest.http import Http
from envgen.harvest.remote_zip import read_members
from envgen.harvest.simple_index import FileLink


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


def wheel_metadata(http: Http | None, cache: Cache, link: FileLink) -> tuple[CoreMetadata, str]:
    """``(metadata, how)`` of a wheel; ``how`` is ``"pep658"`` or ``"wheel"``."""
    key = file_key(link.sha256, link.url)
    cached = cache.get_blob(key, "METADATA.json")
    if cached is not None:
        entry = json.loads(cached)
        return parse_metadata(entry["text"], link.url), entry["from"]
    if cache.offline or http is None:
        raise cache.offline_miss(link.url + ".metadata")
    response = http.get(link.url + ".metadata")
    if response is not None:
        text, how, where = (
            response.content.decode("utf-8", "replace"),
            "pep658",
            link.url + ".metadata",
        )
    else:
        members = read_members(
            http, link.url, lambda n: n.endswith(".dist-info/METADATA") and n.count("/") == 1
        )
        if not members:
            raise HarvestError(f"{link.url}: wheel has no .dist-info/METADATA")
        text, how, where = (
            next(iter(members.values())).decode("utf-8", "replace"),
            "wheel",
            link.url,
        )
    metadata = parse_metadata(text, where)  # validate before caching
    cache.put_blob(key, "METADATA.json", json.dumps({"from": how, "text": text}).encode())
    return metadata, how
