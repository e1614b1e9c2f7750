"""The CLI's progress reporter: plain lines off a terminal; on a terminal the same lines plus
live bars (rich) for counted work and a spinner with the current step's time."""

from __future__ import annotations

import io
import os
import pty

import pytest

from envgen.cli.progress import Reporter, wants_bars
from envgen.progress import bars, count


def test_off_a_terminal_only_the_lines_are_printed_exactly():
    out = io.StringIO()
    r = Reporter(out)
    assert not r.bars and not bars(r)
    r("installing 49 pip packages with uv")
    count(r, "packages", 3, 49)  # no bar off a terminal
    r("  + torch==2.15.0")
    r.close()
    assert out.getvalue() == "installing 49 pip packages with uv\n  + torch==2.15.0\n"


def test_quiet_prints_nothing():
    out = io.StringIO()
    r = Reporter(out, quiet=True, bars=True)
    r("a line")
    count(r, "packages", 1, 2)
    r.close()
    assert out.getvalue() == ""


def test_on_a_terminal_lines_stay_and_a_bar_counts(monkeypatch):
    out = io.StringIO()
    r = Reporter(out, bars=True)
    assert bars(r)
    r("installing 10 pip packages with pip (hash-checked, no dependency resolution)")
    count(r, "packages", 3, 10)
    r._live.refresh()  # what the display thread draws ten times a second
    drawn = out.getvalue()
    assert "3/10" in drawn and "packages" in drawn
    count(r, "packages", 10, 10)  # done: the bar goes away
    assert "packages" not in r._tasks
    r("  Successfully installed ten packages")
    r.close()
    text = out.getvalue()
    assert "installing 10 pip packages with pip" in text
    assert "Successfully installed ten packages" in text
    assert r._live is None


def test_a_plain_callable_ignores_counts():
    seen = []
    count(seen.append, "packages", 1, 2)  # nothing to call: no error, no line
    assert seen == [] and not bars(seen.append)


@pytest.mark.parametrize("term,quiet,as_json,want", [
    ("xterm-256color", False, False, True),
    ("dumb", False, False, False),
    ("xterm", True, False, False),
    ("xterm", False, True, False),
])
def test_bars_only_on_a_real_terminal(monkeypatch, term, quiet, as_json, want):
    monkeypatch.setenv("TERM", term)
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            assert wants_bars(tty, quiet, as_json) is want
        assert wants_bars(io.StringIO(), False, False) is False  # a pipe or file: never
    finally:
        os.close(leader)
        os.close(follower)
