"""Small, fast helpers over PEP 440 versions and specifiers.

The resolver compares the same few hundred versions against the same few dozen specifiers
many thousands of times, so parsing is memoized here. No version facts live in this module.
"""

from __future__ import annotations

import re
from functools import cache

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envgen.errors import UsageError

_PY_RE = re.compile(r"^(\d+)\.(\d+)(t?)$")


@cache
def parse_version(text: str) -> Version:
    return Version(text)


@cache
def parse_spec(text: str) -> SpecifierSet:
    return SpecifierSet(text)


@cache
def spec_contains(spec: str, version: str) -> bool:
    """Whether ``version`` satisfies PEP 440 ``spec`` ("" matches everything).

    Pre-releases are accepted when the specifier names them, as pip does.
    """
    if not spec:
        return True
    return parse_spec(spec).contains(parse_version(version), prereleases=True)


def python_version(tag: str) -> str:
    """The numeric part of a Python version string: "3.13t" → "3.13"."""
    return tag[:-1] if tag.endswith("t") else tag


@cache
def python_key(tag: str) -> tuple[int, int, bool]:
    m = _PY_RE.match(tag)
    if not m:
        raise ValueError(f"not a Python version: {tag!r}")
    return int(m.group(1)), int(m.group(2)), bool(m.group(3))


@cache
def dotted_key(text: str) -> tuple[int, ...]:
    """Numeric sort key for dotted versions such as CUDA "12.1" or a driver "535.104.05"."""
    return tuple(int(p) for p in text.split("."))


def version_matcher(option: str, value: str):
    """Turn a user's version request into a predicate over version strings.

    Accepted forms: an exact version ("2.5.1"), a prefix ("2.5" matches 2.5.*), or a PEP 440
    specifier (">=2.4,<2.6"). Raises UsageError naming the option on anything else.
    """
    value = value.strip()
    if not value:
        raise UsageError(f"{option} is empty", hint=f"give a version, e.g. {option} 2.5",
                         source=option)
    if value[0] in "<>=!~":
        try:
            parse_spec(value)
        except InvalidSpecifier:
            raise UsageError(
                f"{option} {value!r} is not a valid version specifier",
                hint=f"use a PEP 440 specifier such as {option} '>=2.4,<2.6' or a version",
                source=option,
            ) from None
        return lambda v: spec_contains(value, v)
    try:
        wanted = parse_version(value)
    except InvalidVersion:
        raise UsageError(
            f"{option} {value!r} is not a version",
            hint=f"use a version such as {option} 2.5 or {option} 2.5.1", source=option,
        ) from None
    parts = len(wanted.release)

    def match(v: str) -> bool:
        got = parse_version(v)
        if wanted.local is not None or wanted.pre is not None or wanted.dev is not None:
            return got == wanted
        return got.release[:parts] == wanted.release and (parts >= 3 or got.pre is None)

    return match
