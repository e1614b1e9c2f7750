"""The CLI's progress reporter: plain lines on stderr, and on a terminal also live bars.

Input: the stream, --quiet, --json. Output: a callable taking one progress line (the
``envgen.api.progress.Progress`` protocol) with ``count(task, done, total)`` for countable work.
On a terminal (stderr is a TTY, ``TERM`` is not ``dumb``, no --quiet / --json) lines print above
a live display (rich) with a spinner and the time spent on the current step, and a bar per
counted task; elsewhere (pipes, CI logs, tests) it prints the lines only, exactly as they come.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


def wants_bars(stream: TextIO, quiet: bool, as_json: bool) -> bool:
    """Whether progress may be drawn as live bars on ``stream`` (envgen.cli.progress): a
    terminal, ``TERM`` not ``dumb``, no --quiet or --json."""
    if quiet or as_json or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Reporter:
    """``reporter(line)`` reports a line; ``reporter.count(task, done, total)`` a count."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False,
                 as_json: bool = False, bars: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.bars = wants_bars(self.stream, quiet, as_json) if bars is None else bars
        self._live: Any = None  # rich.progress.Progress, started at the first report
        self._step: Any = None  # the spinner's task id (the current step)
        self._tasks: dict[str, Any] = {}

    def _display(self) -> Any:
        if self._live is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            console = Console(file=self.stream, force_terminal=True, highlight=False)
            self._live = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                  BarColumn(), TextColumn("{task.fields[of]}"),
                                  TimeElapsedColumn(),
                                  console=console, transient=True, redirect_stdout=False,
                                  redirect_stderr=False)
            self._live.start()
        return self._live

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        if "://" in message:  # a URL's credentials are never printed
            from envgen.lock.secrets import shown_text

            message = shown_text(message)
        if not message.isprintable():  # nor a control character from a file or a node
            from envgen.validate import shown_lines

            message = shown_lines(message)
        if not self.bars:
            print(message, file=self.stream, flush=True)
            return
        live = self._display()
        live.console.print(message, markup=False, highlight=False, soft_wrap=True)
        text = message.strip()
        if text and not text.startswith(("+ ", "- ")):  # the step in progress, with its time
            if self._step is None:
                self._step = live.add_task(_short(text), total=None, of="")
            else:
                live.reset(self._step, description=_short(text), total=None, of="")

    def count(self, task: str, done: int, total: int | None) -> None:
        if self.quiet or not self.bars:
            return
        live = self._display()
        if task not in self._tasks:
            self._tasks[task] = live.add_task(task, total=total, of="")
        live.update(self._tasks[task], completed=done, total=total,
                    of=f"{done}/{total}" if total is not None else str(done))
        if total is not None and done >= total:
            live.remove_task(self._tasks.pop(task))

    def close(self) -> None:
        """Stop the live display (it erases itself; the lines stay)."""
        if self._live is not None:
            self._live.stop()
            self._live = None


class EndsProgress:
    """The commands' stdout while bars may be drawn: a write first ends the live display
    (which would otherwise share the line with the output), then passes through."""

    def __init__(self, stream: TextIO, reporter_owner: Any) -> None:
        self._stream, self._owner = stream, reporter_owner

    def write(self, text: str) -> int:
        self._owner.close()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
