"""Ask every node of a job about itself, in parallel, each step bounded by a time limit.

Input: one :class:`~envgen.preflight.remote.Runner` per node. Output: per node a
:class:`Reply` — the JSON the inside script printed, or why there is none (the SSH error
classified against the catalog's OpenSSH messages, a time-out, a missing Python). A node
that does not answer never holds up the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from envgen.preflight.remote import Outcome, Runner

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


def ask_all(runners: Sequence[Runner], make: Callable[[Runner], tuple[str, list[str]]], *,
            timeout: float, ssh_errors: Sequence[tuple[re.Pattern, str]], over_ssh: bool,
            env: dict[str, str] | None = None) -> dict[str, Reply]:
    """Run ``make(runner)`` → (program text, argv) on every runner at once; node → Reply."""

    def one(runner: Runner) -> Reply:
        text, argv = make(runner)
        outcome = runner.run(text, argv, timeout=timeout, env=env)
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
    with ThreadPoolExecutor(max_workers=min(32, len(runners))) as pool:
        return {r.node: reply for r, reply in zip(runners, pool.map(one, runners), strict=True)}
