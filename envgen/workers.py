"""Run a function over many items on daemon threads, with a total deadline.

``concurrent.futures`` joins its worker threads when the interpreter exits, so one thread stuck
in a call that cannot be cancelled (``getaddrinfo`` against a resolver that never answers)
holds up the exit of the whole program, SIGTERM or not. The threads here are daemon threads:
the caller stops waiting at its deadline or at an interrupt, and the process can exit at once;
a thread still blocked is abandoned, never waited for.

Input: a function, the items, how many threads, an optional deadline (``time.monotonic()``).
Output: the results in the items' order, :data:`MISSING` for an item not finished by the
deadline. An exception raised by the function is raised again in the caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["MISSING", "run_all", "threads_for"]

T = TypeVar("T")
MISSING: Any = object()  # an item whose call had not returned by the deadline


def threads_for(count: int, *, per_thread: int, low: int, high: int) -> int:
    """Threads for ``count`` items: one per ``per_thread`` items, at least ``low`` and at most
    ``high`` (never more than there are items): concurrency that grows with the work."""
    wanted = max(low, -(-count // per_thread))
    return max(1, min(count, wanted, high))


def run_all(fn: Callable[[T], Any], items: Sequence[T], *, workers: int,
            deadline: float | None = None, name: str = "envgen-worker") -> list[Any]:
    """``fn(item)`` for every item, on up to ``workers`` daemon threads. Returns when all are
    done or ``deadline`` (a ``time.monotonic()`` value) passes; items not done by then are
    :data:`MISSING` and no further item is started. An interrupt (KeyboardInterrupt,
    errors.Interrupted) in the caller stops the hand-out of items and propagates at once."""
    items = list(items)
    results: list[Any] = [MISSING] * len(items)
    errors: list[tuple[int, BaseException]] = []
    cond = threading.Condition()
    state = {"next": 0, "done": 0, "stop": False}

    def work() -> None:
        while True:
            with cond:
                if state["stop"] or state["next"] >= len(items):
                    return
                index = state["next"]
                state["next"] += 1
            try:
                value = fn(items[index])
            except BaseException as exc:  # handed to the caller, raised there
                with cond:
                    errors.append((index, exc))
                    state["done"] += 1
                    cond.notify_all()
                continue
            with cond:
                results[index] = value
                state["done"] += 1
                cond.notify_all()

    if not items:
        return results
    for i in range(max(1, min(workers, len(items)))):
        threading.Thread(target=work, name=f"{name}-{i}", daemon=True).start()
    try:
        with cond:
            while state["done"] < len(items):
                left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
                if left <= 0:
                    break
                cond.wait(left)  # short waits: a signal handler runs between them
            state["stop"] = True
    except BaseException:
        state["stop"] = True
        raise
    if errors:
        raise min(errors, key=lambda e: e[0])[1]
    return results
