"""Checking downloaded bytes against the sha256 the index states, and saying how it went.

Every harvested record's ``source`` carries ``verified``, how much of what the facts were
read from was checked (strongest first):

``"sha256"``
    the whole file was downloaded and its sha256 matched the index's.
``"metadata-sha256"``
    the facts come from the PEP 658/714 ``.metadata`` file, whose bytes matched the sha256
    the index states for it (``data-core-metadata="sha256=…"`` / ``"core-metadata"``).
``"range"``
    the members were read with HTTP Range requests from a wheel too large to download whole
    (``[refresh] max_whole_download_mb`` in sources.toml): each member's CRC-32 was checked by
    ``zipfile``, but the file's sha256 cannot be checked without all of its bytes.
``"none"``
    the index stated no hash for the bytes read (no ``#sha256=`` / ``hashes``, or a PEP 658
    file served without a stated hash).

A mismatch raises :class:`~envgen.errors.HarvestError`; nothing read from those bytes is used
or cached.
"""

from __future__ import annotations

import hashlib

from envgen.errors import HarvestError

SHA256, METADATA_SHA256, RANGE, NONE = "sha256", "metadata-sha256", "range", "none"
LEVELS = (SHA256, METADATA_SHA256, RANGE, NONE)  # strongest first
MISMATCH_HINT = (
    "the index or a proxy served different bytes than it lists: a tampered or corrupted "
    "mirror; use another mirror with --index NAME=URL"
)


def weakest(*levels: str) -> str:
    return max(levels, key=LEVELS.index)


def mismatch(url: str, expected: str, actual: str) -> HarvestError:
    return HarvestError(
        f"{url}: sha256 mismatch: the index lists {expected}, the downloaded bytes hash to "
        f"{actual}",
        hint=MISMATCH_HINT,
    )


def check(url: str, expected: str | None, data: bytes) -> str:
    """``SHA256`` when ``data`` matches ``expected``; ``NONE`` when no hash was stated; a
    mismatch raises HarvestError."""
    if not expected:
        return NONE
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected.lower():
        raise mismatch(url, expected.lower(), actual)
    return SHA256


class HashingReader:
    """A read-only stream wrapper hashing every byte read through it (for streamed sdists)."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n) if n is not None and n >= 0 else self.raw.read()
        self.digest.update(data)
        self.size += len(data)
        return data

    def drain(self, chunk: int = 1 << 16) -> None:
        """Read (and hash) what the consumer left unread, up to the end of the stream."""
        while self.read(chunk):
            pass

    def check(self, url: str, expected: str | None) -> str:
        if not expected:
            return NONE
        actual = self.digest.hexdigest()
        if actual != expected.lower():
            raise mismatch(url, expected.lower(), actual)
        return SHA256
