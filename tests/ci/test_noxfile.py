"""The nox sessions that need a GPU skip cleanly without one, and every session that takes a
combination id says how to call it when it is missing (nox runs in this env: --no-venv)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NOXFILE = Path(__file__).parents[2] / "noxfile.py"


def nox(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(NOXFILE), "--no-venv",
                           *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def _gpus() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and bool(subprocess.run([smi, "-L"], capture_output=True,
                                             text=True).stdout.strip())


def test_the_pipeline_sessions_exist(tmp_path):
    listed = nox("-l", cwd=tmp_path).stdout
    for name in ("tests", "lint", "update", "lock", "image", "ops", "smoke", "publish",
                 "docs"):
        assert f" {name} -> " in listed, listed


@pytest.mark.skipif(_gpus(), reason="this machine has a GPU: the sessions would really run")
@pytest.mark.parametrize("session", ["ops", "smoke"])
def test_gpu_sessions_skip_without_a_gpu(session, tmp_path):
    proc = nox("-s", session, "--", "deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"Session {session} skipped: no NVIDIA GPU here" in proc.stderr
    assert not (tmp_path / "results").exists()  # nothing recorded


@pytest.mark.parametrize("session", ["lock", "image", "ops", "smoke"])
def test_sessions_without_a_combination_say_how_to_call_them(session, tmp_path):
    proc = nox("-s", session, cwd=tmp_path)
    assert proc.returncode == 1
    assert f"usage: nox -s {session} -- <combination id>" in proc.stderr


def test_publish_without_records_skips(tmp_path):
    proc = nox("-s", "publish", cwd=tmp_path)
    assert proc.returncode == 0 and "no records in results/" in proc.stderr
