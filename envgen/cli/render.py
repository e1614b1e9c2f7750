"""Plain-text rendering: aligned tables and JSON. No colours, so output pastes cleanly."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


# the characters JSON may carry raw that a terminal can still act on (DEL, C1 controls, the
# line and paragraph separators), written as \u escapes: the same JSON value
_RAW = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), 0x2028, 0x2029)}


def dump_json(data: Any, out: TextIO) -> None:
    """``data`` as indented JSON; no control character reaches the terminal raw (the C0 ones
    JSON itself escapes)."""
    import json  # only for --json (text output does not load it)

    out.write(json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False).translate(_RAW))
    out.write("\n")


def stream_json(head: dict[str, Any], key: str, rows: Iterable[Any],
                tail: dict[str, Any], out: TextIO, *, encoded: bool = False) -> None:
    """One JSON object written as it is produced: ``head``'s keys, then ``key`` as a list
    written row by row (one compact row per line, the C encoder; never all in memory), then
    ``tail``'s keys (a callable value is called only after the rows are written). With
    ``encoded`` the rows are JSON text already."""
    import json

    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    out.write("{\n")
    for name, value in head.items():
        out.write(f"{encode(name)}: {encode(value)},\n")
    out.write(f"{encode(key)}: [")
    first = True
    for row in rows:
        out.write("\n" if first else ",\n")
        out.write(row if encoded else encode(row))
        first = False
    out.write("\n]" if not first else "]")
    for name, value in tail.items():
        value = value() if callable(value) else value
        out.write(f",\n{encode(name)}: {encode(value)}")
    out.write("\n}\n")
