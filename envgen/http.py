"""HTTP sessions for every stage that downloads: ``requests`` with a CA bundle, a pooled
adapter and urllib3's :class:`~urllib3.util.Retry` (connection errors, timeouts, 429 and 5xx
answers; exponential backoff with jitter; ``Retry-After`` honoured, capped).

Input: a CA bundle and retry options. Output: a configured ``requests.Session``. Used by the
harvester (:class:`envgen.harvest.http.Http`) and by the lock stage's sdist reader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from envgen.errors import NetworkError

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "envgen (+https://pypi.org/project/envgen-dl/)"


@dataclass(frozen=True)
class HttpOptions:
    timeout: float = 30.0  # seconds, per request (connect and each read)
    retries: int = 4  # extra attempts after the first
    backoff: float = 0.5  # urllib3's backoff factor: waits 0, 2×, 4×, … this, plus jitter
    backoff_max: float = 30.0  # cap for one back-off, Retry-After included
    ca_cert: str | None = None  # CA bundle; else REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE / certifi
    jobs: int = 8  # connection pool size (one per worker thread)


DEFAULT_OPTIONS = HttpOptions()


class _Retry(Retry):
    """urllib3's Retry with a server's ``Retry-After`` capped at ``backoff_max``."""

    def get_retry_after(self, response: Any) -> float | None:
        after = super().get_retry_after(response)
        return None if after is None else min(after, self.backoff_max)


def retry_policy(options: HttpOptions = HttpOptions()) -> Retry:
    """The retries of ``options`` as a urllib3 ``Retry`` (GET/HEAD only; the last 429/5xx
    answer is returned, not raised, so :meth:`Http.get` can name it)."""
    return _Retry(total=options.retries, backoff_factor=options.backoff,
                  backoff_max=options.backoff_max, backoff_jitter=options.backoff,
                  status_forcelist=RETRY_STATUSES, allowed_methods=frozenset({"GET", "HEAD"}),
                  respect_retry_after_header=True, raise_on_status=False)


def make_session(ca_cert: str | None = None, *, pool_size: int = 8, retry: Retry | None = None,
                 adapter: HTTPAdapter | None = None) -> requests.Session:
    """A session verifying TLS against ``ca_cert``, else ``REQUESTS_CA_BUNDLE``, else certifi,
    with ``adapter`` (default: a pooled ``HTTPAdapter`` retrying by ``retry``) mounted."""
    session = requests.Session()
    bundle = ca_cert or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        if not os.path.exists(bundle):
            raise NetworkError(
                f"CA bundle {bundle} does not exist",
                hint="pass --ca-cert with a PEM file, or fix REQUESTS_CA_BUNDLE",
            )
        session.verify = bundle
    adapter = adapter or HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size,
                                     max_retries=retry or retry_policy())
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = USER_AGENT
    return session
