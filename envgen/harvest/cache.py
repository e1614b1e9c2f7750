"""The harvester's on-disk cache (default ``~/.cache/envgen/http``, or ``ENVGEN_CACHE_DIR``).

Two kinds of entries:

* ``index-pages/`` — index pages and Release files, an HTTP cache kept by CacheControl (the
  cache pip uses; picked over requests-cache because it is a small adapter on the session
  envgen already has, with a plain file store and no database). :func:`fetch_page` always
  revalidates a stored page (its ``ETag`` / ``Last-Modified``: a 304 costs a few hundred
  bytes), keeps only pages its caller's parser accepted, and ``--offline`` reads the stored
  pages, fresh or not, following stored redirects.
* ``blobs/`` — facts extracted from files (a wheel's METADATA, a member of a wheel, an sdist's
  requirements), keyed by the file's sha256 and the member name. Hand-written, because it is
  not HTTP caching: the entries are facts read by Range from immutable files, not responses.
  A blob is written only after the bytes it was read from passed the checks that apply to them
  (:mod:`envgen.harvest.integrity`) and records how they were checked (``verified``); bytes
  that do not match the index's sha256 leave nothing here.

Every write goes to a temporary file in the same directory and is renamed into place, so a
killed run leaves either the old entry or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urljoin

from cachecontrol import CacheControlAdapter
from cachecontrol.caches import FileCache
from cachecontrol.controller import CacheController
from cachecontrol.heuristics import BaseHeuristic
from cachecontrol.serialize import Serializer
from requests import Request
from requests.utils import default_headers

from envgen.atomic import write_file
from envgen.config import cache_root
from envgen.errors import NetworkError
from envgen.harvest.http import USER_AGENT, Http

OFFLINE_HINT = "run `envgen matrix update` once online to fill the cache, or drop --offline"
PAGES = "index-pages"
REDIRECTS = (301, 302, 303, 307, 308)
T = TypeVar("T")


def default_cache_dir() -> Path:
    return cache_root() / "http"


def atomic_write(path: Path, data: bytes) -> None:
    """A cache entry, whole or not at all (no fsync: a lost entry is just re-fetched)."""
    write_file(path, data, durable=False)


@dataclass(frozen=True)
class Page:
    body: bytes
    content_type: str  # as the server sent it ("" when it sent none)
    url: str  # after redirects


class _Controller(CacheController):
    """CacheControl's controller, keeping redirects too (``--offline`` follows them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, status_codes=(200, 203, 300, *REDIRECTS), **kwargs)


class _KeepForOffline(BaseHeuristic):
    """Makes every answer storable (stale at once, so it is revalidated or re-fetched online,
    never served unasked): a page without ``ETag`` or ``max-age`` is needed offline too."""

    def update_headers(self, response: Any) -> dict[str, str]:
        if "etag" in response.headers:
            return {}
        date = response.headers.get("date") or formatdate(usegmt=True)
        return {"date": date, "expires": date}

    def warning(self, response: Any) -> None:
        return None


class Cache:
    """The cache at ``root``: index pages (:func:`fetch_page`) and blobs; ``offline``: never
    go to the network, read what is stored."""

    def __init__(self, root: Path | str | None = None, *, offline: bool = False) -> None:
        self.root = Path(root).expanduser() if root else default_cache_dir()
        self.offline = offline
        self.pages = FileCache(str(self.root / PAGES))
        self._lock = threading.Lock()
        self._clients: dict[int, Http] = {}

    # -- index pages (HTTP cache) ---------------------------------------------------------
    def page_client(self, http: Http) -> Http:
        """``http`` with this cache's CacheControl adapter mounted (one per ``http``)."""
        with self._lock:
            client = self._clients.get(id(http))
            if client is None:
                adapter = CacheControlAdapter(cache=self.pages, controller_class=_Controller,
                                              heuristic=_KeepForOffline(),
                                              **http.adapter_options())
                client = self._clients[id(http)] = http.with_adapter(adapter)
            return client

    def cached_page(self, url: str, accept: str | None = None) -> Page | None:
        """The stored answer for ``url`` (redirects followed), fresh or stale; ``None`` when
        there is none or it was stored for another ``Accept``."""
        headers = {**default_headers(), "User-Agent": USER_AGENT, **_headers(accept)}
        for _ in range(10):  # as the online request was (Vary), redirects followed
            request = Request("GET", url, headers=headers).prepare()
            data = self.pages.get(CacheController.cache_url(url))
            response = Serializer().loads(request, data) if data else None
            if response is None:
                return None
            location = response.headers.get("location")
            if response.status in REDIRECTS and location:
                url = urljoin(url, location)
                continue
            if response.status != 200:
                return None
            body = response.read(decode_content=True)
            return Page(body, response.headers.get("content-type", ""), url)
        return None

    def _restore(self, url: str, entry: bytes | None) -> None:
        key = CacheController.cache_url(url)
        if entry is None:
            self.pages.delete(key)
        else:
            self.pages.set(key, entry)

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


def _headers(accept: str | None) -> dict[str, str]:
    """A page request's headers: always revalidated (``max-age=0``, as pip asks for pages)."""
    return {"Cache-Control": "max-age=0", **({"Accept": accept} if accept else {})}


def fetch_page(http: Http | None, cache: Cache, url: str, accept: str | None,
               parse: Callable[[Page], T]) -> T | None:
    """``parse(page)`` of the page at ``url``; ``None`` when the server answers 404/410.

    Offline (or ``http`` None) the stored page is parsed and a miss raises
    :class:`~envgen.errors.NetworkError`. Online the page is revalidated through the HTTP
    cache; a page ``parse`` raises on is not kept (the entry it replaced is put back)."""
    if cache.offline or http is None:
        page = cache.cached_page(url, accept)
        if page is None:
            raise cache.offline_miss(url)
        return parse(page)
    before = cache.pages.get(CacheController.cache_url(url))
    response = cache.page_client(http).get(url, headers=_headers(accept))
    if response is None:
        return None
    if response.status_code == 304:  # the entry it revalidated went away meanwhile
        response = http.get(url, headers={"Accept": accept} if accept else None)
        if response is None:
            return None
    page = Page(response.content, response.headers.get("Content-Type", ""), response.url or url)
    try:
        return parse(page)
    except BaseException:
        cache._restore(url, before)
        if page.url != url:
            cache._restore(page.url, None)
        raise


def file_key(sha256: str | None, url: str) -> str:
    """Cache key of a file: its sha256 when the index states one, else a hash of its URL."""
    return sha256 or "url-" + hashlib.sha256(url.encode()).hexdigest()

