"""Requirements of an sdist-only release (DeepSpeed, Colossal-AI ship no wheels on PyPI).

The tar.gz is streamed; the best available source is taken: ``PKG-INFO`` with
``Requires-Dist`` → ``*.egg-info/requires.txt`` (its unconditional part) →
``requirements/requirements.txt`` → ``requirements.txt``. Which one was used is recorded in
``metadata_from``. The stream is read to its end even after those members were found (sdists
are small) so that every byte is hashed and checked against the index's sha256 before
anything read from it is used or cached (``verified: "sha256"``, or ``"none"`` when the index
states no hash). The result is cached by the sdist's sha256.
"""

from __future__ import annotations

import json
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import requests
import urllib3

from envgen.errors import HarvestError, NetworkError
from envgen.harvest import integrity
from envgen.harvest.cache import Cache, file_key
from envgen.harvest.http import NETWORK_HINT, Http
from envgen.harvest.metadata import parse_metadata
from envgen.harvest.simple_index import FileLink

PRIORITY = ("sdist:PKG-INFO", "sdist:requires.txt", "sdist:requirements.txt")
CACHE_MEMBER = "sdist-requirements.v2.json"  # v2: checked against the sha256, with "verified"


@dataclass(frozen=True)
class SdistRequirements:
    metadata_from: str
    requires_python: str | None
    requires: tuple[str, ...]
    verified: str = integrity.NONE


def requires_txt_lines(text: str) -> list[str]:
    """The unconditional part of setuptools' requires.txt (before the first ``[section]``)."""
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            break
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def requirements_txt_lines(text: str) -> list[str]:
    """Requirement lines of a pip requirements file (options, includes and URLs skipped)."""
    lines = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-", "git+", "http:", "https:", ".")):
            continue
        lines.append(line)
    return lines


def _classify(name: str) -> str | None:
    parts = name.split("/")
    if len(parts) == 2 and parts[1] == "PKG-INFO":
        return "PKG-INFO"
    if len(parts) == 3 and parts[1].endswith(".egg-info") and parts[2] == "requires.txt":
        return "requires.txt"
    if len(parts) == 3 and parts[1:] == ["requirements", "requirements.txt"]:
        return "requirements/requirements.txt"
    if len(parts) == 2 and parts[1] == "requirements.txt":
        return "requirements.txt"
    return None


def _scan(stream: IO[bytes], key: Callable[[str], str | None]) -> dict[str, str]:
    """The text of each file member that ``key`` names (``key`` gets the member's path without
    a leading ``./`` and returns the name to keep it under, or ``None``); the first one wins."""
    found: dict[str, str] = {}
    with tarfile.open(fileobj=stream, mode="r|gz") as archive:
        for member in archive:
            name = key(member.name.lstrip("./")) if member.isfile() else None
            if name is None or name in found:
                continue
            handle = archive.extractfile(member)
            found[name] = handle.read().decode("utf-8", "replace") if handle else ""
    return found


_READ_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)


def download_sdist(
    http: Http, link: FileLink, key: Callable[[str], str | None] = _classify
) -> tuple[dict[str, str], str]:
    """The members of the streamed tar.gz at ``link`` that ``key`` names (see :func:`_scan`; by
    default the requirement sources, by kind) and the sdist's ``verified`` level; the whole
    stream is hashed and checked before anything is returned."""
    response = http.get(link.url, stream=True)
    if response is None:
        raise HarvestError(
            f"{link.url}: 404 Not Found", hint="the index lists a file it does not serve"
        )
    stream = integrity.HashingReader(response.raw)
    broken: BaseException | None = None
    try:
        response.raw.decode_content = False
        try:
            found = _scan(stream, key)
        except (tarfile.TarError, EOFError, zlib.error) as exc:
            found, broken = {}, exc  # maybe other bytes than listed: the hash tells
        stream.drain()  # what tarfile left unread (padding, trailing blocks) is hashed too
    except _READ_ERRORS as exc:
        raise NetworkError(
            f"{link.url}: could not read the sdist ({type(exc).__name__}: {exc})", hint=NETWORK_HINT
        ) from exc
    finally:
        response.close()
    verified = stream.check(link.url, link.sha256)
    if broken is not None:
        raise HarvestError(
            f"{link.url}: not a readable tar.gz sdist ({type(broken).__name__}: {broken})",
            hint="the index serves a broken file; report it to the project or the index",
        ) from broken
    return found, verified


def read_sdist(http: Http | None, cache: Cache, link: FileLink) -> SdistRequirements:
    key = file_key(link.sha256, link.url)
    entry = cache.get_json(key, CACHE_MEMBER, ("from", "requires_python", "requires", "verified"))
    if entry is not None:
        return SdistRequirements(
            entry["from"], entry["requires_python"], tuple(entry["requires"]), entry["verified"]
        )
    if cache.offline or http is None:
        raise cache.offline_miss(link.url)
    found, verified = download_sdist(http, link)
    requires_python = link.requires_python
    if "PKG-INFO" not in found:
        raise HarvestError(f"{link.url}: sdist has no PKG-INFO")
    meta = parse_metadata(found["PKG-INFO"], link.url + "!PKG-INFO")
    requires_python = meta.requires_python or requires_python
    if meta.requires_dist:
        result = SdistRequirements("sdist:PKG-INFO", requires_python, meta.requires_dist, verified)
    elif "requires.txt" in found:
        lines = requires_txt_lines(found["requires.txt"])
        result = SdistRequirements("sdist:requires.txt", requires_python, tuple(lines), verified)
    else:
        text = found.get("requirements/requirements.txt", found.get("requirements.txt"))
        if text is None:
            result = SdistRequirements("sdist:PKG-INFO", requires_python, (), verified)
        else:
            lines = requirements_txt_lines(text)
            result = SdistRequirements(
                "sdist:requirements.txt", requires_python, tuple(lines), verified
            )
    cache.put_blob(
        key,
        CACHE_MEMBER,
        json.dumps(
            {
                "from": result.metadata_from,
                "requires_python": result.requires_python,
                "requires": list(result.requires),
                "verified": result.verified,
            }
        ).encode(),
    )
    return result
