"""Locks that must not be trusted and installs that are cut short: an edited manifest or lock
file is refused before anything is installed; a prefix in the way is kept; SIGINT/SIGTERM roll
the prefix back; a SIGKILLed install is named by the next one and cleared on request."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.faultkit import run_subprocess, tree
from support.mounts import tmpfs

from envgen.lock.manifest import manifest_hash

fault = pytest.mark.fault
pytestmark = pytest.mark.integration


@pytest.fixture
def lock(make_args, tmp_path) -> Path:
    r = run_subprocess(*make_args, "--cuda", "12.8", "--json")
    assert r.code == 0, r.err
    return Path(json.loads(r.out)["directory"])


def _edit_manifest(lock: Path, change) -> None:
    path = lock / "envgen.lock.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


@contextlib.contextmanager
def slow_index(wheel_index, seconds: float):
    server, _ = wheel_index
    server.state.delay = seconds
    try:
        yield
    finally:
        server.state.delay = 0.0


def _install(lock: Path, prefix: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envgen", "install", str(lock), "--prefix",
                             str(prefix), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), f"{path} never appeared"


@fault("L01", "an edited envgen.lock.json (a package URL swapped) is refused", exit=1)
def test_edited_manifest(cli, lock, tmp_path):
    def swap(doc):
        doc["conda"]["packages"][0]["url"] = "https://evil.example/pkg.conda"
    _edit_manifest(lock, swap)
    r = cli("install", lock, "--prefix", tmp_path / "env", "--json")
    assert r.code == 1 and "was modified after envgen wrote it" in r.error["message"]
    assert not (tmp_path / "env").exists()


@fault("L02", "an edited manifest with its manifest_hash recomputed still fails the file hashes",
       exit=1)
def test_edited_manifest_rehashed(cli, lock, tmp_path):
    (lock / "requirements.lock.txt").write_text("evil==1.0\n")

    def rehash(doc):
        doc["pip"]["packages"] = 1
        doc["manifest_hash"] = manifest_hash(doc)
    _edit_manifest(lock, rehash)
    r = cli("install", lock, "--prefix", tmp_path / "env")
    assert r.code == 1 and r.says("requirements.lock.txt was modified after envgen wrote it")
    assert not (tmp_path / "env").exists()


@fault("L03", "a manifest that is a JSON array / not JSON / of an older schema", exit=1)
@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "is not a valid envgen lock manifest"),
    ("{broken", "is not valid JSON"),
    ('{"schema": 1, "id": "x"}', "this envgen reads schema 2"),
])
def test_manifest_shapes(cli, lock, tmp_path, content, message):
    (lock / "envgen.lock.json").write_text(content)
    r = cli("install", lock, "--prefix", tmp_path / "env")
    assert r.code == 1 and r.says(message, "regenerate the lock")
    assert not (tmp_path / "env").exists()


@fault("L04", "a manifest listing a file outside the lock directory (../../etc/passwd)", exit=1)
def test_manifest_path_traversal(cli, lock, tmp_path):
    def escape(doc):
        doc["files"]["../../../etc/passwd"] = "sha256:" + "0" * 64
        doc["manifest_hash"] = manifest_hash(doc)
    _edit_manifest(lock, escape)
    r = cli("install", lock, "--prefix", tmp_path / "env")
    assert r.code == 1 and r.says("is not a valid envgen lock manifest", "files")


@fault("L05", "a lock directory that does not exist / is a file / has no manifest", exit=2)
@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_lock_dir_shapes(cli, tmp_path, kind):
    target = tmp_path / "lockdir"
    if kind == "file":
        target.write_text("x")
    elif kind == "empty":
        target.mkdir()
    r = cli("install", target, "--prefix", tmp_path / "env")
    assert r.code == 2 and not (tmp_path / "env").exists()


@fault("L06", "a non-empty prefix, or a file as the prefix: refused, kept", exit=2)
@pytest.mark.parametrize("kind", ["non-empty", "file"])
def test_prefix_in_the_way(cli, lock, tmp_path, kind):
    prefix = tmp_path / "env"
    if kind == "file":
        prefix.write_text("mine")
    else:
        prefix.mkdir()
        (prefix / "keep.txt").write_text("mine")
    before = tree(tmp_path / "env") if kind != "file" else prefix.read_bytes()
    r = cli("install", lock, "--prefix", prefix)
    assert r.code == 2 and r.says("--prefix")
    assert (tree(prefix) if kind != "file" else prefix.read_bytes()) == before


@fault("L07", "SIGTERM / Ctrl-C during install: the half-installed prefix is removed", exit=143)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_install(lock, tmp_path, wheel_index, signum):
    prefix = tmp_path / "env"
    with slow_index(wheel_index, 0.5):
        proc = _install(lock, prefix)
        _wait_for(prefix / "bin" / "python")  # the conda part is in; pip is downloading
        time.sleep(0.3)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert f"interrupted by {signal.Signals(signum).name}" in err
    assert f"removed the half-installed prefix {prefix}" in err and "Traceback" not in err
    assert not prefix.exists()


@fault("L08", "SIGTERM into an empty prefix folder: emptied again, the folder kept", exit=143)
def test_sigterm_into_empty_folder(lock, tmp_path, wheel_index):
    prefix = tmp_path / "env"
    prefix.mkdir()
    with slow_index(wheel_index, 0.5):
        proc = _install(lock, prefix)
        _wait_for(prefix / "bin" / "python")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and f"emptied {prefix} again" in err
    assert prefix.is_dir() and list(prefix.iterdir()) == []


@fault("L09", "a SIGKILLed install is named by the next one; --clear-incomplete clears it",
       exit=1)
def test_killed_install_debris(cli, lock, tmp_path, wheel_index):
    prefix = tmp_path / "env"
    with slow_index(wheel_index, 0.5):
        proc = _install(lock, prefix)
        _wait_for(prefix / "bin" / "python")
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert (prefix / ".envgen-install.json").exists()
    r = cli("install", lock, "--prefix", prefix, "--json")
    assert r.code == 1 and "was interrupted" in r.error["message"]
    assert "--clear-incomplete" in r.error["fix"]
    r = cli("install", lock, "--prefix", prefix, "--clear-incomplete")
    assert r.code == 0, r.err
    assert r.says("removing the interrupted install")
    assert not (prefix / ".envgen-install.json").exists()
    assert (prefix / "bin" / "python").exists()


@fault("L10", "install into a read-only location", exit=4)
def test_install_read_only(cli, lock, tmp_path):
    with tmpfs(tmp_path / "ro", readonly=True) as ro:
        r = cli("install", lock, "--prefix", ro / "env", "--json")
        assert r.code == 4 and "Read-only file system" in r.error["message"]
        assert tree(ro) == {}


@fault("L11", "build of an edited lock is refused before the daemon is asked", exit=1)
def test_build_edited_lock(cli, lock):
    (lock / "environment.yml").write_text("edited: true\n")
    r = cli("build", lock, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert r.code == 1 and r.says("was modified after envgen wrote it")


@fault("L12", "a second install into a prefix another envgen is installing into", exit=1)
def test_concurrent_install(cli, lock, tmp_path, wheel_index):
    prefix = tmp_path / "env"
    with slow_index(wheel_index, 0.5):
        proc = _install(lock, prefix)
        try:
            _wait_for(prefix / ".envgen-install.json")
            r = cli("install", lock, "--prefix", prefix)
            assert r.code == 1 and r.says("is installing into", "right now")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    assert not prefix.exists()


def test_the_kill_tests_restore_the_index(wheel_index):
    assert wheel_index[0].state.delay == 0.0
    assert os.environ.get("ENVGEN_TEST_WRITE_DELAY") is None
