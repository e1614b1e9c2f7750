"""Source files of a release (e.g. DeepSpeed's ``op_builder/*.py``), read from its sdist or wheel.

An sdist (``.tar.gz``) is streamed whole and every byte hashed and checked against the index's
sha256 before anything read from it is used or cached, by :mod:`envgen.harvest.sdist`'s own
download; a wheel is read with :func:`envgen.harvest.remote_zip.read_members`.
Member names are relative to the archive root (an sdist's top folder ``name-version/`` is
dropped). The members are cached by the file's sha256 under a name that carries the selection's
tag (``want.tag``), so a later change of what is wanted never hits a stale entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from envgen.errors import HarvestError
from envgen.harvest.cache import Cache, file_key
from envgen.harvest.http import Http
from envgen.harvest.remote_zip import read_members
from envgen.harvest.sdist import download_sdist
from envgen.harvest.simple_index import FileLink

CACHE_VERSION = "v1"


def selection_tag(want: Callable[[str], bool]) -> str:
    """The cache name of a ``want`` selection: its ``tag`` attribute (bump it when the
    selection changes), else its qualified name."""
    tag = getattr(want, "tag", None)
    return str(tag) if tag else f"{want.__module__}.{want.__qualname__}"


def _root_relative(want: Callable[[str], bool]) -> Callable[[str], str | None]:
    """An sdist member's name below its top folder ``name-version/``, where ``want`` wants it."""

    def key(name: str) -> str | None:
        parts = name.split("/", 1)
        return parts[1] if len(parts) == 2 and want(parts[1]) else None

    return key


def read_release_files(
    http: Http | None,
    cache: Cache,
    link: FileLink,
    want: Callable[[str], bool],
    whole_limit: int,
) -> tuple[dict[str, str], str]:
    """``(members, verified)``: the text of every member of the sdist or wheel at ``link`` whose
    root-relative name satisfies ``want``, and how its bytes were checked
    (:mod:`envgen.harvest.integrity`). A 404, a corrupt archive or a sha256 mismatch raises
    :class:`~envgen.errors.HarvestError` naming the URL; offline, a cache miss raises
    :class:`~envgen.errors.NetworkError`."""
    key = file_key(link.sha256, link.url)
    member = f"release-files.{CACHE_VERSION}.{selection_tag(want)}.json"
    entry = cache.get_json(key, member, ("files", "verified"))
    if entry is not None:
        return dict(entry["files"]), entry["verified"]
    if cache.offline or http is None:
        raise cache.offline_miss(link.url)
    if link.filename.endswith(".whl"):
        raw, verified = read_members(
            http, link.url, want, sha256=link.sha256, whole_limit=whole_limit
        )
        files = {name: data.decode("utf-8", "replace") for name, data in raw.items()}
    elif link.filename.endswith(".tar.gz"):
        files, verified = download_sdist(http, link, _root_relative(want))
    else:
        raise HarvestError(f"{link.url}: neither a wheel nor a .tar.gz sdist")
    cache.put_blob(
        key, member, json.dumps({"files": files, "verified": verified}, sort_keys=True).encode()
    )
    return files, verified
