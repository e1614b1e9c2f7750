"""HTTP for the harvester: a ``requests`` session with CA bundle, timeouts and retries.

Retries cover connection errors, timeouts, truncated bodies, 429 and 5xx answers, with
exponential backoff plus jitter, a bounded number of attempts and ``Retry-After`` honoured
(capped). When the attempts are exhausted a :class:`~envgen.errors.NetworkError` names the
URL, what went wrong and what to do next.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter

from envgen.errors import NetworkError

NETWORK_HINT = (
    "check your network or proxy; use --index NAME=URL to point at a mirror, "
    "--ca-cert FILE for a TLS-intercepting proxy, or --offline to use the cache"
)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class HttpOptions:
    timeout: float = 30.0  # seconds, per request (connect and each read)
    retries: int = 4  # extra attempts after the first
    backoff: float = 0.5  # first back-off in seconds; doubles per attempt
    backoff_max: float = 30.0  # cap for one back-off, Retry-After included
    ca_cert: str | None = None  # CA bundle; else REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE / certifi
    jobs: int = 8  # connection pool size (one per worker thread)


def make_session(ca_cert: str | None = None, *, pool_size: int = 8) -> requests.Session:
    """A session verifying TLS against ``ca_cert``, else ``REQUESTS_CA_BUNDLE``, else certifi."""
    session = requests.Session()
    bundle = ca_cert or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        if not os.path.exists(bundle):
            raise NetworkError(
                f"CA bundle {bundle} does not exist",
                hint="pass --ca-cert with a PEM file, or fix REQUESTS_CA_BUNDLE",
            )
        session.verify = bundle
    adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = "envgen-matrix-update (+https://pypi.org/project/envgen/)"
    return session


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())


class Http:
    """GETs with retries. Thread-safe for concurrent ``get`` calls."""

    def __init__(
        self,
        options: HttpOptions = HttpOptions(),
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options
        self.session = session or make_session(options.ca_cert, pool_size=options.jobs)
        self._sleep = sleep

    def close(self) -> None:
        self.session.close()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = self.options.backoff * (2**attempt)
        delay += random.uniform(0, self.options.backoff)  # jitter spreads concurrent retries
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.options.backoff_max)

    def get(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
        allow: frozenset[int] = frozenset({200, 206, 304}),
    ) -> requests.Response | None:
        """GET ``url``; ``None`` on 404/410. Non-streamed bodies are read inside the retry loop
        so a truncated body is retried like a dropped connection. Streamed responses must be
        closed by the caller."""
        attempts = self.options.retries + 1
        problem = ""
        for attempt in range(attempts):
            retry_after = None
            try:
                response = self.session.get(
                    url, headers=dict(headers or {}), stream=stream, timeout=self.options.timeout
                )
            except requests.Timeout:
                problem = f"timed out after {self.options.timeout:g}s"
            except (
                requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError,
            ) as exc:
                problem = f"truncated response ({type(exc).__name__})"
            except requests.ConnectionError as exc:
                problem = f"connection failed ({type(exc).__name__})"
            except requests.RequestException as exc:  # redirect loop, bad URL: not retried
                raise NetworkError(f"GET {url} failed: {type(exc).__name__}: {exc}",
                                   hint=NETWORK_HINT) from None
            else:
                status = response.status_code
                if status in allow:
                    if stream:
                        return response
                    try:
                        _ = response.content
                    except (
                        requests.exceptions.ChunkedEncodingError,
                        requests.exceptions.ContentDecodingError,
                        requests.ConnectionError,
                    ) as exc:
                        problem = f"truncated response ({type(exc).__name__})"
                    else:
                        return response
                    finally:
                        response.close()
                else:
                    response.close()
                    if status in (404, 410):
                        return None
                    if status not in RETRY_STATUSES:
                        raise NetworkError(
                            f"GET {url} answered HTTP {status} {response.reason or ''}".rstrip(),
                            hint=NETWORK_HINT,
                        )
                    problem = f"HTTP {status} {response.reason or ''}".rstrip()
                    retry_after = _retry_after(response.headers.get("Retry-After"))
            if attempt + 1 < attempts:
                self._sleep(self._backoff(attempt, retry_after))
        raise NetworkError(
            f"GET {url} failed after {attempts} attempt{'s' if attempts > 1 else ''}: {problem}",
            hint=NETWORK_HINT,
        )
