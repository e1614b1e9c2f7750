"""How the library reports progress: a callback taking one line of text (the CLI prints it on
stderr unless --quiet). Functions in envgen.api never print.

Countable work (packages installed, build steps, ops checked) is also reported as counts
through :func:`count`, which calls the callback's ``count(task, done, total)`` when it has one
(the CLI's reporter draws a bar on a terminal) and does nothing otherwise; the lines are
reported either way, so a plain callable sees everything. :func:`bars` tells a stage whether
its engine may draw its own bars (py-rattler's downloads) on the terminal.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]


def quiet(_message: str) -> None:
    """The default callback: report nothing."""


def count(progress: Progress, task: str, done: int, total: int | None) -> None:
    """``done`` of ``total`` units of ``task`` are finished (``total`` None: unknown)."""
    method = getattr(progress, "count", None)
    if method is not None:
        method(task, done, total)


def bars(progress: Progress) -> bool:
    """Whether progress is drawn on a terminal (an engine may show its own bars there)."""
    return bool(getattr(progress, "bars", False))
