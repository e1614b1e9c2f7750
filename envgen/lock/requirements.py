"""The hash-pinned pip-tools lock files envgen writes (requirements.lock.txt,
build-requirements.lock.txt), read back: each pinned entry with the lines that belong to it.
Standard library only: the GPU batch runner reads them with a machine's own Python."""

from __future__ import annotations

import re

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_SHA256 = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def normalize(name: str) -> str:
    """A distribution name as PEP 503 normalizes it (what packaging's canonicalize_name does;
    here without importing packaging, for the same reason as the module)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(normalized name, version, the entry's text with its --hash lines) of each pin."""
    out: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        m = _PIN.match(line)
        if m:
            out.append((normalize(m[1]), m[2], line))
        elif line.startswith((" ", "\t")) and out:
            name, version, block = out[-1]
            out[-1] = (name, version, block + "\n" + line)
    return out


def pins(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """name → (version, the sha256 of every file the lock accepts for it)."""
    return {name: (version, frozenset(_SHA256.findall(block)))
            for name, version, block in blocks(text)}
