"""How the library reports progress: a callback taking one line of text (the CLI prints it on
stderr unless --quiet). Functions in envgen.api never print."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]


def quiet(_message: str) -> None:
    """The default callback: report nothing."""
