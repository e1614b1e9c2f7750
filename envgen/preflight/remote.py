"""Run envgen's inside scripts on the nodes of a job: over SSH, or here (``--local``, tests).

Input: a node name, the Python to run there, a program text (:func:`program`) and its
arguments. Output: an :class:`Outcome` (exit code, output, seconds, whether the time ran out);
:meth:`Runner.start` returns a :class:`Running` for programs that run beside others (the
master's listener, the ranks of the collective).

Nothing is installed on the nodes: the program text carries the inside scripts it needs and
goes to ``PYTHON -`` on standard input, so a node needs only its Python (and torch for the
collective). SSH runs non-interactively (``BatchMode=yes``: a missing key fails at once
instead of prompting) with a bounded connect time and keep-alives, under the user's own
``~/.ssh/config``; every step has a wall-clock limit after which its process is killed.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shlex
import subprocess
import threading
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from envgen.inside import path as inside_path
from envgen.proc import popen

__all__ = ["LocalRunner", "Outcome", "Runner", "Running", "SSHRunner", "program"]

_BOOT = '''\
import base64, io, os, runpy, shutil, signal, sys, tempfile, threading, time, zipfile
_d = tempfile.mkdtemp(prefix="envgen-preflight-")
def _watch():  # the preflight is gone (ssh killed, connection lost): end all this started
    while True:
        time.sleep(0.5)
        try:
            sys.stdout.write("\\n")
            sys.stdout.flush()
        except BrokenPipeError:
            shutil.rmtree(_d, ignore_errors=True)
            os.killpg(0, signal.SIGKILL)
        except Exception:
            return
threading.Thread(target=_watch, daemon=True).start()
try:
    zipfile.ZipFile(io.BytesIO(base64.b64decode(_DATA))).extractall(_d)
    _main = os.path.join(_d, _MAIN)
    sys.argv = [_main] + sys.argv[1:]
    sys.path.insert(0, _d)
    runpy.run_path(_main, run_name="__main__")
finally:
    shutil.rmtree(_d, ignore_errors=True)
'''


# a held program (Runner.start(hold=True)): the first line of standard input is the program text
# in base64; the rest of standard input stays open for the lines the caller sends it later
_HOLD = ("import base64,sys;exec(compile(base64.b64decode(sys.stdin.readline()),"
         "'<envgen>','exec'))")


def program(main: str, *extra: str) -> str:
    """The self-contained program that runs envgen/inside/``main`` (with the inside modules
    ``extra`` importable beside it) when given to ``python -`` on standard input.

    The files travel zipped in the text and are unpacked into a temporary folder that is
    removed afterwards, so scripts that re-run themselves by path (the doctor's collector
    starts children that way) work as they do from envgen's own folder."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in (main, *extra):
            zf.write(inside_path(name), name)
    data = base64.b64encode(buf.getvalue()).decode()
    return f"_DATA = {data!r}\n_MAIN = {main!r}\n{_BOOT}"


@dataclass(frozen=True)
class Outcome:
    node: str
    rc: int | None  # None: killed (the time ran out) or never started
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    def json_lines(self) -> list[dict]:
        """Every line of stdout that is a JSON object, in order."""
        return _json_objects(self.stdout)

    def last_json(self) -> dict | None:
        found = self.json_lines()
        return found[-1] if found else None


