"""Leave the ``envgen`` process without the interpreter's teardown, once everything that must
run at exit has run.

Hand-written (reason: no library does this for a program; it is the same call argcomplete
makes after answering a completion, ``exit_method=os._exit``, and Instagram's
``atexit.register(os._exit, 0)``): the final garbage collection and the freeing of every
module and object took ~6 ms of a ~55 ms ``envgen resolve`` here, in a process about to end.

How: :func:`install` registers one atexit function, only when none is registered yet, so it
is the last to run (atexit runs them in reverse order) and a hook registered before envgen
(coverage, a profiler) is never skipped. Python joins non-daemon threads before it runs
atexit functions, and every one registered later (logging's flush, temporary directories'
cleanup) runs before this one. It flushes stdout and stderr and calls ``os._exit`` with the
code :func:`leaving` was given. The normal exit is kept when no code was given (an uncaught
exception), the code is not an int, a flush fails (a closed pipe), or Python runs in
development mode (``-X dev``: its warnings at teardown are wanted).
"""

from __future__ import annotations

import atexit
import os
import sys

_code: list[int] = []  # the exit code, once known


def install() -> bool:
    """Register the quick exit (see the module docstring); whether it was."""
    count = getattr(atexit, "_ncallbacks", None)
    if count is None or count() or sys.flags.dev_mode:
        return False
    atexit.register(_leave)
    return True


def leaving(code: object) -> None:
    """The process exits with ``code`` (a SystemExit's code): None is 0; another non-int
    (a message) keeps the normal exit, which prints it."""
    _code.clear()
    if code is None:
        code = 0
    if isinstance(code, int) and not isinstance(code, bool):
        _code.append(code)


def _leave() -> None:
    if not _code:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # a closed pipe or stream: the normal exit handles and reports it
        return
    os._exit(_code[0])
