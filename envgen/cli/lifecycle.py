"""How the ``envgen`` process starts and ends: no garbage collection while it starts, and no
interpreter teardown once everything that must run at exit has run.

Hand-written (reason: no library does this for a program; both are the practice Instagram
described for its servers — ``gc.disable``/``gc.freeze`` while starting, ``atexit.register(
os._exit, 0)`` to end — and argcomplete ends its completions with ``os._exit`` too). Measured
on ``envgen resolve`` for one request (~55 ms here): the collections run while ~30 modules
are imported took ~5 ms, the final collection and the freeing of every module and object
~6 ms, in a process about to end.

**Start** (:func:`begin`, then :func:`started`): the collector is off while the modules are
imported and the command line is parsed (what is made then lives as long as the process);
:func:`started` moves it all to the permanent generation (``gc.freeze``: later collections
do not walk it) and turns the collector on again before the command runs, so a long command
collects as usual. Only what :func:`begin` turned off is turned on again.

**End** (:func:`begin` installs it, :func:`leaving` gives the code): one atexit function,
registered only when none is registered yet, so that it is the last to run (atexit runs them
in reverse order) and a hook registered before envgen (coverage, a profiler) is never
skipped. Python joins non-daemon threads before it runs atexit functions, and every one
registered later (logging's flush, temporary directories' cleanup) runs before this one. It
flushes stdout and stderr and calls ``os._exit`` with the code. The normal exit is kept when
no code was given (an uncaught exception), the code is not an int, a flush fails (a closed
pipe), or Python runs in development mode (``-X dev``: its warnings at teardown are wanted).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys

_code: list[int] = []  # the exit code, once known
_paused: list[bool] = []  # [True] while begin() holds the collector off


def begin() -> bool:
    """Called first by the console script: the collector off until :func:`started`, and the
    quick exit registered; whether the quick exit was."""
    if gc.isenabled():
        gc.disable()
        _paused[:] = [True]
    return install()


def started() -> None:
    """Start-up is over (the command is about to run): what it made is frozen and the
    collector is on again, if :func:`begin` turned it off."""
    if _paused:
        _paused.clear()
        gc.freeze()
        gc.enable()


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
