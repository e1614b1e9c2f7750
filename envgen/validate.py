"""Checks for values that come from outside: flags, config files, environment variables.

Every value is checked where it enters (the CLI's settings, the library's option types) by
type and shape, so nothing odd reaches a Dockerfile, a lock file, a subprocess argument or a
path: no control characters anywhere (a newline in a base image would add Dockerfile
instructions), image references as image references, URLs as URLs, dates as dates, ids as
ids, paths made absolute. Each check raises :class:`~envgen.errors.UsageError` naming the
value, what is wrong, the fix and ``source`` (``--flag``, ``ENV_VAR`` or ``file:key``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from envgen.errors import UsageError

# C0 and C1 controls, DEL, the line and paragraph separators (a set, not a regex: a character
# class beyond Latin-1 costs ~0.5 ms to compile, on every command's start-up)
_CONTROL = frozenset(map(chr, (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)))


def shown(value: str) -> str:
    """Text from a file, a node or a tool, for a terminal: each control character as its
    escape (``\\x1b``), so that none can move the cursor, retitle or clear the screen."""
    if value.isprintable():
        return value
    return "".join(c.encode("unicode_escape").decode("ascii") if c in _CONTROL else c
                   for c in value)


def shown_lines(value: str) -> str:
    """:func:`shown` for text of several lines: each line escaped, the line breaks kept."""
    if value.isprintable():
        return value
    return "\n".join(map(shown, value.split("\n")))


def describe(value: Any) -> str:
    """A value as an error message shows it: quoted, control characters escaped, clipped."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…'"


def text(value: Any, what: str, source: str | None = None, *, allow_empty: bool = False
         ) -> str:
    """A single-line string without control characters."""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be a string, not {type(value).__name__} ({value!r})",
                         hint="write it as a quoted string", source=source)
    if not value.strip() and not allow_empty:
        raise UsageError(f"{what} is empty", hint="give a value, or leave the setting out",
                         source=source)
    bad = next((c for c in value if c in _CONTROL), None) if not value.isprintable() else None
    if bad:
        raise UsageError(f"{what} {describe(value)} contains a control character "
                         f"({bad!r}); newlines and other control characters are never "
                         "valid here", hint="remove it (a copy-paste may have added a line "
                         "break)", source=source)
    return value


