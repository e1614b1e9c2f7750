"""The harvester's on-disk cache (default ``~/.cache/envgen/http``, or ``ENVGEN_CACHE_DIR``).

Two kinds of entries:

* ``pages/`` — index pages keyed by URL + Accept header, stored with their ``ETag`` /
  ``Last-Modified`` so an online run revalidates them (a 304 costs a few hundred bytes).
* ``blobs/`` — facts extracted from files (a wheel's METADATA, a member of a wheel, an sdist's
  requirements), keyed by the file's sha256 and the member name. Files addressed by sha256 are
  immutable, so these never expire. A blob is written only after the bytes it was read from
  passed the checks that apply to them (:mod:`envgen.harvest.integrity`) and records how they
  were checked (``verified``); bytes that do not match the index's sha256 leave nothing here.

Every write goes to a temporary file in the same directory and is renamed into place, so a
killed run leaves either the old entry or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import quote

from envgen.atomic import write_file
from envgen.config import cache_root
from envgen.errors import NetworkError

OFFLINE_HINT = "run `envgen matrix update` once online to fill the cache, or drop --offline"


def default_cache_dir() -> Path:
    return cache_root() / "http"


def atomic_write(path: Path, data: bytes) -> None:
    """A cache entry, whole or not at all (no fsync: a lost entry is just re-fetched)."""
    write_file(path, data, durable=False)


class Cache:
    def __init__(self, root: Path | str | None = None, *, offline: bool = False) -> None:
        self.root = Path(root).expanduser() if root else default_cache_dir()
        self.offline = offline

    # -- index pages -------------------------------------------------------------------
    def _page_path(self, url: str, accept: str) -> Path:
        digest = hashlib.sha256(f"{accept}\n{url}".encode()).hexdigest()
        return self.root / "pages" / digest[:2] / digest

    def get_page(self, url: str, accept: str) -> tuple[bytes, dict[str, str]] | None:
        path = self._page_path(url, accept)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        header, _, body = raw.partition(b"\n")
        try:
            meta = json.loads(header)
        except ValueError:  # unreadable entry: treat as a miss
            return None
        return body, meta

    def put_page(self, url: str, accept: str, body: bytes, meta: dict[str, str]) -> None:
        header = json.dumps(meta, sort_keys=True).encode()
        atomic_write(self._page_path(url, accept), header + b"\n" + body)

    # -- immutable blobs -----------------------------------------------------------------
    def _blob_path(self, file_key: str, member: str) -> Path:
        return self.root / "blobs" / file_key[:2] / file_key / quote(member, safe="")

    def get_blob(self, file_key: str, member: str) -> bytes | None:
        try:
            return self._blob_path(file_key, member).read_bytes()
        except FileNotFoundError:
            return None

    def get_json(self, file_key: str, member: str, keys: tuple[str, ...]) -> dict | None:
        """A JSON blob holding ``keys``; an unreadable or incomplete entry reads as a miss."""
        raw = self.get_blob(file_key, member)
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
        except ValueError:
            return None
        return entry if isinstance(entry, dict) and all(k in entry for k in keys) else None

    def put_blob(self, file_key: str, member: str, data: bytes) -> None:
        atomic_write(self._blob_path(file_key, member), data)

    def offline_miss(self, url: str) -> NetworkError:
        return NetworkError(f"offline: {url} is not in the cache at {self.root}", hint=OFFLINE_HINT)


def file_key(sha256: str | None, url: str) -> str:
    """Cache key of a file: its sha256 when the index states one, else a hash of its URL."""
    return sha256 or "url-" + hashlib.sha256(url.encode()).hexdigest()


def revalidation_headers(cached: tuple[bytes, dict] | None) -> dict[str, str]:
    """Conditional-request headers for a cached page (its ETag / Last-Modified)."""
    headers: dict[str, str] = {}
    if cached:
        if cached[1].get("etag"):
            headers["If-None-Match"] = cached[1]["etag"]
        if cached[1].get("last_modified"):
            headers["If-Modified-Since"] = cached[1]["last_modified"]
    return headers


def page_meta(response, url: str) -> dict[str, str]:
    """What the cache keeps beside a page's body: its type, final URL and validators."""
    meta = {"content_type": response.headers.get("Content-Type", ""), "url": response.url or url}
    for key, header in (("etag", "ETag"), ("last_modified", "Last-Modified")):
        if response.headers.get(header):
            meta[key] = response.headers[header]
    return meta
