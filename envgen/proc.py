"""Every program envgen starts, with a time limit and a process group of its own.

A program is started in a new session (``start_new_session``), so what it starts in turn
(torchrun's ranks, ssh's helpers, a compiler's children) is one process group, stopped
together with ``os.killpg``:

- when its time limit passes (:func:`run` raises ``subprocess.TimeoutExpired`` after killing
  the group; :func:`time_limit` makes the error that names the step, the limit and the
  setting that raises it);
- when envgen is interrupted (Ctrl-C, SIGTERM): :func:`run` kills the group on the way out,
  and the CLI calls :func:`kill_all` before it exits, which stops every program still running
  (those started by threads too) and refuses new ones.

Input: the command and its limit. Output: ``subprocess.CompletedProcess`` / ``Popen`` as the
standard library gives them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from envgen.errors import EnvironmentProblem

__all__ = ["TOOL_TIMEOUT_VAR", "TimeLimitError", "kill", "kill_all", "limit", "popen",
           "resume", "run", "time_limit", "watched"]

TOOL_TIMEOUT_VAR = "ENVGEN_TOOL_TIMEOUT"  # seconds: replaces every tool step's default limit

_live: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()
_lock = threading.Lock()
_stopping = False


class TimeLimitError(EnvironmentProblem):
    """A program envgen started did not finish within its time limit; it was killed with
    everything it started. Exit code 4."""

    kind = "timeout"


def time_limit(step: str, seconds: float, setting: str | None, *,
               hint: str | None = None) -> TimeLimitError:
    """The error for ``step`` ("uv pip compile", "the ops check") killed after ``seconds``;
    ``setting`` is the flag or variable that raises the limit."""
    raise_it = f"raise the limit with {setting}" if setting else ""
    fix = "; ".join(x for x in (hint, raise_it) if x) or "retry; if it hangs again, run it " \
        "by hand to see where"
    return TimeLimitError(f"{step} did not finish within {seconds:g} s and was stopped "
                          "(with everything it started)", hint=fix, source=setting)


def limit(default: float) -> float:
    """A tool step's time limit: ``default``, or $ENVGEN_TOOL_TIMEOUT seconds when set."""
    value = os.environ.get(TOOL_TIMEOUT_VAR, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        from envgen.errors import UsageError

        raise UsageError(f"{TOOL_TIMEOUT_VAR}={value!r}: not a number of seconds",
                         hint="give a positive number, e.g. 7200, or unset it",
                         source=TOOL_TIMEOUT_VAR)
    return seconds


@contextlib.contextmanager
def watched(proc: subprocess.Popen, seconds: float, grace: float = 0.0
            ) -> Iterator[threading.Event]:
    """While the block reads ``proc``'s output: after ``seconds`` its group is killed and the
    event yielded is set (the block then sees the output end); an exception in the block
    (Ctrl-C, SIGTERM) kills the group before it goes on."""
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        kill(proc, grace)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield expired
    except BaseException:
        kill(proc, grace)
        raise
    finally:
        timer.cancel()


def popen(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen`` in a session of its own, known to :func:`kill_all`. OSError
    (ECANCELED) once envgen is stopping."""
    with _lock:
        if _stopping:
            raise OSError(errno.ECANCELED, "envgen is stopping: not started")
        proc = subprocess.Popen(list(cmd), start_new_session=True, **kwargs)
        _live.add(proc)
    return proc


def kill(proc: subprocess.Popen, grace: float = 0.0) -> None:
    """Stop ``proc`` and its process group: SIGTERM and up to ``grace`` seconds to exit (a
    ``docker run`` passes it to its container) when ``grace`` > 0, then SIGKILL; reaped."""
    if proc.poll() is None and grace > 0:
        _signal_group(proc, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    _signal_group(proc, signal.SIGKILL)  # the group too: children outlive their leader
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(signum)


def kill_all() -> int:
    """Kill every program :func:`popen` started that still runs, and start no more; how many
    were killed. Called by the CLI when it is interrupted."""
    global _stopping
    with _lock:
        _stopping = True
        running = [p for p in list(_live) if p.returncode is None]
    for proc in running:
        _signal_group(proc, signal.SIGKILL)
    for proc in running:
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            proc.wait(timeout=1)
    return len(running)


def resume() -> None:
    """Start programs again after :func:`kill_all` (a new command in the same process)."""
    global _stopping
    with _lock:
        _stopping = False


def run(cmd: Sequence[str], *, timeout: float, input: str | bytes | None = None,
        capture_output: bool = False, check: bool = False, grace: float = 0.0,
        **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run`` with a required ``timeout``, in a process group of its own: on
    expiry the whole group is killed (SIGTERM and ``grace`` seconds first when ``grace`` > 0)
    and ``subprocess.TimeoutExpired`` is raised, with what it had printed; on an interrupt
    or any other error the group is killed before the exception goes on. Without ``input``,
    stdin is /dev/null unless given."""
    if capture_output:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    else:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
    proc = popen(cmd, **kwargs)
    with proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            kill(proc, grace)
            with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
                exc.output, exc.stderr = proc.communicate(timeout=5)
            raise
        except BaseException:  # Ctrl-C, SIGTERM, an error reading: nothing is left running
            kill(proc, grace)
            raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done
