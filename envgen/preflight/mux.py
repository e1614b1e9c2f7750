"""One SSH connection per node for all the steps of a preflight run (OpenSSH connection sharing).

Each step of the preflight (the facts, the doctor snapshot, the master's listener, the ranks of
the collective, the pairwise trace) runs its own ``ssh NODE -- PYTHON -``; without sharing, each
pays a full key exchange and authentication (about 0.2 s wall and CPU on both ends, measured on
the test cluster). :class:`Multiplex` opens one master connection per node at the start —
``ssh -o ControlMaster=yes -o ControlPath=DIR/mN -N NODE``, all nodes at once — and the steps
then open sessions inside it (``-o ControlMaster=no -o ControlPath=DIR/mN``): ssh_config(5),
ControlMaster / ControlPath: "Enable the sharing of multiple sessions over a single network
connection"; a session whose socket is not there connects on its own, as before.

The sockets live in a folder of this run only (mode 0700, made by ``tempfile.mkdtemp``); the
masters are this process's children (started by envgen.proc, so an interrupt kills them with
every other program) and :meth:`Multiplex.close` ends them and removes the folder. A node whose
master did not come up within its time (a key refused, a host down) gets no socket: its steps
connect directly and their errors are classified as before. Only for OpenSSH's client (an
``--ssh`` whose name is ``ssh``); another client is used as given.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence

from envgen.proc import kill, popen

__all__ = ["SETTLE", "Multiplex", "shares"]

SETTLE = 3.0  # seconds the masters get to come up before the steps start without the late ones


def shares(ssh: str) -> bool:
    """Whether ``ssh`` is OpenSSH's client by its name (``ssh``, ``/usr/bin/ssh``)."""
    return os.path.basename(ssh) == "ssh"


class Multiplex:
    """The master connections of one run; a context manager that ends them and removes their
    folder."""

    def __init__(self, ssh: str, options: Sequence[str], connect_timeout: float):
        self.ssh, self.options = ssh, tuple(options)
        self.connect_timeout = connect_timeout
        self.dir = tempfile.mkdtemp(prefix="envgen-ssh-")
        self.masters: dict[str, subprocess.Popen] = {}
        self.paths: dict[str, str] = {}  # node → its socket, for the nodes whose master is up

    def open(self, nodes: Sequence[str], settle: float = SETTLE) -> dict[str, str]:
        """Start a master for every node at once and wait until each one's socket is there, its
        ssh has ended (it could not connect) or ``settle`` seconds have passed (at most
        ConnectTimeout + 5 s): a node still connecting then (down, or slow to answer) is left to
        its steps' own connections, so it costs its connect time once, not twice; node →
        socket path for the nodes that have one."""
        wanted: dict[str, str] = {}
        for i, node in enumerate(nodes):
            path = os.path.join(self.dir, f"m{i}")
            cmd = [self.ssh, "-o", "BatchMode=yes",
                   "-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}",
                   "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                   *self.options, "-o", "ControlMaster=yes", "-o", f"ControlPath={path}",
                   "-o", "ControlPersist=no", "-N", "--", node]
            try:
                self.masters[node] = popen(cmd, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except OSError:
                continue
            wanted[node] = path
        deadline = time.monotonic() + min(settle, self.connect_timeout + 5)
        waiting = dict(wanted)
        while waiting and time.monotonic() < deadline:
            for node, path in list(waiting.items()):
                if os.path.exists(path):
                    self.paths[node] = path
                    del waiting[node]
                elif self.masters[node].poll() is not None:
                    del waiting[node]
            if waiting:
                time.sleep(0.02)
        for node in waiting:  # not up in time: its steps connect on their own
            kill(self.masters.pop(node))
        return dict(self.paths)

    def close(self) -> None:
        for proc in self.masters.values():
            kill(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.masters.clear()
        self.paths.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Multiplex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