def strings(value: Any, what: str, source: str | None = None) -> tuple[str, ...]:
    """A list of strings (a single string counts as a list of one)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise UsageError(f"{what} must be a list of strings, not {type(value).__name__}",
                         hint='write it as ["a", "b"]', source=source)
    return tuple(text(v, what, source) for v in value)


def path(value: Any, what: str, source: str | None = None) -> Path:
    """A filesystem path, ``~`` expanded, made absolute (not required to exist)."""
    return Path(os.path.abspath(os.path.expanduser(text(value, what, source))))


def url(value: Any, what: str, source: str | None = None,
        schemes: tuple[str, ...] = ("https", "http")) -> str:
    """An absolute URL with one of ``schemes`` (and a host, for http/https)."""
    raw = text(value, what, source).strip()
    if any(c.isspace() for c in raw):
        raise UsageError(f"{what} {describe(raw)} contains whitespace; a URL cannot",
                         hint="percent-encode spaces (%20) or fix the URL", source=source)
    from urllib.parse import urlsplit

    parts = urlsplit(raw)
    if parts.scheme not in schemes or (parts.scheme in ("http", "https") and not parts.netloc):
        raise UsageError(f"{what} {describe(raw)} is not a {'/'.join(schemes)} URL",
                         hint=f"e.g. {_EXAMPLE_URL}", source=source)
    return raw


_EXAMPLE_URL = "https://mirror.example/simple"


def channel(value: Any, what: str, source: str | None = None) -> str:
    """A conda channel: a name (conda-forge), a URL, or a local directory."""
    raw = text(value, what, source).strip()
    if any(c.isspace() for c in raw):
        raise UsageError(f"{what} {describe(raw)} contains whitespace",
                         hint="give a channel name, URL or directory", source=source)
    if "://" in raw:
        return url(raw, what, source, schemes=("https", "http", "file", "s3", "gcs", "oci"))
    return raw


# distribution/reference's grammar (the one docker itself applies); no maintained Python
# package validates image references, and it is five regular expressions.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
# patterns as text, compiled (and cached by re) on first use: most commands check no image
_REFERENCE = (
    rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$")


def image_ref(value: Any, what: str, source: str | None = None) -> str:
    """A container image reference: ``[registry[:port]/]name[:tag][@sha256:…]``."""
    raw = text(value, what, source).strip()
    if len(raw) > 512 or not re.match(_REFERENCE, raw):
        raise UsageError(f"{what} {describe(raw)} is not an image reference",
                         hint="use [registry/]name[:tag][@sha256:digest], e.g. "
                         "docker.io/library/debian:12 or local/debian:bookworm", source=source)
    return raw


_ID = r"^[A-Za-z_][A-Za-z0-9_]*$"


def identifier(value: Any, what: str, source: str | None = None) -> str:
    raw = text(value, what, source)
    if not re.match(_ID, raw):
        raise UsageError(f"{what} {describe(raw)} is not a name (letters, digits, _; not "
                         "starting with a digit)", hint="e.g. MAX_JOBS", source=source)
    return raw


_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


def name(value: Any, what: str, source: str | None = None) -> str:
    """A simple name: letters, digits, ``._-``; not starting with ``-`` (so it can never be
    read as an option by a program it is passed to)."""
    raw = text(value, what, source)
    if not re.match(_NAME, raw):
        raise UsageError(f"{what} {describe(raw)} is not a valid name (letters, digits, . _ -; "
                         "starting with a letter or digit)", hint="check the value",
                         source=source)
    return raw


def date(value: Any, what: str, source: str | None = None) -> str:
    """An RFC 3339 date (2026-11-01) or timestamp (2026-11-01T00:00:00Z)."""
    import datetime as dt

    raw = text(value, what, source).strip()
    try:
        if len(raw) == 10:
            dt.date.fromisoformat(raw)
        else:
            stamp = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
            if stamp.tzinfo is None or "T" not in raw.upper():
                raise ValueError("needs a time zone")
    except ValueError:
        raise UsageError(f"{what} {describe(raw)} is not an RFC 3339 date",
                         hint="use YYYY-MM-DD (e.g. 2026-11-01) or YYYY-MM-DDTHH:MM:SSZ",
                         source=source) from None
    return raw


def positive(value: Any, what: str, source: str | None = None, *, zero: bool = False
             ) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{what} must be a number, not {describe(value)}", source=source)
    if value < 0 or (value == 0 and not zero) or value != value or value == float("inf"):
        raise UsageError(f"{what} must be {'≥ 0' if zero else '> 0'}, not {value}",
                         source=source)
    return value


def no_newlines(rendered: str, what: str) -> str:
    """Guard for values rendered into a one-line slot of a generated file (a comment, a
    Dockerfile instruction): refuse instead of letting a line break start a new line."""
    if "\n" in rendered or "\r" in rendered:
        raise UsageError(f"{what} {describe(rendered)} would span lines in a generated file",
                         hint="remove the line break")
    return rendered


_REGISTRY = r"^[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[a-z0-9._/-]+)?$"


def registry(registry: str, source: str = "--registry") -> str:
    """A registry ``host[:port][/path]`` (no scheme), without a trailing slash."""
    reg = registry.strip().rstrip("/")
    if "://" in reg or not re.match(_REGISTRY, reg):
        raise UsageError(f"{source} {registry!r} is not a registry host[/path]",
                         hint="e.g. --registry ghcr.io/acme or --registry 127.0.0.1:5000 "
                         "(no scheme)", source=source)
    return reg
