"""Ask every node of a job about itself, in parallel, each step bounded by a time limit.

Input: one :class:`~envgen.preflight.remote.Runner` per node. Output: per node a
:class:`Reply` — the JSON the inside script printed, or why there is none (the SSH error
classified against the catalog's OpenSSH messages, a time-out, a missing Python). A node
that does not answer never holds up the others.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from envgen.preflight.remote import Outcome, Runner, Running

__all__ = ["Reply", "ask_all", "classify"]

SSH_FAILED = 255  # ssh's own exit code when the connection (not the command) fails


@dataclass(frozen=True)
class Reply:
    node: str
    doc: dict | None  # the last JSON object printed; None: no answer
    outcome: Outcome
    problem: str | None = None  # the finding kind that says why there is no answer
    detail: str = ""  # the line of stderr (or the time-out) that shows it

    @property
    def ok(self) -> bool:
        return self.doc is not None


def _tail(text: str, lines: int = 4) -> str:
    kept = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(kept[-lines:])[-600:]


def classify(outcome: Outcome, ssh_errors: Sequence[tuple[re.Pattern, str]], *,
             over_ssh: bool, python: str, limit: float) -> tuple[str | None, str]:
    """(finding kind, evidence line) for an outcome without an answer; (None, "") when the
    program answered."""
    if outcome.timed_out:
        return "ssh-unreachable" if over_ssh else "node-lost", \
            f"no answer within {limit:.0f} s"
    err = outcome.stderr or ""
    if over_ssh and outcome.rc == SSH_FAILED:
        for regex, kind in ssh_errors:
            m = regex.search(err)
            if m:
                line = next((ln for ln in err.splitlines() if regex.search(ln)), m.group(0))
                return kind, line.strip()
        return "ssh-failed", _tail(err) or f"ssh exited {SSH_FAILED}"
    missing = rf"{re.escape(python)}( on this node)?: (No such file|not found)"
    if outcome.rc == 127 or re.search(missing, err):
        return "python-missing", _tail(err) or f"{python}: not found"
    if outcome.rc is None:
        return "ssh-failed" if over_ssh else "node-lost", _tail(err) or "could not be started"
    return None, ""


# SSH steps: one at a time per SSH_PER_THREAD nodes, SSH_THREADS[0] to [1] at once
SSH_PER_THREAD = 8
SSH_THREADS = (32, 128)
STEP_DEADLINE = 2  # all nodes of a step together: at most this many times one node's limit


def ask_all(runners: Sequence[Runner], make: Callable[[Runner], tuple[str, list[str]]], *,
            timeout: float, ssh_errors: Sequence[tuple[re.Pattern, str]], over_ssh: bool,
            env: dict[str, str] | None = None) -> dict[str, Reply]:
    """Run ``make(runner)`` → (program text, argv) on every runner at once; node → Reply.

    Each node has ``timeout`` seconds; all of them together at most STEP_DEADLINE ×
    ``timeout``, whatever their number (more run at once the more nodes there are): a node
    not answered by then is killed or, not started, reported as such. An interrupt kills
    every program the step started before it goes on."""
    from envgen.workers import MISSING, run_all, threads_for

    started: list[Running] = []

    def one(runner: Runner) -> Reply:
        text, argv = make(runner)
        running = runner.start(text, argv, env=env)
        started.append(running)
        outcome = running.wait(timeout)
        doc = outcome.last_json()
        if doc is not None and not outcome.timed_out:
            return Reply(runner.node, doc, outcome)
        kind, detail = classify(outcome, ssh_errors, over_ssh=over_ssh, python=runner.python,
                                limit=timeout)
        if kind is None:
            kind, detail = "node-lost" if not over_ssh else "ssh-failed", \
                _tail(outcome.stderr) or f"exit code {outcome.rc}, nothing printed"
        return Reply(runner.node, None, outcome, kind, detail)

    if not runners:
        return {}
    threads = threads_for(len(runners), per_thread=SSH_PER_THREAD, low=SSH_THREADS[0],
                          high=SSH_THREADS[1])
    limit = STEP_DEADLINE * timeout
    try:
        replies = run_all(one, runners, workers=threads, deadline=time.monotonic() + limit,
                          name="envgen-ssh")
    finally:  # the deadline or an interrupt: nothing of this step goes on running
        for running in list(started):
            running.stop()
    out = {}
    for runner, reply in zip(runners, replies, strict=True):
        if reply is MISSING:
            detail = (f"not answered within {limit:g} s, the limit of this step on all "
                      f"{len(runners)} nodes ({threads} at a time)")
            reply = Reply(runner.node, None, Outcome(runner.node, None, "", detail, limit, True),
                          "ssh-unreachable" if over_ssh else "node-lost", detail)
        out[runner.node] = reply
    return out
