"""Two runs at once, and writes that must not lose anything: a second `matrix update --write`,
`results add` or `table --write` while one runs refuses at once (exit 4, kind "busy"), naming
the other run, and writes nothing; the first one's additions are all there afterwards. A run
killed while holding the lock blocks nobody. Files a user added to a lock folder survive the
next `envgen make`; a full disk leaves no temporary file in the ccache store.

Each race is real (separate envgen processes, a loopback index) and made deterministic: the
first run is held at a known point (an index page the test answers only when told, or a
stopped process), never timed with sleeps."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.faultkit import Result, debris, run_subprocess, tree
from support.http_call import call
from support.index_server import Gate
from support.mini_pypi import add_wheel, fixture
from support.mounts import tmpfs

from envgen import writelock
from envgen.image import ccache_store

fault = pytest.mark.fault
pytestmark = pytest.mark.integration
RESULTS = Path(__file__).parents[1] / "fixtures" / "results"
README = "# project\n\n<!-- envgen:table:start -->\nold\n<!-- envgen:table:end -->\n"
CU121_PAGE = "/whl/cu121/torch/"


def _envgen(*argv, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envgen", *map(str, argv)],
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> Result:
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    return Result(proc.returncode, out, err)


def _without_lock(root: Path) -> dict:
    return {p: v for p, v in tree(root).items() if not p.endswith(writelock.NAME)}


def _torch_indexes(matrix: Path) -> set[str]:
    doc = json.loads((matrix / "harvested" / "torch.json").read_text())
    return {b["index"] for b in doc["builds"]}


def _refresh(matrix: Path, cache: Path, *extra: str) -> list[str]:
    return ["matrix", "update", "--matrix-dir", matrix, "--cache-dir", cache,
            "--timeout", "60", "--retries", "1", "--write", *extra]


@fault("C01", "two concurrent refreshes: the second refuses naming the first; no additions "
       "lost", exit=4)
def test_two_concurrent_refreshes(committed, index_server, fast):
    """The lost update this prevents: run A harvests the opt-in cu121 index too, run B only
    PyPI; B carries the cu121 records over from the snapshot it read — read before A wrote,
    B's snapshot would drop A's additions."""
    assert "pytorch-cu121" not in _torch_indexes(committed)
    gate = index_server.state.gates[CU121_PAGE] = Gate()
    a = _envgen(*_refresh(committed, fast["cache_dir"] / "a", "--index", "pytorch-cu121"))
    try:
        assert gate.arrived.wait(60), "run A never asked for the cu121 page"
        before = _without_lock(committed)  # A holds the lock, has written nothing yet
        info = json.loads((committed / writelock.NAME).read_text())
        assert info["pid"] == a.pid and info["command"] == "envgen matrix update --write"
        b = run_subprocess(*_refresh(committed, fast["cache_dir"] / "b"), "--json")
        assert b.code == 4 and b.error["kind"] == "busy", b.err
        assert b.error["message"].startswith(
            f"another envgen run (pid {a.pid}, `envgen matrix update --write`, started ")
        assert f"is writing {committed}/; nothing was written" in b.error["message"]
        assert f"kill {a.pid}" in b.error["fix"]
        assert _without_lock(committed) == before
    finally:
        gate.opened.set()
    ra = _finish(a)
    assert ra.code == 0, ra.err
    assert "pytorch-cu121" in _torch_indexes(committed)  # A's additions
    # B again, once A is done, with something new on PyPI: both runs' additions are there
    add_wheel(index_server, "torch", "torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl",
              fixture("torch-2.5.1-cp311-manylinux1_x86_64.METADATA"))
    rb = run_subprocess(*_refresh(committed, fast["cache_dir"] / "b"), "--allow-removals")
    assert rb.code == 0, rb.err
    torch = (committed / "harvested" / "torch.json").read_text()
    assert "pytorch-cu121" in _torch_indexes(committed)
    assert "torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl" in torch
    assert debris(committed) == []


@fault("C02", "a refresh killed while holding the lock: the next run is not blocked", exit=0)
def test_lock_of_a_killed_run(cli, committed, index_server, fast):
    gate = index_server.state.gates[CU121_PAGE] = Gate()
    a = _envgen(*_refresh(committed, fast["cache_dir"] / "a", "--index", "pytorch-cu121"))
    try:
        assert gate.arrived.wait(60), "run A never asked for the cu121 page"
        a.send_signal(signal.SIGKILL)
        a.communicate(timeout=60)
    finally:
        gate.opened.set()
    stale = json.loads((committed / writelock.NAME).read_text())
    assert stale["pid"] == a.pid  # the dead run's words are still there; its flock is not
    r = cli(*_refresh(committed, fast["cache_dir"] / "b"), "--allow-removals")
    assert r.code == 0, r.err
    assert not (committed / writelock.NAME).exists() and debris(committed) == []


@fault("C03", "two concurrent `results add`: the second refuses naming the first", exit=4)
def test_two_concurrent_results_adds(tmp_path, fixture_matrix):
    store = tmp_path / "store"
    first, second = RESULTS / "ds-gpu-pass.json", RESULTS / "megatron-cpu-pass.json"
    args = ["--matrix-dir", fixture_matrix, "results", "add", "--results-dir", store]
    a = _envgen(*args, first, env={"ENVGEN_TEST_COMMIT_DELAY": "2"})
    try:
        _wait_for(a, lambda: list(store.rglob(".*.envgen-*.tmp")))
        a.send_signal(signal.SIGSTOP)  # A: its record staged, the lock held, nothing renamed
        b = run_subprocess(*args, second)
        assert b.code == 4, b.err
        assert b.says(f"another envgen run (pid {a.pid}, `envgen results add`, started ",
                      f"is writing {store}/; nothing was written", f"kill {a.pid}")
        assert not [p for p in store.rglob("*.json")]
    finally:
        a.send_signal(signal.SIGCONT)
    assert _finish(a).code == 0
    assert run_subprocess(*args, second).code == 0
    assert len(list(store.rglob("*.json"))) == 2  # both records, none lost
    assert debris(store) == [] and not (store / writelock.NAME).exists()


def _wait_for(proc: subprocess.Popen, found) -> None:
    for _ in range(6000):
        if found():
            return
        if proc.poll() is not None:
            pytest.fail(f"the first run ended early: {proc.communicate()}")
        time.sleep(0.01)  # polling; the run waits 2 s there, and is then stopped
    pytest.fail("the first run never staged its write")


@fault("C04", "`table --write` while another one writes: refused, README unchanged", exit=4)
def test_table_while_another_writes(cli, fixture_matrix):
    Path("README.md").write_text(README)
    before = tree(".")
    with writelock.holding(Path.cwd(), "envgen table --write"):  # this process: the other
        r = run_subprocess("--matrix-dir", fixture_matrix, "table", "--write", "--json",
                           cwd=Path.cwd())
    assert r.code == 4 and r.error["kind"] == "busy"
    assert r.error["message"].startswith(
        f"another envgen run (pid {os.getpid()}, `envgen table --write`, started ")
    assert tree(".") == before
    assert cli("--matrix-dir", fixture_matrix, "table", "--write").code == 0
    assert debris(".") == [] and not Path(writelock.NAME).exists()


@fault("C05", "files a user added to a lock folder survive the next make", exit=0)
def test_make_keeps_the_users_files(cli, make_args):
    assert cli(*make_args, "--cuda", "12.8").code == 0
    (lock,) = Path(make_args[make_args.index("--out") + 1]).iterdir()
    (lock / "NOTES.md").write_text("why we pinned this\n")
    (lock / "runs").mkdir()
    (lock / "runs" / "job.sh").write_text("#!/bin/sh\n")
    (lock / "empty").mkdir()
    (lock / "latest").symlink_to("NOTES.md")
    theirs = {p: v for p, v in tree(lock).items()
              if p.split("/")[0] in ("NOTES.md", "runs", "empty", "latest")}
    r = cli(*make_args, "--cuda", "12.8", "--image")
    assert r.code == 0, r.err
    assert {p: v for p, v in tree(lock).items() if p in theirs} == theirs
    assert (lock / "latest").is_symlink() and (lock / "Dockerfile").is_file()
    manifest = json.loads((lock / "envgen.lock.json").read_text())
    assert set(manifest["files"]).isdisjoint(theirs)
    assert debris(lock.parent) == []


@fault("C06", "a user's file where the next make writes one: refused, kept", exit=4)
def test_make_refuses_to_replace_a_users_file(cli, make_args):
    assert cli(*make_args, "--cuda", "12.8").code == 0
    (lock,) = Path(make_args[make_args.index("--out") + 1]).iterdir()
    (lock / "Dockerfile").write_text("FROM my-own-base\n")
    before = tree(lock)
    r = cli(*make_args, "--cuda", "12.8", "--image", "--json")
    assert r.code == 4 and r.error["kind"] == "filesystem"
    assert "Dockerfile is not a file envgen wrote" in r.error["message"]
    assert "move it out of the folder" in r.error["fix"]
    assert tree(lock) == before and debris(lock.parent) == []


@fault("C07", "the ccache store's disk fills during a PUT: 507, no temporary file", exit=0)
def test_ccache_put_on_a_full_disk(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tmpfs(tmp_path / "small", size_kb=512) as small, \
            ccache_store.serving("127.0.0.1", small / "ccache", port) as running:
        assert not isinstance(running, str), running
        base = f"http://127.0.0.1:{port}/{running.url.rsplit('/', 1)[1]}"
        assert call("PUT", f"{base}/c1/big", b"z" * 2_000_000)[0] == 507
        assert [p.name for p in running.root.rglob("*") if p.is_file()] == []
        assert running.counts.stored == 0
        assert call("PUT", f"{base}/c1/small", b"z" * 1000)[0] == 201  # space for small ones
        assert [p.name for p in running.root.rglob("*") if p.is_file()] == ["small"]
