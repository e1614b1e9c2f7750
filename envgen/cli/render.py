"""Plain-text rendering: aligned tables and JSON. No colours, so output pastes cleanly."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


def dump_json(data: Any, out: TextIO) -> None:
    json.dump(data, out, indent=2, sort_keys=False, ensure_ascii=False)
    out.write("\n")
