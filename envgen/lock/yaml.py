"""A small, deterministic YAML writer for the lock files (block style, stable key order).

Only what the lock files contain: mappings, sequences, strings, ints, bools and None. Strings
are written plain when a YAML 1.1/1.2 reader reads them back as the same string, else
double-quoted with JSON escapes (valid YAML). The tests round-trip every file through PyYAML.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z0-9_./$(][A-Za-z0-9_ ./:+=<>!,*~()@$|-]*")
_NUMBERISH = re.compile(r"[-+]?(\.?\d[\d_.]*([eE][-+]?\d+)?|\.inf|\.nan|0[xob][\da-fA-F_]+)",
                        re.IGNORECASE)
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", ""}


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if (_PLAIN.fullmatch(text) and not _NUMBERISH.fullmatch(text)
            and text.lower() not in _RESERVED and ": " not in text and " #" not in text
            and not text.endswith((" ", ":"))):
        return text
    return json.dumps(text, ensure_ascii=False)


def dump(value: Any, indent: int = 0) -> str:
    """``value`` as YAML lines (ending with a newline)."""
    return "".join(_lines(value, indent))


def _lines(value: Any, indent: int):
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            yield f"{pad}{{}}\n"
            return
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                yield f"{pad}{scalar(key)}:\n"
                yield from _lines(item, indent + 2 if isinstance(item, dict) else indent)
            else:
                yield f"{pad}{scalar(key)}: {_inline(item)}\n"
    elif isinstance(value, list):
        if not value:
            yield f"{pad}[]\n"
            return
        for item in value:
            if isinstance(item, dict) and item:
                first, *rest = list(_lines(item, indent + 2))
                yield f"{pad}- {first[indent + 2:]}"
                yield from rest
            elif isinstance(item, list) and item:
                yield f"{pad}-\n"
                yield from _lines(item, indent + 2)
            else:
                yield f"{pad}- {_inline(item)}\n"
    else:
        yield f"{pad}{scalar(value)}\n"


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return scalar(value)
