"""envgen.writelock: one writer per folder, the refusal naming the holder, stale files of dead
runs blocking nobody."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from envgen import writelock
from envgen.errors import BusyError, FilesystemError


def _hold_raw(path, info: dict | None):
    """Another holder: a separate open file description with the flock (as another process
    would hold it), the file saying ``info``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if info is not None:
        os.write(fd, json.dumps(info).encode())
    return fd


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_the_lock_file_and_a_folder_it_made_are_gone_afterwards(tmp_path):
    folder = tmp_path / "new" / "data"
    with writelock.holding(folder, "envgen results add"):
        info = json.loads((folder / writelock.NAME).read_text())
        assert info["pid"] == os.getpid() and info["command"] == "envgen results add"
        with writelock.holding(folder, "envgen results add"):  # re-entrant in one process
            pass
        assert (folder / writelock.NAME).exists()
    assert not (tmp_path / "new").exists()


def test_a_folder_that_got_files_stays(tmp_path):
    folder = tmp_path / "data"
    with writelock.holding(folder, "x"):
        (folder / "kept.json").write_text("{}")
    assert os.listdir(folder) == ["kept.json"]


def test_another_holder_is_named(tmp_path):
    started = time.time() - 5
    fd = _hold_raw(tmp_path / writelock.NAME, {"pid": os.getpid(), "command":
                   "envgen matrix update --write", "host": socket.gethostname(),
                   "started": started})
    try:
        with pytest.raises(BusyError) as caught, writelock.holding(tmp_path, "envgen x"):
            pass
    finally:
        os.close(fd)
    err = caught.value
    assert err.exit_code == 4 and err.kind == "busy"
    clock = time.strftime("%H:%M:%S", time.localtime(started))
    assert err.message == (f"another envgen run (pid {os.getpid()}, `envgen matrix update "
                           f"--write`, started {clock}) is writing {tmp_path}/; nothing was "
                           "written")
    assert f"kill {os.getpid()}" in err.hint


def test_a_file_left_by_a_dead_run_blocks_nobody(tmp_path):
    (tmp_path / writelock.NAME).write_text(json.dumps(
        {"pid": _dead_pid(), "command": "envgen results add", "host": socket.gethostname(),
         "started": 1.0}))
    with writelock.holding(tmp_path, "envgen results add"):
        assert json.loads((tmp_path / writelock.NAME).read_text())["pid"] == os.getpid()
    assert not (tmp_path / writelock.NAME).exists()


def test_a_holder_still_showing_a_dead_runs_words_is_not_misreported(tmp_path, monkeypatch):
    """The flock is held, but the file still names a dead run (the holder has not rewritten
    it yet, or never will): the refusal does not name the dead run."""
    monkeypatch.setattr(writelock, "_WAIT_FOR_INFO", 0.2)
    dead = _dead_pid()
    fd = _hold_raw(tmp_path / writelock.NAME, {"pid": dead, "command": "envgen results add",
                                               "host": socket.gethostname(), "started": 1.0})
    try:
        with pytest.raises(BusyError) as caught, writelock.holding(tmp_path, "envgen x"):
            pass
    finally:
        os.close(fd)
    assert str(dead) not in caught.value.message
    assert caught.value.message.startswith(f"another process holds the write lock of "
                                           f"{tmp_path}/")


def test_control_characters_in_the_file_are_not_printed(tmp_path, monkeypatch):
    monkeypatch.setattr(writelock, "_WAIT_FOR_INFO", 0.1)
    fd = _hold_raw(tmp_path / writelock.NAME, {"pid": os.getpid(), "command": "x\x1b[2J",
                                               "host": socket.gethostname(), "started": 1.0})
    try:
        with pytest.raises(BusyError) as caught, writelock.holding(tmp_path, "envgen x"):
            pass
    finally:
        os.close(fd)
    assert "\x1b" not in caught.value.message


def test_a_file_where_the_folder_belongs(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("x")
    with pytest.raises(FilesystemError) as caught, writelock.holding(blocker, "envgen x"):
        pass
    assert "Not a directory" in caught.value.message
    assert "a parent of that path is a file" in caught.value.hint
    assert blocker.read_text() == "x"


def test_a_symlinked_lock_file_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / writelock.NAME).symlink_to(target)
    with pytest.raises(FilesystemError), writelock.holding(tmp_path, "envgen x"):
        pass
    assert target.read_text() == "keep"
