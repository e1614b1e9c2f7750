"""HTTP for the harvester: a ``requests`` session with CA bundle, timeouts and retries.

Input: :class:`HttpOptions`. Output: :class:`Http`, whose ``get`` answers a response, ``None``
for 404/410, or raises :class:`~envgen.errors.NetworkError` naming the URL, what went wrong
and what to do next. Retries are urllib3's :class:`~urllib3.util.Retry` on the session's
adapter: connection errors, timeouts, 429 and 5xx answers, a bounded number of attempts,
exponential backoff with jitter, ``Retry-After`` honoured (capped at ``backoff_max``).

Hand-written part (the loop in :meth:`Http.get`), kept because ``requests`` reads a body after
urllib3 has returned the response: a body cut off mid-transfer is retried there, counted and
spaced by the same ``Retry``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from envgen.errors import NetworkError
from envgen.http import (  # noqa: F401  (re-exported: the harvester's modules import them here)
    DEFAULT_OPTIONS,
    RETRY_STATUSES,
    USER_AGENT,
    HttpOptions,
    make_session,
    retry_policy,
)

NETWORK_HINT = (
    "check your network or proxy; use --index NAME=URL to point at a mirror, "
    "--ca-cert FILE for a TLS-intercepting proxy, or --offline to use the cache"
)
_TRUNCATED = (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError,
              requests.ConnectionError)


def _failure(exc: requests.RequestException, timeout: float) -> str:
    """What went wrong, in words, for a request that raised ``exc`` after its retries."""
    reason = exc.args[0].reason if exc.args and isinstance(exc.args[0], MaxRetryError) else exc
    if isinstance(reason, NewConnectionError):  # a subclass of urllib3's TimeoutError
        return f"connection failed ({type(reason).__name__})"
    if isinstance(exc, requests.Timeout) or isinstance(reason, Urllib3Timeout):
        return f"timed out after {timeout:g}s"
    return f"connection failed ({type(reason).__name__})"


def _discard(response: requests.Response) -> None:
    """Read (a caching adapter stores or drops a body only once it is read) and close."""
    with suppress(requests.RequestException):
        _ = response.content
    response.close()


class Http:
    """GETs with retries. Thread-safe for concurrent ``get`` calls."""

    def __init__(self, options: HttpOptions = DEFAULT_OPTIONS,
                 session: requests.Session | None = None) -> None:
        self.options = options
        self.retry = retry_policy(options)
        self.session = session or make_session(options.ca_cert, pool_size=options.jobs,
                                               retry=self.retry)
        self._derived: list[Http] = []

    def adapter_options(self) -> dict[str, Any]:
        """``HTTPAdapter`` keyword arguments for this client's pool size and retries."""
        return {"pool_connections": self.options.jobs, "pool_maxsize": self.options.jobs,
                "max_retries": self.retry}

    def with_adapter(self, adapter: HTTPAdapter) -> Http:
        """A client with these options whose session uses ``adapter`` (made with
        :meth:`adapter_options`), e.g. a caching one; closed with this one."""
        derived = Http(self.options, make_session(self.options.ca_cert, adapter=adapter))
        self._derived.append(derived)
        return derived

    def close(self) -> None:
        for derived in self._derived:
            derived.close()
        self.session.close()

    def get(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
        allow: frozenset[int] = frozenset({200, 206, 304}),
    ) -> requests.Response | None:
        """GET ``url``; ``None`` on 404/410. Non-streamed bodies are read here (``requests``
        is always asked to stream), so a truncated body is retried like a dropped connection.
        Streamed responses must be closed by the caller."""
        attempts = self.options.retries + 1
        failed = f"GET {url} failed after {attempts} attempt{'s' if attempts > 1 else ''}"
        retry = self.retry
        while True:
            try:
                response = self.session.get(url, headers=dict(headers or {}), stream=True,
                                            timeout=self.options.timeout)
            except (requests.Timeout, requests.ConnectionError) as exc:  # retries used up
                raise NetworkError(f"{failed}: {_failure(exc, self.options.timeout)}",
                                   hint=NETWORK_HINT) from None
            except requests.RequestException as exc:  # redirect loop, bad URL: not retried
                raise NetworkError(f"GET {url} failed: {type(exc).__name__}: {exc}",
                                   hint=NETWORK_HINT) from None
            status = response.status_code
            if status not in allow:
                _discard(response)
                if status in (404, 410):
                    return None
                answer = f"HTTP {status} {response.reason or ''}".rstrip()
                if status in RETRY_STATUSES:  # what urllib3 retried, to the last attempt
                    raise NetworkError(f"{failed}: {answer}", hint=NETWORK_HINT)
                raise NetworkError(f"GET {url} answered {answer}", hint=NETWORK_HINT)
            if stream:
                return response
            try:
                _ = response.content
                return response
            except _TRUNCATED as exc:
                try:
                    retry = retry.increment("GET", url, error=ProtocolError(str(exc)))
                except MaxRetryError:
                    raise NetworkError(f"{failed}: truncated response ({type(exc).__name__})",
                                       hint=NETWORK_HINT) from None
                retry.sleep()
            finally:
                response.close()
