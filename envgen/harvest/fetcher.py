"""What every harvester step shares: HTTP, cache, worker pool, progress, today's date, and the
size up to which a wheel is downloaded whole (and checked against its sha256) rather than read
by Range (``[refresh] max_whole_download_mb`` in sources.toml)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

from envgen.harvest.cache import Cache, file_key
from envgen.harvest.http import Http
from envgen.harvest.remote_zip import read_members
from envgen.harvest.simple_index import FileLink

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Fetcher:
    http: Http | None  # None when offline
    cache: Cache
    pool: ThreadPoolExecutor
    progress: Callable[[str], None]
    aliases: Mapping[str, str]
    today: str
    whole_limit: int  # bytes

    def map(self, label: str, func: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``func`` over ``items`` on the pool; results in input order whatever the completion
        order; progress lines like ``torch: 312/412 metadata files``; the first error wins."""
        items = list(items)
        if not items:
            return []
        futures = {self.pool.submit(func, item): n for n, item in enumerate(items)}
        results: list[Any] = [None] * len(items)
        step = max(1, len(items) // 10)
        try:
            for done, future in enumerate(as_completed(futures), 1):
                results[futures[future]] = future.result()
                if done % step == 0 or done == len(items):
                    self.progress(f"{label}: {done}/{len(items)}")
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return results

    def wheel_facts(
        self,
        link: FileLink,
        cache_member: str,
        keys: tuple[str, ...],
        want: Callable[[str], bool],
        compute: Callable[[dict[str, bytes]], dict[str, Any]],
    ) -> dict[str, Any]:
        """``compute(members)`` plus ``"verified"`` for the wheel at ``link``: the members
        ``want`` selects, read by Range (or whole below ``whole_limit``, sha256-checked) and the
        result cached by the wheel's sha256 under ``cache_member`` (an entry lacking one of
        ``keys`` is a miss). Offline, a cache miss
        raises :class:`~envgen.errors.NetworkError`; an unreadable wheel raises
        :class:`~envgen.errors.HarvestError`."""
        key = file_key(link.sha256, link.url)
        cached = self.cache.get_json(key, cache_member, (*keys, "verified"))
        if cached is not None:
            return cached
        if self.cache.offline or self.http is None:
            raise self.cache.offline_miss(link.url)
        members, verified = read_members(self.http, link.url, want, sha256=link.sha256,
                                         whole_limit=self.whole_limit)
        facts = {**compute(members), "verified": verified}
        self.cache.put_blob(key, cache_member, json.dumps(facts, sort_keys=True).encode())
        return facts

    def source(self, link: FileLink, index: str, verified: str) -> dict[str, Any]:
        """A record's provenance; ``verified``: how the bytes read were checked
        (:mod:`envgen.harvest.integrity`)."""
        return {
            "url": link.url,
            "sha256": link.sha256,
            "uploaded": link.uploaded,
            "retrieved": self.today,
            "index": index,
            "verified": verified,
        }
