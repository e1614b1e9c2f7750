"""Bounded reads (issue 37 part 4): every file a user hands envgen — hostfile, report, snapshot,
lock, config, record — is read only when it is a regular file, at most its kind's cap, with
JSON depth checked; closed standard streams end in the documented exit code, never a
traceback. Each case runs as a real subprocess with a deadline, so a hang fails the test
instead of stalling the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.faultkit import run_subprocess

from envgen.userfile import CAPS

fault = pytest.mark.fault
HANG = 60  # a read that blocks would outlive this; a bounded one ends in well under a second


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.fixture
def env(tmp_path, fixture_matrix) -> dict[str, str]:
    return {"ENVGEN_MATRIX_DIR": str(fixture_matrix), "ENVGEN_CACHE_DIR": str(tmp_path / "c")}


def _usage(result, *needles: str) -> None:
    assert result.code == 2, (result.code, result.err)
    result.says(*needles)


@fault("B01", "a FIFO as --hostfile: usage error at once, no hang", exit=2)
def test_fifo_hostfile(fifo, env, tmp_path):
    r = run_subprocess("preflight", "--hostfile", fifo, env=env, cwd=tmp_path, timeout=HANG)
    _usage(r, f"--hostfile {fifo} is a FIFO (named pipe), not a regular file")


@fault("B02", "a FIFO as --report: usage error at once, no hang", exit=2)
def test_fifo_report(fifo, env, tmp_path):
    r = run_subprocess("doctor", "--report", fifo, env=env, cwd=tmp_path, timeout=HANG)
    _usage(r, f"{fifo} is a FIFO (named pipe)", "save a pipe's output to a file first")


@fault("B03", "a FIFO as --snapshot: usage error at once, no hang", exit=2)
def test_fifo_snapshot(fifo, env, tmp_path):
    r = run_subprocess("doctor", "--snapshot", fifo, env=env, cwd=tmp_path, timeout=HANG)
    _usage(r, f"{fifo} is a FIFO (named pipe)")


@fault("B04", "a FIFO as a lock's manifest (install, drift): usage error, no hang", exit=2)
def test_fifo_in_a_lock(tmp_path, env):
    lock = tmp_path / "lock"
    lock.mkdir()
    os.mkfifo(lock / "envgen.lock.json")
    for argv in (("install", lock, "--prefix", tmp_path / "env"), ("drift", "--lock", lock)):
        r = run_subprocess(*argv, "--offline", env=env, cwd=tmp_path, timeout=HANG) \
            if argv[0] == "drift" else run_subprocess(*argv, env=env, cwd=tmp_path,
                                                      timeout=HANG)
        _usage(r, "envgen.lock.json is a FIFO (named pipe)")
    assert not (tmp_path / "env").exists()


@fault("B05", "/dev/zero as --report or --snapshot: refused before a byte is read", exit=2)
def test_dev_zero(env, tmp_path):
    for flag in ("--report", "--snapshot"):
        r = run_subprocess("doctor", flag, "/dev/zero", env=env, cwd=tmp_path, timeout=HANG)
        _usage(r, "/dev/zero is a character device, not a regular file")


@fault("B06", "a report larger than the cap: usage error naming the file and the cap", exit=2)
def test_report_over_the_cap(env, tmp_path):
    big = tmp_path / "huge-report.txt"
    with big.open("wb") as fh:  # sparse: no disk used, the size is what counts
        fh.truncate(46 * 1024 * 1024)
    r = run_subprocess("doctor", "--report", big, "--json", env=env, cwd=tmp_path,
                       timeout=HANG)
    assert r.code == 2
    err = r.error
    assert str(big) in err["message"] and "46.0 MiB" in err["message"]
    assert f"{CAPS['report'] / 2**20:.1f} MiB" in err["message"] and err["fix"]


@fault("B07", "a snapshot nested 100,000 deep: usage error, no RecursionError", exit=2)
def test_deep_json_snapshot(env, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    r = run_subprocess("doctor", "--snapshot", deep, env=env, cwd=tmp_path, timeout=HANG)
    _usage(r, "nested too deeply")
    assert "RecursionError" not in r.err and "internal error" not in r.err


@fault("B08", "--report - with standard input closed: usage error", exit=2)
def test_report_from_closed_stdin(env, tmp_path):
    proc = subprocess.run(f"exec {sys.executable} -m envgen doctor --report - <&-", shell=True,
                          capture_output=True, text=True, env={**os.environ, **env},
                          cwd=tmp_path, timeout=HANG, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "standard input is closed" in proc.stderr and "Traceback" not in proc.stderr


@fault("B09", "stdout, stderr or all three streams closed: the command's own exit code", exit=0)
@pytest.mark.parametrize("redirect", [">&-", "2>&-", ">&- 2>&- <&-"])
def test_closed_output_streams(env, tmp_path, redirect):
    shell = f"exec {sys.executable} -m envgen matrix show --framework deepspeed {redirect}"
    proc = subprocess.run(shell, shell=True, capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=tmp_path, timeout=HANG, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    bad = f"exec {sys.executable} -m envgen resolve --framework no-such-framework {redirect}"
    proc = subprocess.run(bad, shell=True, capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=tmp_path, timeout=HANG, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@fault("B10", "a directory as --hostfile or --report: usage error naming what it is", exit=2)
def test_directory_as_a_file(env, tmp_path):
    r = run_subprocess("preflight", "--hostfile", tmp_path, env=env, cwd=tmp_path,
                       timeout=HANG)
    _usage(r, "is a directory, not a regular file")
    r = run_subprocess("doctor", "--report", tmp_path, env=env, cwd=tmp_path, timeout=HANG)
    _usage(r, "is a directory, not a regular file")


@fault("B11", "an envgen.toml larger than the config cap: usage error naming it", exit=2)
def test_config_over_the_cap(env, tmp_path):
    with (tmp_path / "envgen.toml").open("wb") as fh:
        fh.truncate(CAPS["config"] + 1)
    r = run_subprocess("matrix", "show", env=env, cwd=tmp_path, timeout=HANG)
    _usage(r, "envgen.toml is", "envgen reads at most")


@fault("B12", "a FIFO among the result records: a data error naming it, no hang", exit=1)
def test_fifo_among_records(env, tmp_path, fixture_matrix):
    import shutil

    matrix = tmp_path / "matrix"
    shutil.copytree(fixture_matrix, matrix)
    (matrix / "results" / "verify").mkdir(parents=True)
    os.mkfifo(matrix / "results" / "verify" / "pipe.json")
    r = run_subprocess("results", "show", env={**env, "ENVGEN_MATRIX_DIR": str(matrix)},
                       cwd=tmp_path, timeout=HANG)
    assert r.code == 1, r.err
    r.says("pipe.json is a FIFO (named pipe), not a regular file")


def test_an_honest_report_and_snapshot_still_read(env, tmp_path):
    report = Path(__file__).parents[1] / "fixtures" / "reports"
    one = next(p for p in sorted(report.iterdir()) if p.suffix == ".txt")
    r = run_subprocess("doctor", "--report", one, "--json", env=env, cwd=tmp_path,
                       timeout=HANG)
    assert r.code in (0, 1) and "findings" in json.loads(r.out)
