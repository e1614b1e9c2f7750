"""Small, fast helpers over PEP 440 versions and specifiers.

The resolver compares the same few hundred versions against the same few dozen specifiers
many thousands of times, so parsing is memoized here. No version facts live in this module.

PEP 440 is packaging's. Importing ``packaging.specifiers`` costs ~10 ms (it loads
packaging.tags: subprocess, sysconfig, logging), as much as the rest of a resolve, so packaging
is imported on first use, and :func:`spec_contains` answers itself when the version and every
clause are plain release numbers (``>=2.1,<2.6``, ``==12.*``, ``~=3.10``; all of matrix/),
falling back to packaging for anything else. Hand-written part: ``_plain_contains`` (reason:
that import cost on every command; tests/unit/test_versions.py checks it against packaging).
"""

from __future__ import annotations

import re
from functools import cache

from envgen.errors import UsageError

_PY_RE = re.compile(r"^(\d+)\.(\d+)(t?)$")
_PLAIN = re.compile(r"\d+(?:\.\d+)*")
_CLAUSE = re.compile(r"\s*(==|!=|<=|>=|<|>|~=)\s*(\d+(?:\.\d+)*)(\.\*)?\s*")


@cache
def parse_version(text: str):
    """A ``packaging.version.Version``."""
    from packaging.version import Version

    return Version(text)


@cache
def parse_spec(text: str):
    """A ``packaging.specifiers.SpecifierSet``."""
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(text)


@cache
def spec_contains(spec: str, version: str) -> bool:
    """Whether ``version`` satisfies PEP 440 ``spec`` ("" matches everything).

    Pre-releases are accepted when the specifier names them, as pip does.
    """
    if not spec:
        return True
    if _PLAIN.fullmatch(version):
        plain = _plain_contains(spec, version)
        if plain is not None:
            return plain
    return parse_spec(spec).contains(parse_version(version), prereleases=True)


def _release(text: str) -> tuple[int, ...]:
    """A release number without its trailing zeros (2.5.0 → (2, 5)), as PEP 440 compares."""
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _plain_contains(spec: str, version: str) -> bool | None:
    """``spec_contains`` for a plain release ``version`` when every clause of ``spec`` is an
    operator and a plain release number (== / != may end in .*); None otherwise."""
    clauses = spec.split(",")
    parsed = []
    for clause in clauses:
        m = _CLAUSE.fullmatch(clause)
        if m is None or (m.group(3) and m.group(1) not in ("==", "!=")) or (
                m.group(1) == "~=" and "." not in m.group(2)):
            return None
        parsed.append(m.groups())
    have = _release(version)
    digits = [int(p) for p in version.split(".")]
    for op, number, wildcard in parsed:
        if wildcard:
            prefix = [int(p) for p in number.split(".")]
            padded = digits + [0] * (len(prefix) - len(digits))
            ok = padded[:len(prefix)] == prefix
            if (op == "==") != ok:
                return False
            continue
        want = _release(number)
        if op == "~=":
            prefix = [int(p) for p in number.split(".")][:-1]
            padded = digits + [0] * (len(prefix) - len(digits))
            if not (have >= want and padded[:len(prefix)] == prefix):
                return False
        elif not {"==": have == want, "!=": have != want, "<=": have <= want,
                  ">=": have >= want, "<": have < want, ">": have > want}[op]:
            return False
    return True


_LOCAL = r"(?i)(\d+(?:\.\d+)*)(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?"  # (compiled on use)


def normalized_version(text: str) -> str:
    """``str(Version(text))``: "2.05.0" → "2.5.0"; a plain release without packaging. Raises
    ValueError (packaging's InvalidVersion) for text that is no PEP 440 version."""
    if _PLAIN.fullmatch(text):
        return ".".join(str(int(p)) for p in text.split("."))
    return str(parse_version(text))


def public_version(text: str) -> str:
    """``Version(text).public`` (the local label dropped: "2.5.1+cu121" → "2.5.1"); a plain
    release (with a local label or not) without packaging. ValueError if no version."""
    m = re.fullmatch(_LOCAL, text)
    if m:
        return ".".join(str(int(p)) for p in m.group(1).split("."))
    return parse_version(text).public


def release(text: str) -> tuple[int, ...]:
    """``Version(text).release`` ("2.5.1+cu121" → (2, 5, 1)); a plain release (with a local
    label or not) without packaging. ValueError if ``text`` is no version."""
    m = re.fullmatch(_LOCAL, text)
    if m:
        return tuple(int(p) for p in m.group(1).split("."))
    return parse_version(text).release


def check_spec(text: str) -> None:
    """Raise ValueError (packaging's InvalidSpecifier) unless ``text`` is a PEP 440
    specifier; one of plain clauses (see ``_plain_contains``) is checked without packaging."""
    if text.strip() and _plain_contains(text, "0") is not None:
        return
    parse_spec(text)


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
    from packaging.specifiers import InvalidSpecifier
    from packaging.version import InvalidVersion

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
