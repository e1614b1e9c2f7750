"""The lines of a pasted report, cleaned of what GitHub and chat add around them.

Input: the text as pasted (markdown code fences, ``<details>`` blocks, ``> `` quote markers,
``- `` bullets, ``**bold**``, a line wrapped in backticks, terminal colour codes). Output:
:class:`Line` objects holding the 1-based line number, the cleaned text the parsers match and
the source line, trimmed, for ``--explain``. Also the small helpers every format parser shares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_TAG = re.compile(r"</?(?:details|summary|pre|code|br|p|b|i|kbd|sub|sup)\b[^>]*>", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+(?=\S)")
_BOLD = re.compile(r"\*\*")
_VERSION = re.compile(r"^\d+(?:\.\d+)*(?:[.+\-_]?[A-Za-z0-9_.+\-]*)?$")
_PLACEHOLDER = re.compile(r"\[e\.g\.[^\]]*\]|\(e\.g\.[^)]*\)", re.I)


@dataclass(frozen=True)
class Extracted:
    """One fact a report states: ``fact`` (a snapshot field, or ``packages.NAME``,
    ``frameworks.NAME``, ``libaio.headers`` …), its ``value``, the report ``format`` that
    stated it, the 1-based ``line`` and its ``text`` (the source line, trimmed). ``kept`` is
    False for what the snapshot does not use (a conflict, a repeat, an explain-only line);
    ``note`` says why."""

    fact: str
    value: Any
    format: str
    line: int
    text: str
    kept: bool = True
    note: str = ""


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    text: str  # cleaned: what the parsers match
    source: str  # the line as pasted, trimmed
    bullet: bool = False  # it was a list item ("- PyTorch version: 2.0.1"): a template answer


def split(text: str) -> list[Line]:
    """The cleaned lines of ``text``; a fence or tag-only line becomes an empty line."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        clean = _ANSI.sub("", raw).replace("\t", "    ")
        clean = _QUOTE.sub("", clean)
        if _FENCE.match(clean):
            clean = ""
        clean = _TAG.sub("", clean)
        bullet = bool(_BULLET.match(clean))
        clean = _BULLET.sub("", clean, count=1)
        clean = _unwrap(_BOLD.sub("", clean).strip())
        source = "".join(ch for ch in raw.strip() if ch.isprintable())
        out.append(Line(number, clean, source, bullet))
    return out


def _unwrap(text: str) -> str:
    """``text`` without the backticks that wrap it as inline code ("`ERROR: … incompatible.`")
    or that open or close a code span over several lines (an odd one at either end)."""
    if len(text) > 1 and text.startswith("`") and text.endswith("`") and text.count("`") == 2:
        return text[1:-1].strip()
    if text.count("`") % 2 and (text.startswith("`") or text.endswith("`")):
        return text.strip("`").strip()
    return text


def version(value: str | None) -> str | None:
    """``value`` as a version without decorations ("V12.1.105," → "12.1.105"), or None
    when it does not look like one ("Could not collect", "N/A", "[e.g. 1.0]")."""
    if value is None:
        return None
    value = value.strip().strip(",;'\"`").strip().rstrip(".")
    if value[:1] in ("v", "V") and value[1:2].isdigit():
        value = value[1:]
    return value if _VERSION.match(value) else None


def placeholder_free(value: str) -> str:
    """``value`` without the template's examples ("[e.g. Ubuntu 18.04]"), stripped."""
    return _PLACEHOLDER.sub("", value).strip().strip("[]").strip()


def canonical(name: str) -> str:
    """A distribution name as pip compares them: lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


FRAMEWORKS = {"deepspeed": "deepspeed", "megatron-core": "megatron-core",
              "colossalai": "colossalai"}


def package_facts(name: str, value: str | None) -> list[tuple[str, Any]]:
    """The facts one installed distribution gives: packages.NAME, and frameworks.NAME for
    a framework, torch for torch (or "pytorch", as people pin it)."""
    key = canonical(name)
    facts: list[tuple[str, Any]] = [(f"packages.{key}", value)]
    if key in FRAMEWORKS:
        facts.append((f"frameworks.{FRAMEWORKS[key]}", value))
    # "pytorch==1.13.0+cu116": pip has no such distribution (PyPI's "pytorch" only raises), so
    # a pinned "pytorch" in pip's form is what people call torch
    if key in ("torch", "pytorch") and value is not None:
        facts.append(("torch", value))
    return facts


def fact(line: Line, name: str, value: Any, fmt: str, *, kept: bool = True,
         note: str = "") -> Extracted:
    """The :class:`Extracted` of ``line`` stating ``name`` = ``value``."""
    return Extracted(name, value, fmt, line.number, line.source, kept, note)


def near(lines: list[Line], index: int, pattern: re.Pattern[str], before: int,
         after: int) -> bool:
    """Whether a line within ``before`` lines above or ``after`` below ``index`` matches."""
    lo, hi = max(0, index - before), min(len(lines), index + after + 1)
    return any(pattern.search(lines[i].text) for i in range(lo, hi))
