"""What a torch release's own files say about building against it: the C++ standard its headers
require, the host compiler minimums they enforce, and what ``torch.utils.cpp_extension`` does.

Read from one wheel per release by HTTP Range (only the zip's central directory and the
:data:`MEMBERS` below are downloaded; torch wheels are GBs). Each fact carries where it was
read: ``"<member>:<line>: <text>"`` (for a header guard: the line of its ``#if`` / ``#elif`` and
its condition with continuation lines joined; for ``cpp_extension.py``: the line itself).

Where the facts live (measured on PyPI's linux x86_64 wheels of 1.13.0 … 2.15.0; every other
header under ``torch/include`` outside the bundled third-party trees was grepped on 1.13.1,
2.5.1, 2.10.0, 2.12.0, 2.13.0 and 2.15.0 and has no other such ``#error``):

* ``torch/include/c10/util/C++17.h``: ``#if … __cplusplus < 201402L`` / ``201703L`` →
  ``#error You need C++14/17 to compile PyTorch``, and the ``__GNUC__ < N`` /
  ``__clang_major__ < N`` ``#error`` guards (1.13 … 2.11; gone from 2.12 on, so newer
  releases state no compiler minimum in their headers);
* ``torch/include/ATen/ATen.h`` and ``torch/include/torch/csrc/api/include/torch/all.h``:
  ``#if … __cplusplus < 201703L`` / ``202002L`` → ``#error C++NN or later compatible compiler
  is required`` (the only standard guard from 2.12 on);
* ``torch/utils/cpp_extension.py``: ``MINIMUM_GCC_VERSION`` / ``MINIMUM_CLANG_VERSION`` (its own
  compiler check) and the ``-std=c++NN`` that ``BuildExtension`` adds when the user set none.

Only ``#error`` directives count: a fact is the condition of the ``#if`` / ``#elif`` branch that
holds the ``#error`` (an ``#error`` under ``#else`` says nothing usable). The facts
(:func:`header_facts`, all keys always present, ``None`` where the files say nothing):

``cxx_std``
    the highest standard any ``#error`` guard requires: ``"14"``, ``"17"``, ``"20"`` (from
    ``__cplusplus < 201402L`` / ``201703L`` / ``202002L``), with ``cxx_std_where``;
``min_gcc`` / ``min_clang``
    the major versions below which a header ``#error``s (``__GNUC__ < N`` → N,
    ``__clang_major__ < N`` → N), with ``min_gcc_where`` / ``min_clang_where``;
``extension_std``
    the standard ``BuildExtension`` passes (``cpp_flag_prefix + 'c++NN'``; else the first
    ``'-std=c++NN'`` in code), with ``extension_std_where``;
``extension_min_gcc`` / ``extension_min_clang``
    ``MINIMUM_GCC_VERSION`` / ``MINIMUM_CLANG_VERSION`` as dotted strings (``"5.0.0"``), with
    ``…_where``;
``members``
    the :data:`MEMBERS` the wheel has (sorted), i.e. what was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from envgen.harvest.fetcher import Fetcher
from envgen.harvest.simple_index import FileLink

CXX17_H = "torch/include/c10/util/C++17.h"
ATEN_H = "torch/include/ATen/ATen.h"
ALL_H = "torch/include/torch/csrc/api/include/torch/all.h"
CPP_EXTENSION = "torch/utils/cpp_extension.py"
HEADERS = (CXX17_H, ATEN_H, ALL_H)  # in this order when two state the same fact
MEMBERS = (*HEADERS, CPP_EXTENSION)
FACT_KEYS = (
    "cxx_std", "cxx_std_where",
    "min_gcc", "min_gcc_where",
    "min_clang", "min_clang_where",
    "extension_std", "extension_std_where",
    "extension_min_gcc", "extension_min_gcc_where",
    "extension_min_clang", "extension_min_clang_where",
    "members",
)  # fmt: skip
CACHE_MEMBER = "torch-header-facts-v1.json"

# __cplusplus of each standard (ISO values); a guard value between two means the later one
CPLUSPLUS = ((201103, "11"), (201402, "14"), (201703, "17"), (202002, "20"), (202302, "23"))
_DIRECTIVE = re.compile(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif|error)\b(.*)", re.DOTALL)
_COMMENT = re.compile(r"/\*.*?\*/|//.*", re.DOTALL)
_CPLUSPLUS = re.compile(r"(?<![\w])__cplusplus\s*(<=?)\s*(\d+)L?")
_GNUC = re.compile(r"(?<![\w])__GNUC__\s*(<=?)\s*(\d+)")
_CLANG = re.compile(r"(?<![\w])__clang_major__\s*(<=?)\s*(\d+)")
_MINIMUM = re.compile(r"^(MINIMUM_(?:GCC|CLANG)_VERSION)\s*=\s*\(([\d,\s]+)\)", re.MULTILINE)
_BUILD_EXT_STD = re.compile(r"""cpp_flag_prefix\s*\+\s*['"]c\+\+(\d\d)['"]""")
_STD_FLAG = re.compile(r"""['"]-std=c\+\+(\d\d)['"]""")


