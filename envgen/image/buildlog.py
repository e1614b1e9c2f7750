"""A build's output turned into a compact step log: a line per Dockerfile step with its
duration, a heartbeat during long steps, and on failure ``BuildFailed`` naming the step with the
log tail. Input: (kind, text) pairs from an engine ("log", "error", "id"). Output: the image id.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable

from envgen.errors import DaemonError, EnvgenError
from envgen.progress import count

TAIL = 40
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DISK_FULL = re.compile(r"no space left on device", re.IGNORECASE)
_BK_STEP = re.compile(r"^#(\d+) \[(?:[\w.-]+ )?\s*(\d+)/(\d+)\] (.*)$")
_BK_CACHED = re.compile(r"^#(\d+) CACHED$")
_BK_DIGEST = re.compile(r"^#\d+ sha256:[0-9a-f]{64}$")  # said of a step before CACHED
_BK_LINE = re.compile(r"^#(\d+) ")


class BuildFailed(EnvgenError):
    """The Dockerfile failed; ``step`` is the instruction, ``tail`` the last log lines."""

    def __init__(self, message: str, step: str, tail: list[str], hint: str) -> None:
        super().__init__(message, hint=hint)
        self.step, self.tail = step, tail
        self.report = (f"--- build log, last {len(tail)} lines ---\n" + "\n".join(tail)
                       + "\n---") if tail else None


HEARTBEAT = 60.0  # seconds between "still running" lines in a long step


def _follow(lines: Iterable[tuple[str, str]], progress: Callable[[str], None],
            log: Callable[[str], None] | None = None) -> str:
    """Turn the build's lines into a compact step log (a line per step, its duration, and a
    heartbeat with the latest output during long steps; every line to ``log``); return the
    image id or raise BuildFailed."""
    tail: deque[str] = deque(maxlen=TAIL)
    step, started, image_id = "", time.monotonic(), ""
    step_started = last_said = started
    # BuildKit names every step, cached or not, then says "#N CACHED": a step is shown at its
    # first other line, so the cached ones are only counted
    pending: dict[str, tuple[str, str, str, float]] = {}
    cached = 0
    for kind, text in lines:
        if kind == "id":
            image_id = text
            continue
        if log is not None and kind == "log":
            log(text)
        if kind == "error" and _DISK_FULL.search(text):  # the machine's, not the recipe's
            raise DaemonError(f"the Docker daemon ran out of disk space at {step or 'the start'}"
                              f": {text}", hint="free space where dockerd keeps its data (`docker "
                              "system df`; `docker image prune`, `docker builder prune`), then "
                              "run the build again")
        if kind == "error":
            raise BuildFailed(
                f"the build failed at {step or 'the start'}: {text}", step=step,
                tail=list(tail),
                hint="the log tail above shows why; fix the cause (network? --ca-cert? "
                "--network host for a loopback index?) and run envgen build again")
        tail.append(text)
        shown = None  # (number, total, instruction, when it started) of a step to show now
        m = _STEP.match(text)
        if m:
            shown = (*m.groups(), time.monotonic())
        bk = _BK_STEP.match(text)
        if bk:
            pending[bk.group(1)] = (*bk.groups()[1:], time.monotonic())
            continue
        hit = _BK_CACHED.match(text)
        if hit and hit.group(1) in pending:
            del pending[hit.group(1)]
            cached += 1
            continue
        own = _BK_LINE.match(text)
        if own and own.group(1) in pending and not _BK_DIGEST.match(text):
            shown = pending.pop(own.group(1))
        if shown:
            number, total, instruction, opened = shown
            now = time.monotonic()
            if step:
                progress(f"  done in {now - step_started:.1f} s")
            step, step_started = f"step {number}/{total} ({_clip(instruction)})", opened
            progress(f"[{int(number):>2}/{total}] {_clip(instruction, 100)}")
            count(progress, "build steps", int(number) - 1, int(total))
            last_said = now
        elif step and time.monotonic() - last_said >= HEARTBEAT:
            last_said = time.monotonic()
            progress(f"  … {last_said - step_started:.0f} s: {_clip(text, 90)}")
        elif text.startswith("Successfully built "):
            image_id = image_id or text.split()[-1]
    if step:
        progress(f"  done in {time.monotonic() - step_started:.1f} s")
    if cached:
        progress(f"  ({cached} step{'s' if cached != 1 else ''} cached)")
    if not image_id:
        raise BuildFailed("the build ended without an image", step=step, tail=list(tail),
                          hint="run envgen build -v to see the whole log")
    return image_id


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