def _json_objects(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


@dataclass
class Running:
    """A started program: its output is read in the background so it never blocks on a full
    pipe, and :meth:`first_json` can wait for the line that says it is ready."""

    node: str
    proc: subprocess.Popen | None
    started: float = field(default_factory=time.monotonic)
    error: str | None = None  # could not be started at all

    def __post_init__(self) -> None:
        self._out: list[str] = []
        self._err: list[str] = []
        self._cond = threading.Condition()
        self._threads = []
        if self.proc is not None:
            for stream, sink in ((self.proc.stdout, self._out), (self.proc.stderr, self._err)):
                t = threading.Thread(target=self._pump, args=(stream, sink), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, stream, sink: list[str]) -> None:
        for line in iter(stream.readline, ""):
            with self._cond:
                sink.append(line)
                self._cond.notify_all()
        stream.close()
        with self._cond:
            self._cond.notify_all()

    def first_json(self, timeout: float) -> dict | None:
        """The first JSON object line it prints, waiting at most ``timeout`` seconds; None when
        it prints none in time or ends without one."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = _json_objects("".join(self._out))
                if found:
                    return found[0]
                left = deadline - time.monotonic()
                if left <= 0 or self.proc is None or (
                        self.proc.poll() is not None
                        and not any(t.is_alive() for t in self._threads)):
                    return None
                self._cond.wait(min(left, 0.2))

    def wait(self, timeout: float) -> Outcome:
        """Wait for it to end; after ``timeout`` seconds it is killed (timed_out)."""
        if self.proc is None:
            return Outcome(self.node, None, "", self.error or "", 0.0)
        timed_out = False
        try:
            self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(self.proc)
        for t in self._threads:
            t.join(timeout=5)
        self.close_input()  # a held program's input, open until now
        return Outcome(self.node, None if timed_out else self.proc.returncode,
                       "".join(self._out), "".join(self._err),
                       time.monotonic() - self.started, timed_out)

    def kill(self) -> Outcome:
        self.stop()
        return self.wait(5)

    def send(self, line: str) -> bool:
        """One line to a held program's standard input (Runner.start(hold=True)); False when it
        can no longer be written (the program or its ssh has ended)."""
        if self.proc is None or self.proc.stdin is None or self.proc.stdin.closed:
            return False
        try:
            self.proc.stdin.write(line.rstrip("\n") + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def close_input(self) -> None:
        """End a held program's standard input (it reads end-of-file)."""
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.proc.stdin.close()

    def stop(self) -> None:
        """Kill it and its process group now, if it still runs (an interrupt, a deadline)."""
        if self.proc is not None and self.proc.poll() is None:
            _kill(self.proc)
        self.close_input()


def _kill(proc: subprocess.Popen) -> None:
    """Kill the process and its group (an ssh and what it started locally); the program on
    the node sees its output closed and ends with what it started (_BOOT's watch)."""
    from envgen.proc import kill

    kill(proc)


class Runner:
    """Runs ``PYTHON - ARGV`` with a program text on standard input, on one node."""

    node: str
    python: str

    def command(self, argv: Sequence[str], env: Mapping[str, str] | None, *,
                hold: bool = False) -> list[str]:
        raise NotImplementedError

    def interpreter(self, hold: bool = False) -> list[str]:
        """``PYTHON -`` (the program on standard input), or for a held program ``PYTHON -c
        BOOT`` (its first line of input is the program, the rest stays open)."""
        return [self.python, "-c", _HOLD] if hold else [self.python, "-"]

    def popen_env(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        return None

    def describe(self) -> str:
        raise NotImplementedError

    def start(self, program_text: str, argv: Sequence[str], *,
              env: Mapping[str, str] | None = None, hold: bool = False) -> Running:
        """Start the program; ``hold``: keep its standard input open for :meth:`Running.send`
        (it reads lines from ``sys.stdin`` after its start)."""
        try:
            proc = popen(self.command(argv, env, hold=hold), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", env=self.popen_env(env))
        except OSError as exc:
            return Running(self.node, None, error=f"{self.describe()}: {exc.strerror or exc}")
        try:
            if hold:
                proc.stdin.write(base64.b64encode(program_text.encode()).decode() + "\n")
                proc.stdin.flush()
            else:
                proc.stdin.write(program_text)
                proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it ended before reading: its stderr says why
        return Running(self.node, proc)

    def run(self, program_text: str, argv: Sequence[str], *, timeout: float,
            env: Mapping[str, str] | None = None) -> Outcome:
        return self.start(program_text, argv, env=env).wait(timeout)


def _env_words(env: Mapping[str, str] | None) -> list[str]:
    return [f"{k}={v}" for k, v in sorted((env or {}).items())]


class LocalRunner(Runner):
    """This machine, as node ``node`` (``--local``; several form a job on 127.0.0.1)."""

    def __init__(self, node: str, python: str, environ: Mapping[str, str] | None = None):
        self.node, self.python = node, python
        self._environ = dict(os.environ if environ is None else environ)

    def command(self, argv: Sequence[str], env: Mapping[str, str] | None, *,
                hold: bool = False) -> list[str]:
        return [*self.interpreter(hold), *argv]

    def popen_env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return {**self._environ, **(env or {})}

    def describe(self) -> str:
        return f"{self.python} on this node"


class SSHRunner(Runner):
    """Node ``node`` over OpenSSH: ``ssh -o BatchMode=yes -o ConnectTimeout=N ... NODE --
    env K=V PYTHON - ARGV`` (the user's ssh config, keys and agent apply)."""

    def __init__(self, node: str, python: str, *, connect_timeout: float = 10,
                 ssh: str = "ssh", options: Sequence[str] = (), control: str | None = None):
        self.node, self.python = node, python
        self.connect_timeout = connect_timeout
        self.ssh = ssh
        self.options = tuple(options)
        self.control = control  # a master connection's socket (envgen.preflight.mux)

    def base(self) -> list[str]:
        """The ssh command up to (and including) the node name."""
        return [self.ssh, "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                *self.options, self.node]

    def command(self, argv: Sequence[str], env: Mapping[str, str] | None, *,
                hold: bool = False) -> list[str]:
        words = ["env", *_env_words(env)] if env else []
        remote = " ".join(shlex.quote(w) for w in [*words, *self.interpreter(hold), *argv])
        shared = ["-o", "ControlMaster=no", "-o", f"ControlPath={self.control}"] \
            if self.control else []
        base = self.base()
        return [*base[:-1], *shared, base[-1], "--", remote]

    def describe(self) -> str:
        return " ".join(shlex.quote(w) for w in self.base())
