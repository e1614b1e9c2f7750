"""envgen/cli/lifecycle.py: the console script ends without the interpreter's teardown, after
every exit function ran, with the right code and all output written; otherwise the normal
exit. Each case is a real Python process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# A process that records whether the interpreter's teardown ran: an object kept in a module
# global writes TORN when it is freed (which only teardown does), and an atexit function
# registered after install (as a command's logging or temporary directory would) writes RAN.
PROGRAM = """
import atexit, sys
from envgen.cli import lifecycle
{before}
installed = lifecycle.install()

class Torn:
    def __del__(self, path=sys.argv[1] + "/TORN", open=open):  # (teardown clears globals)
        open(path, "w").close()

keep = Torn()
atexit.register(lambda: open(sys.argv[1] + "/RAN", "w").close())
sys.stdout.write("x" * 100000)  # buffered, not flushed: the quick exit must flush it
sys.stderr.write("installed=%s\\n" % installed)
lifecycle.leaving({code!r})
raise SystemExit({code!r})
"""


def run(tmp_path, code: object = 3, before: str = "", flags: tuple[str, ...] = ()):
    proc = subprocess.run([sys.executable, *flags, "-c", PROGRAM.format(code=code,
                                                                          before=before),
                           str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONDEVMODE"})
    seen = {name for name in ("TORN", "RAN") if (tmp_path / name).exists()}
    return proc, seen


def test_exits_with_the_code_after_the_exit_functions_and_skips_teardown(tmp_path):
    proc, seen = run(tmp_path, code=3)
    assert proc.returncode == 3, proc.stderr
    assert "installed=True" in proc.stderr
    assert len(proc.stdout) == 100000  # flushed before leaving
    assert seen == {"RAN"}  # the exit function ran; the teardown did not


@pytest.mark.parametrize("code, want", [(None, 0), (0, 0), (130, 130)])
def test_the_codes_a_command_ends_with(tmp_path, code, want):
    proc, seen = run(tmp_path, code=code)
    assert proc.returncode == want and seen == {"RAN"}


def test_a_message_keeps_the_normal_exit(tmp_path):
    """SystemExit("text"): Python prints it and exits 1, as without the quick exit."""
    proc, seen = run(tmp_path, code="cannot go on")
    assert proc.returncode == 1 and proc.stderr.rstrip().endswith("cannot go on")
    assert seen == {"RAN", "TORN"}


def test_an_exit_function_registered_before_envgen_keeps_the_normal_exit(tmp_path):
    """A coverage or profiling hook registered first must run: no quick exit then."""
    before = ("atexit.register(lambda: open(sys.argv[1] + '/FIRST', 'w').close())")
    proc, seen = run(tmp_path, code=4, before=before)
    assert proc.returncode == 4 and "installed=False" in proc.stderr
    assert seen == {"RAN", "TORN"} and (tmp_path / "FIRST").exists()


def test_development_mode_keeps_the_normal_exit(tmp_path):
    proc, seen = run(tmp_path, code=2, flags=("-X", "dev"))
    assert proc.returncode == 2 and "installed=False" in proc.stderr
    assert seen == {"RAN", "TORN"}


def test_a_reader_that_left_is_no_error(tmp_path):
    """`envgen resolve ... | head -1` through the real console entry: exit 0, nothing on
    stderr (the pipe's reader left before the output was written)."""
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL)
    proc = subprocess.run([sys.executable, "-m", "envgen", "resolve", "--framework",
                           "deepspeed", "--limit", "0"], stdout=reader.stdin,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    reader.stdin.close()
    reader.wait(timeout=30)
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr


def test_no_collection_while_starting_and_the_collector_back_for_the_command(tmp_path):
    """begin() holds the collector off; started() freezes what start-up made and turns it on
    again (a long command collects as usual); a collector someone else turned off stays off."""
    code = """
import gc
from envgen.cli import lifecycle
lifecycle.begin()
off = gc.isenabled()
lifecycle.started()
on, frozen = gc.isenabled(), gc.get_freeze_count()
gc.disable()
lifecycle.begin(); lifecycle.started()
print(off, on, frozen > 1000, gc.isenabled())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    assert out == ["False", "True", "True", "False"]


def test_a_command_run_in_process_keeps_the_callers_collector(monkeypatch):
    """main() (tests, embedding) never turns the collector off or on: only the console
    script's begin() does."""
    import gc
    import io

    from envgen.cli.main import main

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert gc.isenabled()
    assert main(["resolve", "--framework", "deepspeed", "--cuda", "12.1"]) == 0
    assert gc.isenabled()
