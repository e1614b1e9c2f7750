"""SHA-256 without importing hashlib where that is cheaper.

Hand-written (reason: ``import hashlib`` loads OpenSSL, ~3-5 ms of a command's start-up, while
CPython ships its own SHA-256 (``_sha256``, ``_sha2`` from 3.12), ~6x slower per byte: the
better choice for a key of a few bytes, or a few hundred small files, and the worse one for
megabytes). :func:`small_sha256` is for the first; :class:`Hasher` switches to OpenSSL once
the bytes hashed in a process pass :data:`SWITCH_BYTES`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (start-up)
if TYPE_CHECKING:
    from typing import Any

SWITCH_BYTES = 1 << 20  # past 1 MiB hashed, importing OpenSSL's SHA-256 costs less than it saves


def _builtin() -> Any:
    try:
        from _sha256 import sha256  # CPython ≤ 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython ≥ 3.12
        except ImportError:  # pragma: no cover - other interpreters
            from hashlib import sha256
    return sha256


def small_sha256(data: bytes = b"") -> Any:
    """A SHA-256 object over ``data`` (``update``, ``digest``, ``hexdigest``), without
    OpenSSL: for keys and other small inputs."""
    return _builtin()(data)


class Hasher:
    """``digest(data)``: SHA-256 digests of many inputs, by CPython's own SHA-256 until the
    total passes ``switch`` bytes, then by hashlib's (OpenSSL) — the same digests either way."""

    def __init__(self, switch: int = SWITCH_BYTES) -> None:
        self.switch, self.hashed, self._sha256 = switch, 0, _builtin()

    def digest(self, data: bytes) -> bytes:
        self.hashed += len(data)
        if self.hashed > self.switch and self.switch >= 0:
            import hashlib

            self._sha256, self.switch = hashlib.sha256, -1
        return self._sha256(data).digest()
