"""`envgen make` on a real terminal (a pty): a live display with a spinner and the step's time
above which the progress lines stay, erased before the result is printed; --quiet and a pipe
get no display."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def _run_in_pty(args: list[str], tmp_path) -> str:
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"}
    proc = subprocess.Popen([sys.executable, "-m", "envgen", *args], stdin=follower,
                            stdout=follower, stderr=follower, env=env, cwd=tmp_path)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    os.close(leader)
    return b"".join(chunks).decode("utf-8", errors="replace")


def test_make_draws_a_live_display_on_a_terminal(make_args, tmp_path):
    text = _run_in_pty(make_args, tmp_path)
    assert "\x1b[?25l" in text  # the cursor hidden while the display is live …
    assert "\x1b[?25h" in text  # … and shown again
    assert "resolving pip packages" in text
    # the display is erased (cursor shown, line cleared) right before the result
    before, _, after = text.partition("Locked deepspeed-")
    assert before.endswith("\x1b[2K") and "\x1b[?25h" in before[-40:]
    assert "\x1b[?25l" not in after  # no display while the result is printed


def test_quiet_and_pipes_get_no_display(make_args, tmp_path):
    text = _run_in_pty([*make_args, "--quiet"], tmp_path)
    assert "\x1b[?25l" not in text and "resolving pip packages" not in text
    assert "Locked deepspeed-" in text
    piped = subprocess.run([sys.executable, "-m", "envgen", *make_args], capture_output=True,
                           text=True, cwd=tmp_path, check=True)
    assert "\x1b[" not in piped.stderr and "resolving pip packages" in piped.stderr