@dataclass(frozen=True)
class GuardedError:
    """An ``#error`` and the ``#if`` / ``#elif`` branch it sits in."""

    line: int  # line of the #if / #elif
    condition: str  # its condition, continuation lines joined, comments dropped
    message: str  # the #error's text
    error_line: int


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, text)`` with backslash-continued lines joined."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def guarded_errors(text: str) -> list[GuardedError]:
    """Every ``#error`` of a C/C++ source directly inside an ``#if`` / ``#ifdef`` / ``#ifndef``
    / ``#elif`` branch, with that branch's condition (``#else`` branches are skipped)."""
    stack: list[tuple[int, str | None]] = []
    found = []
    for number, line in _logical_lines(text):
        match = _DIRECTIVE.match(line)
        if not match:
            continue
        kind, rest = match[1], match[2]
        if kind == "error":
            if stack and stack[-1][1] is not None:
                where, condition = stack[-1]
                found.append(GuardedError(where, condition, " ".join(rest.split()), number))
            continue
        condition = " ".join(_COMMENT.sub(" ", rest).split())
        if kind == "if":
            stack.append((number, condition))
        elif kind == "ifdef":
            stack.append((number, f"defined({condition})"))
        elif kind == "ifndef":
            stack.append((number, f"!defined({condition})"))
        elif kind == "elif" and stack:
            stack[-1] = (number, condition)
        elif kind == "else" and stack:
            stack[-1] = (number, None)
        elif kind == "endif" and stack:
            stack.pop()
    return found


def _minimum(pattern: re.Pattern[str], condition: str) -> int | None:
    """``X < N`` → N, ``X <= N`` → N + 1: the lowest value the guard lets through."""
    found = [int(n) + (op == "<=") for op, n in pattern.findall(condition)]
    return max(found) if found else None


def _standard(value: int) -> str | None:
    return next((name for number, name in CPLUSPLUS if number >= value), None)


def _where(member: str, guard: GuardedError) -> str:
    return f"{member}:{guard.line}: #if {guard.condition}"


def _code_lines(text: str) -> list[tuple[int, str]]:
    """Numbered lines that are code, not comments or doctest examples."""
    return [
        (number, line)
        for number, line in enumerate(text.splitlines(), 1)
        if not line.lstrip().startswith(("#", ">>>", "..."))
    ]


def _extension_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    lines = _code_lines(text)
    for key, pattern in (("extension_std", _BUILD_EXT_STD), ("extension_std", _STD_FLAG)):
        if facts.get(key) is not None:
            break
        for number, line in lines:
            match = pattern.search(line)
            if match:
                facts[key] = match[1]
                facts[f"{key}_where"] = f"{CPP_EXTENSION}:{number}: {line.strip()}"
                break
    for match in _MINIMUM.finditer(text):
        key = "extension_min_" + match[1].split("_")[1].lower()
        parts = [p.strip() for p in match[2].split(",") if p.strip()]
        number = text.count("\n", 0, match.start()) + 1
        facts[key] = ".".join(parts)
        facts[f"{key}_where"] = f"{CPP_EXTENSION}:{number}: {match[0].strip()}"
    return facts


def header_facts(members: dict[str, bytes]) -> dict[str, Any]:
    """The facts (see the module docstring) stated by ``members`` (member name → bytes, any of
    :data:`MEMBERS`; others are ignored). Pure: no I/O."""
    facts: dict[str, Any] = dict.fromkeys(FACT_KEYS)
    facts["members"] = sorted(m for m in members if m in MEMBERS)
    best: dict[str, tuple[int, str]] = {}  # key -> (value, where); the first member wins ties
    for member in HEADERS:
        if member not in members:
            continue
        for guard in guarded_errors(members[member].decode("utf-8", "replace")):
            values = {
                "cxx_std": max(
                    (int(n) + (op == "<=") for op, n in _CPLUSPLUS.findall(guard.condition)),
                    default=None,
                ),
                "min_gcc": _minimum(_GNUC, guard.condition),
                "min_clang": _minimum(_CLANG, guard.condition),
            }
            for key, value in values.items():
                if value is not None and (key not in best or value > best[key][0]):
                    best[key] = (value, _where(member, guard))
    for key, (value, where) in best.items():
        facts[key] = _standard(value) if key == "cxx_std" else value
        facts[f"{key}_where"] = where
    if CPP_EXTENSION in members:
        facts.update(_extension_facts(members[CPP_EXTENSION].decode("utf-8", "replace")))
    return facts


def read_header_facts(fetch: Fetcher, link: FileLink) -> dict[str, Any]:
    """:func:`header_facts` of the wheel at ``link`` plus ``"verified"``, read and cached by
    :meth:`Fetcher.wheel_facts`."""
    return fetch.wheel_facts(link, CACHE_MEMBER, FACT_KEYS, lambda name: name in MEMBERS,
                             header_facts)
