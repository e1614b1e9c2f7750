"""Each fault ends in a clear error naming the URL, and leaves matrix/ byte-for-byte untouched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mini_pypi import tree

from envgen import writelock
from envgen.errors import HarvestError, NetworkError
from envgen.harvest import snapshot
from envgen.harvest.update import UpdateOptions, update_matrix

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_persistent_5xx(committed, index_server, fast):
    before = tree(committed)
    index_server.state.faults["/simple/torch/"] = ["500"] * 10
    with pytest.raises(NetworkError) as err:
        update_matrix(committed, UpdateOptions(write=True, **fast))
    assert f"GET {index_server.url}/simple/torch/ failed after 3 attempts: HTTP 500" in str(
        err.value
    )
    assert "--index NAME=URL" in str(err.value) and "--offline" in str(err.value)
    assert tree(committed) == before


def test_transient_5xx_is_retried(committed, index_server, fast):
    index_server.state.faults["/simple/deepspeed/"] = ["500", "503-retry-after"]
    result = update_matrix(committed, UpdateOptions(**fast))
    assert result.changes == 0
    hits = [p for p, _ in index_server.state.log if p == "/simple/deepspeed/"]
    assert len(hits) == 4  # seed run + 2 failures + success


def test_timeout(committed, index_server, fast):
    before = tree(committed)
    index_server.state.faults["/simple/colossalai/"] = ["sleep:1.0"] * 3
    with pytest.raises(
        NetworkError, match=r"/simple/colossalai/ failed after 2 attempts: timed out after 0.3s"
    ):
        update_matrix(
            committed, UpdateOptions(write=True, **{**fast, "timeout": 0.3, "retries": 1})
        )
    assert tree(committed) == before


def test_truncated_metadata_body(committed, index_server, fast):
    before = tree(committed)
    path = "/files/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl.metadata"
    index_server.state.faults[path] = ["truncate"] * 5
    with pytest.raises(NetworkError, match=rf"{path} failed after 3 attempts: truncated response"):
        update_matrix(committed, UpdateOptions(write=True, **fast))
    assert tree(committed) == before


def test_metadata_without_name_version(committed, index_server, fast):
    before = tree(committed)
    served = index_server.state.files["/files/torch-2.5.1-cp313-cp313-manylinux1_x86_64.whl"]
    served.metadata = b"Metadata-Version: 2.1\nRequires-Dist: filelock\n"
    with pytest.raises(
        HarvestError,
        match=r"torch-2.5.1-cp313-cp313-manylinux1_x86_64.whl.metadata: "
        r"metadata is truncated or invalid \(no Name/Version\)",
    ):
        update_matrix(committed, UpdateOptions(write=True, **fast))
    assert tree(committed) == before


def test_metadata_404_falls_back_to_range_reads(mini_matrix, index_server, fast):
    update_matrix(mini_matrix, UpdateOptions(**fast))
    wheel = "/files/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    hits = [h for p, h in index_server.state.log if p == wheel]
    assert hits and all(h.get("Range", "").startswith("bytes=") for h in hits)
    assert any(p == wheel + ".metadata" for p, _ in index_server.state.log)


def test_range_ignored_downloads_whole_file(mini_matrix, index_server, fast):
    index_server.state.range_supported = False
    result = update_matrix(mini_matrix, UpdateOptions(**fast))
    assert '"version": "2.15.0"' in result.texts["torch.json"]
    [t15] = [b for b in json.loads(result.texts["torch.json"])["builds"]
             if b["version"] == "2.15.0"]
    assert t15["sources"][0]["verified"] == "sha256"  # the whole file was in hand: checked


def _run_cli(matrix: Path, fast: dict, env: dict[str, str] | None = None) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "envgen",
        "matrix",
        "update",
        "--matrix-dir",
        str(matrix),
        "--write",
        "--cache-dir",
        str(fast["cache_dir"] / "kill"),
        "--jobs",
        "2",
        "--timeout",
        "5",
    ]
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _assert_old_snapshot(matrix: Path, before: dict[str, bytes]) -> None:
    snapshot.recover(matrix)
    # a killed run leaves its write lock's file (its flock died with it: it blocks nobody)
    assert {p: v for p, v in tree(matrix).items() if p != writelock.NAME} == before
    assert snapshot.load(matrix)["torch.json"]["builds"]


def test_killed_while_fetching(committed, index_server, fast):
    from support.mini_pypi import add_wheel, torch_metadata

    add_wheel(
        index_server,
        "torch",
        "torch-2.5.2-cp311-cp311-manylinux1_x86_64.whl",
        torch_metadata("2.5.2"),
    )
    before = tree(committed)
    index_server.state.delay = 0.3
    proc = _run_cli(committed, fast)
    deadline = time.time() + 20
    while (
        not any(p.startswith("/files/") for p, _ in index_server.state.log[-3:])
        and time.time() < deadline
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    _assert_old_snapshot(committed, before)


def test_killed_while_writing(committed, index_server, fast):
    from support.mini_pypi import add_wheel, torch_metadata

    add_wheel(
        index_server,
        "torch",
        "torch-2.5.2-cp311-cp311-manylinux1_x86_64.whl",
        torch_metadata("2.5.2"),
    )
    before = tree(committed)
    proc = _run_cli(committed, fast, {"ENVGEN_TEST_WRITE_DELAY": "5"})
    deadline = time.time() + 30
    staging = []
    while not staging and time.time() < deadline:  # the write phase has begun
        staging = [p for p in committed.glob(".harvested.new-*") if any(p.glob("*.json"))]
        time.sleep(0.02)
    assert staging, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert tree(committed / "harvested") == {
        k[len("harvested/") :]: v for k, v in before.items() if k.startswith("harvested/")
    }
    _assert_old_snapshot(committed, before)
    # and a later run completes the update
    result = update_matrix(committed, UpdateOptions(write=True, **fast))
    assert (
        result.written
        and '"version": "2.5.2"' in (committed / "harvested" / "torch.json").read_text()
    )
    assert not list(committed.glob(".harvested*"))


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_interrupted_while_writing_leaves_no_debris(committed, index_server, fast, signum, code):
    """Ctrl-C / SIGTERM in the write phase: the staging folder is removed before exiting, the
    old snapshot is intact without any recovery, and the process says what it rolled back."""
    from support.mini_pypi import add_wheel, torch_metadata

    add_wheel(
        index_server,
        "torch",
        "torch-2.5.2-cp311-cp311-manylinux1_x86_64.whl",
        torch_metadata("2.5.2"),
    )
    before = tree(committed)
    proc = _run_cli(committed, fast, {"ENVGEN_TEST_WRITE_DELAY": "5"})
    deadline = time.time() + 30
    staging = []
    while not staging and time.time() < deadline:  # the write phase has begun
        staging = [p for p in committed.glob(".harvested.new-*") if any(p.glob("*.json"))]
        time.sleep(0.02)
    assert staging, proc.communicate()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    text = err.decode()
    assert f"interrupted by {signal.Signals(signum).name}" in text
    assert f"removed the partly written snapshot {staging[0]}" in text
    assert not list(committed.glob(".harvested*"))  # no debris, no recover() needed
    assert tree(committed) == before
