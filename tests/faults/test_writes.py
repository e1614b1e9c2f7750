"""Writes that cannot succeed: a user's file in the way, read-only or full filesystems, names
too long, interrupts. Each ends in one message (exit 4 for the filesystem), leaves what was
there before byte-for-byte, and leaves no temporary or hidden file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.faultkit import debris, run_subprocess, tree
from support.mounts import fill, tmpfs

fault = pytest.mark.fault
pytestmark = pytest.mark.integration
RESULTS = Path(__file__).parents[1] / "fixtures" / "results"
README = "# project\n\n<!-- envgen:table:start -->\nold\n<!-- envgen:table:end -->\n"


def _args(make_args: list[str], out: Path) -> list[str]:
    args = list(make_args)
    args[args.index("--out") + 1] = str(out)
    return [*args, "--cuda", "12.8"]


def _lock_id(make_args, cli) -> str:
    r = cli(*make_args, "--cuda", "12.8", "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)["id"]


@fault("W01", "OUT/<id> exists as a user's file: refused, the file kept, nothing hidden", exit=4)
def test_out_id_is_a_file(cli, make_args, tmp_path):
    cid = _lock_id(make_args, cli)
    out = tmp_path / "out"
    out.mkdir()
    (out / cid).write_text("my notes\n")
    before = tree(out)
    r = cli(*_args(make_args, out), "--json")
    assert r.code == 4 and r.error["kind"] == "filesystem"
    assert "exists and is not a directory" in r.error["message"]
    assert r.error["source"] == "--out"
    assert tree(out) == before and debris(out) == []


@fault("W02", "OUT/<id> is a folder envgen did not write: refused, kept", exit=4)
def test_out_id_is_a_foreign_folder(cli, make_args, tmp_path):
    cid = _lock_id(make_args, cli)
    out = tmp_path / "out"
    (out / cid).mkdir(parents=True)
    (out / cid / "thesis.tex").write_text("years of work\n")
    before = tree(out)
    r = cli(*_args(make_args, out))
    assert r.code == 4 and r.says("was not written by envgen", "never replaces a folder")
    assert tree(out) == before


@fault("W03", "--out below a file (a parent is not a folder)", exit=4)
def test_out_below_a_file(cli, make_args, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    r = cli(*_args(make_args, blocker / "locks"))
    assert r.code == 4 and r.says("Not a directory", "a parent of that path is a file", "blocker")
    assert blocker.read_text() == "x"


@fault("W04", "--out on a read-only filesystem", exit=4)
def test_out_read_only(cli, make_args, tmp_path):
    with tmpfs(tmp_path / "ro", readonly=True) as ro:
        r = cli(*_args(make_args, ro), "--json")
        assert r.code == 4 and "Read-only file system" in r.error["message"]
        assert "read-only" in r.error["fix"] and tree(ro) == {}


@fault("W05", "--out on a full disk: no half-written lock, the previous lock intact", exit=4)
def test_out_disk_full(cli, make_args, tmp_path):
    with tmpfs(tmp_path / "small", size_kb=512) as small:
        assert cli(*_args(make_args, small)).code == 0
        (lock,) = [p for p in small.iterdir()]
        before = tree(lock)
        fill(small)
        r = cli(*_args(make_args, small))
        assert r.code == 4 and r.says("No space left on device", "the disk is full")
        assert tree(lock) == before
        assert debris(small) == []


@fault("W06", "--out with a name longer than the filesystem allows", exit=4)
def test_out_name_too_long(cli, make_args, tmp_path):
    r = cli(*_args(make_args, tmp_path / ("x" * 300)))
    assert r.code == 4 and r.says("File name too long", "shorter path")


@fault("W07", "config `out` pointing at a file is blamed on the config key", exit=4)
def test_out_from_config(cli, make_args, tmp_path):
    cid = _lock_id(make_args, cli)
    out = tmp_path / "cfgout"
    out.mkdir()
    (out / cid).write_text("mine\n")
    Path("envgen.toml").write_text(f'out = "{out}"\n')
    args = [a for i, a in enumerate(make_args)
            if a != "--out" and (i == 0 or make_args[i - 1] != "--out")]
    r = cli(*args, "--cuda", "12.8", "--json")
    assert r.code == 4 and r.error["source"].endswith("envgen.toml:out")
    assert (out / cid).read_text() == "mine\n"


@fault("W08", "a make killed mid-write leaves debris; the next make clears it and says so",
       exit=0)
def test_debris_of_a_killed_make(make_args, tmp_path):
    out = tmp_path / "locks"
    env = {"ENVGEN_TEST_WRITE_DELAY": "0.5"}
    proc = subprocess.Popen([sys.executable, "-m", "envgen", *_args(make_args, out)],
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not any(out.glob(".*.tmp-*/*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert debris(out), "the kill left its staging folder"
    r = run_subprocess(*_args(make_args, out))
    assert r.code == 0 and r.says("left by an interrupted envgen run")
    assert debris(out) == []


@fault("W09", "Ctrl-C while make writes: rolled back, the previous lock intact", exit=130)
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_during_make_write(make_args, tmp_path, signum, code):
    out = tmp_path / "locks"
    assert run_subprocess(*_args(make_args, out)).code == 0
    (lock,) = list(out.iterdir())
    before = tree(lock)
    proc = subprocess.Popen([sys.executable, "-m", "envgen", *_args(make_args, out)],
                            env={**os.environ, "ENVGEN_TEST_WRITE_DELAY": "0.5"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(out.glob(".*.tmp-*/*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert f"interrupted by {signal.Signals(signum).name}" in err
    assert "removed the partly written" in err and "the previous one is unchanged" in err
    assert "Traceback" not in err
    assert tree(lock) == before and debris(out) == []


@fault("W10", "table --write with a folder where the page belongs: none of the 3 files written",
       exit=4)
def test_table_page_is_a_folder(cli, fixture_matrix):
    Path("README.md").write_text(README)
    Path("docs/compatibility.md").mkdir(parents=True)
    before = tree(".")
    r = cli("--matrix-dir", fixture_matrix, "table", "--write", "--json")
    assert r.code == 4 and "is a directory" in r.error["message"]
    assert tree(".") == before and debris(".") == []


@fault("W11", "table --write on a full disk: README and pages unchanged", exit=4)
def test_table_disk_full(cli, fixture_matrix, tmp_path):
    with tmpfs(tmp_path / "small", size_kb=256) as small:
        os.chdir(small)
        Path("README.md").write_text(README)
        fill(small)
        before = {p: v for p, v in tree(".").items() if p != "filler"}
        r = cli("--matrix-dir", fixture_matrix, "table", "--write")
        assert r.code == 4 and r.says("No space left on device")
        assert {p: v for p, v in tree(".").items() if p != "filler"} == before
        assert debris(".") == []


@fault("W12", "results add into a results dir that is a file", exit=4)
def test_results_dir_is_a_file(cli, fixture_matrix, tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("x")
    r = cli("--matrix-dir", fixture_matrix, "results", "add", RESULTS / "ds-gpu-pass.json",
            "--results-dir", blocker)
    assert r.code == 4 and r.says("a parent of that path is a file")
    assert blocker.read_text() == "x"


@fault("W13", "results add of a JSON array / non-JSON / non-UTF-8 file: nothing stored", exit=1)
@pytest.mark.parametrize("content", [b"[1, 2]", b"{not json", b"\xff\xfe\x00"])
def test_results_add_bad_record(cli, fixture_matrix, tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    store = tmp_path / "store"
    r = cli("--matrix-dir", fixture_matrix, "results", "add", RESULTS / "ds-gpu-pass.json", bad,
            "--results-dir", store)
    assert r.code == 1 and r.says("nothing was written", str(bad))
    assert tree(store) == {}


@fault("W14", "results add on a read-only results dir", exit=4)
def test_results_read_only(cli, fixture_matrix, tmp_path):
    with tmpfs(tmp_path / "ro", readonly=True) as ro:
        r = cli("--matrix-dir", fixture_matrix, "results", "add",
                RESULTS / "ds-gpu-pass.json", "--results-dir", ro)
        assert r.code == 4 and r.says("Read-only file system")


@fault("W15", "verify --record naming a folder", exit=4)
def test_verify_record_is_a_folder(cli, tmp_path):
    (tmp_path / "rec").mkdir()
    r = cli("verify", "ops", "--framework", "deepspeed", "--record", tmp_path / "rec")
    assert r.code == 4 and r.says("is a directory", "source: --record")


@fault("W16", "two makes at once into the same folder: both succeed, one complete lock",
       exit=0)
def test_concurrent_makes(make_args, tmp_path):
    out = tmp_path / "locks"
    procs = [subprocess.Popen([sys.executable, "-m", "envgen", *_args(make_args, out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    (lock,) = list(out.iterdir())
    manifest = json.loads((lock / "envgen.lock.json").read_text())
    assert set(manifest["files"]) | {"envgen.lock.json"} == {p.name for p in lock.iterdir()}
    assert debris(out) == []


@fault("W17", "stdout closed by the reader (`| head`): exit 0, no traceback", exit=0)
def test_closed_stdout(fixture_matrix):
    env = {**os.environ, "ENVGEN_MATRIX_DIR": str(fixture_matrix)}
    proc = subprocess.run(f"{sys.executable} -m envgen resolve --json --limit 0 | head -c 1",
                          shell=True, capture_output=True, text=True, env=env, check=False,
                          executable="/bin/bash")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr


@fault("W18", "a cache directory that cannot be written (uv/rattler would blame the index)",
       exit=4)
@pytest.mark.parametrize("how", ["flag", "env"])
def test_cache_dir_not_writable(cli, make_args, tmp_path, how):
    with tmpfs(tmp_path / "ro", readonly=True) as ro:
        args = list(make_args)
        if how == "flag":
            args[args.index("--cache-dir") + 1] = str(ro)
            env = {}
        else:
            i = args.index("--cache-dir")
            del args[i:i + 2]
            env = {"ENVGEN_CACHE_DIR": str(ro)}
        r = cli(*args, "--cuda", "12.8", "--json", env=env)
        assert r.code == 4 and r.error["kind"] == "filesystem"
        assert r.error["message"] == f"the cache directory {ro} is not writable: " \
                                     "Read-only file system"
        assert r.error["source"] == ("--cache-dir" if how == "flag" else "ENVGEN_CACHE_DIR")
        assert not (tmp_path / "locks").exists()
