"""One HTTP request to a loopback test server, answered as (status, body): an HTTP error is a
status, not an exception."""

from __future__ import annotations

import urllib.error
import urllib.request


def call(method: str, url: str, data: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
