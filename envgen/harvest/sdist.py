"""Requirements of an sdist-only release (DeepSpeed, Colossal-AI ship no wheels on PyPI).

The tar.gz is streamed and reading stops as soon as the best available source is found:
``PKG-INFO`` with ``Requires-Dist`` → ``*.egg-info/requires.txt`` (its unconditional part) →
``requirements/requirements.txt`` → ``requirements.txt``. Which one was used is recorded in
``metadata_from``. The result is cached by the sdist's sha256.
"""

from __future__ import annotations

import json
import tarfile
from dataclasses import dataclass

import requests

from envgen.errors import HarvestError, NetworkError
from envgen.harvest.cache import Cache, file_key
from envgen.harvest.http import NETWORK_HINT, Http
from envgen.harvest.metadata import parse_metadata
from envgen.harvest.simple_index import FileLink

PRIORITY = ("sdist:PKG-INFO", "sdist:requires.txt", "sdist:requirements.txt")


@dataclass(frozen=True)
class SdistRequirements:
    metadata_from: str
    requires_python: str | None
    requires: tuple[str, ...]


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


def _scan(stream, url: str) -> dict[str, str]:
    found: dict[str, str] = {}
    with tarfile.open(fileobj=stream, mode="r|gz") as archive:
        for member in archive:
            kind = _classify(member.name.lstrip("./")) if member.isfile() else None
            if kind is None or kind in found:
                continue
            handle = archive.extractfile(member)
            found[kind] = handle.read().decode("utf-8", "replace") if handle else ""
            pkg = found.get("PKG-INFO")
            if pkg is not None and ("\nRequires-Dist:" in pkg or "requires.txt" in found):
                break  # the best source available is in hand
    return found


def read_sdist(http: Http | None, cache: Cache, link: FileLink) -> SdistRequirements:
    key = file_key(link.sha256, link.url)
    cached = cache.get_blob(key, "sdist-requirements.json")
    if cached is not None:
        entry = json.loads(cached)
        return SdistRequirements(entry["from"], entry["requires_python"], tuple(entry["requires"]))
    if cache.offline or http is None:
        raise cache.offline_miss(link.url)
    response = http.get(link.url, stream=True)
    if response is None:
        raise HarvestError(
            f"{link.url}: 404 Not Found", hint="the index lists a file it does not serve"
        )
    try:
        response.raw.decode_content = False
        found = _scan(response.raw, link.url)
    except (tarfile.TarError, EOFError, OSError, requests.RequestException) as exc:
        raise NetworkError(
            f"{link.url}: could not read the sdist ({type(exc).__name__}: {exc})", hint=NETWORK_HINT
        ) from exc
    finally:
        response.close()
    requires_python = link.requires_python
    if "PKG-INFO" not in found:
        raise HarvestError(f"{link.url}: sdist has no PKG-INFO")
    meta = parse_metadata(found["PKG-INFO"], link.url + "!PKG-INFO")
    requires_python = meta.requires_python or requires_python
    if meta.requires_dist:
        result = SdistRequirements("sdist:PKG-INFO", requires_python, meta.requires_dist)
    elif "requires.txt" in found:
        lines = requires_txt_lines(found["requires.txt"])
        result = SdistRequirements("sdist:requires.txt", requires_python, tuple(lines))
    else:
        text = found.get("requirements/requirements.txt", found.get("requirements.txt"))
        if text is None:
            result = SdistRequirements("sdist:PKG-INFO", requires_python, ())
        else:
            lines = requirements_txt_lines(text)
            result = SdistRequirements("sdist:requirements.txt", requires_python, tuple(lines))
    cache.put_blob(
        key,
        "sdist-requirements.json",
        json.dumps(
            {
                "from": result.metadata_from,
                "requires_python": result.requires_python,
                "requires": list(result.requires),
            }
        ).encode(),
    )
    return result
