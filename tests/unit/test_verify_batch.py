"""envgen.verify.batch: which lock entries travel to an offline GPU machine (the file of each
is PipPackage.primary's choice, tested with the pylock reader in tests/lock/test_plan.py), the
order combinations are tried in, what a run stops, and what an env imports when a venv shadows
the machine's site-packages (real venvs, no network)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envgen.lock import requirements
from envgen.verify import batch

LOCK = """\
#
# pip lock (pip-tools format) …
--index-url https://pypi.org/simple

deepspeed==0.19.7 \\
    --hash=sha256:c6640ecbda08ec6b4b6c72521155351719f145f48d850687b7332f503992921c
numpy==2.5.5 \\
    --hash=sha256:aa \\
    --hash=sha256:bb
nvidia-nccl-cu13==2.28.9 \\
    --hash=sha256:cc
cuda-bindings==13.5.0 \\
    --hash=sha256:dd
sympy==1.14.0 \\
    --hash=sha256:ee
torch==2.11.0 \\
    --hash=sha256:ff
Typing_Extensions==4.16.0 \\
    --hash=sha256:11
triton==3.6.0 \\
    --hash=sha256:22
"""


def test_requirement_blocks_keep_every_hash_line_and_normalize_names():
    blocks = requirements.blocks(LOCK)
    assert [(n, v) for n, v, _ in blocks] == [
        ("deepspeed", "0.19.7"), ("numpy", "2.5.5"), ("nvidia-nccl-cu13", "2.28.9"),
        ("cuda-bindings", "13.5.0"), ("sympy", "1.14.0"), ("torch", "2.11.0"),
        ("typing-extensions", "4.16.0"), ("triton", "3.6.0")]
    numpy = dict((n, b) for n, _, b in blocks)["numpy"]
    assert numpy.splitlines() == ["numpy==2.5.5 \\", "    --hash=sha256:aa \\",
                                  "    --hash=sha256:bb"]


def test_carried_leaves_torch_and_cuda_to_the_machine():
    text = batch.carried(LOCK)
    names = [n for n, _, _ in requirements.blocks(text)]
    assert names == ["deepspeed", "numpy", "sympy", "typing-extensions"]
    assert "--hash=sha256:bb" in text  # the blocks travel whole, for --require-hashes


def test_carried_leaves_what_the_plan_says_the_machine_provides():
    text = batch.carried(LOCK, frozenset({"sympy", "typing-extensions"}))
    assert [n for n, _, _ in requirements.blocks(text)] == ["deepspeed", "numpy"]


def test_fetch_refuses_a_file_whose_hash_is_not_the_locks(tmp_path):
    src = tmp_path / "pkg-1.0-py3-none-any.whl"
    src.write_bytes(b"payload")
    dest = tmp_path / "wheelhouse" / src.name
    dest.parent.mkdir()
    with pytest.raises(SystemExit, match="is not the lock's"):
        batch._fetch(src.as_uri(), "0" * 64, dest)
    assert not dest.exists() and not list(dest.parent.iterdir())  # no half-written file
    batch._fetch(src.as_uri(), hashlib.sha256(b"payload").hexdigest(), dest)
    assert dest.read_bytes() == b"payload"


def test_frameworks_are_taken_in_turn_newest_first():
    rounds = list(batch._interleave([["ds-3", "ds-2", "ds-1"], ["mc-2"], []]))
    assert [c for r in rounds for c in r] == ["ds-3", "mc-2", "ds-2", "ds-1"]


def test_prune_drops_files_no_planned_lock_names(tmp_path):
    locks, wheels = tmp_path / "locks", tmp_path / "wheelhouse"
    (locks / "a").mkdir(parents=True)
    (locks / "a" / "requirements.lock.txt").write_text(LOCK)
    (locks / "a" / "build-requirements.lock.txt").write_text(
        "setuptools==79.0.1 \\\n    --hash=sha256:99\n")
    wheels.mkdir()
    keep = ["deepspeed-0.19.7.tar.gz", "numpy-2.5.5-cp312-cp312-manylinux_2_28_x86_64.whl",
            "setuptools-79.0.1-py3-none-any.whl", "typing_extensions-4.16.0-py3-none-any.whl"]
    drop = ["deepspeed-0.19.6.tar.gz", "setuptools-81.0.0-py3-none-any.whl"]
    for name in keep + drop:
        (wheels / name).write_bytes(b"")
    batch._prune(wheels, locks)
    assert sorted(p.name for p in wheels.iterdir()) == sorted(keep)


def test_carried_pins_include_build_dependencies_at_their_own_versions(tmp_path):
    lock = tmp_path / "lock"
    lock.mkdir()
    (lock / "requirements.lock.txt").write_text(LOCK)
    (lock / "build-requirements.lock.txt").write_text(
        "setuptools==79.0.1 \\\n    --hash=sha256:99\nnumpy==2.5.5 \\\n    --hash=sha256:aa\n")
    pins = batch._carried_pins(lock, frozenset({"sympy"}))
    assert set(pins) == {("deepspeed", "0.19.7"), ("numpy", "2.5.5"),
                         ("typing-extensions", "4.16.0"), ("setuptools", "79.0.1")}


def test_a_step_past_its_deadline_is_stopped_with_its_children(tmp_path):
    log = tmp_path / "step.log"
    started = time.monotonic()
    code = batch._run([sys.executable, "-c", "import subprocess, sys, time; "
                       "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
                       " time.sleep(60)"], log, env=None, timeout=1.5)
    assert code == 124 and time.monotonic() - started < 20
    assert "[stopped: deadline]" in log.read_text()


def test_a_step_stops_when_the_run_is_asked_to(tmp_path):
    log = tmp_path / "step.log"
    timer = threading.Timer(1.0, batch.STOP.set)
    timer.start()
    try:
        code = batch._run([sys.executable, "-c", "import time; time.sleep(60)"], log,
                          env=None, timeout=600)
    finally:
        timer.cancel()
        batch.STOP.clear()
    assert code == 124


def _venv(path: Path) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=120)
    return str(path / "bin" / "python")


def _dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_installed_reports_the_venvs_copy_over_the_machines_it_shadows(tmp_path):
    python = _venv(tmp_path / "env")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    machine = tmp_path / "machine-site"
    _dist(machine, "numpy", "2.5.2")   # the machine's, shadowed
    _dist(machine, "Fsspec", "2026.7.0")  # the machine's only
    _dist(site, "numpy", "2.5.5")      # installed from the lock
    (site / "zz_machine_site.pth").write_text(f"import site; site.addsitedir({str(machine)!r})\n")
    got = batch._installed(python)
    assert got["numpy"] == "2.5.5" and got["fsspec"] == "2026.7.0"
