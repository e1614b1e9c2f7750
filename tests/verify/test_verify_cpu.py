"""The CPU path for real: torchrun with 2 gloo processes through the smoke harness
(collectives, DeepSpeed ZeRO-2 and ZeRO-3), CPU Adam against torch's AdamW, and the record
they produce through `envgen results add` and `envgen table`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from envgen.verify.launch import run_smoke

pytestmark = pytest.mark.integration
LOCK_HASH = "sha256:" + "ab" * 32
COMBO = "deepspeed-0.19.8-torch2.13.0-cu128-py3.11-debian12-x86_64"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def envgen(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, env=env, timeout=1800)


@pytest.fixture(scope="module")
def lock_dir(tmp_path_factory) -> Path:
    """What the record takes from a lock: its id, lock hash and framework."""
    d = tmp_path_factory.mktemp("lock")
    (d / "envgen.lock.json").write_text(json.dumps({
        "schema": 1, "id": COMBO, "lock_hash": LOCK_HASH,
        "combination": {"framework": "deepspeed", "id": COMBO}, "files": {}}))
    return d


def test_smoke_two_gloo_ranks(torch_env):
    result = run_smoke(torch_env["python"], "deepspeed", nproc=2, backend="gloo",
                       timeout=600, env=torch_env["env"])
    assert result.backend == "gloo" and result.world_size == 2
    got = {(c["name"], c["rank"]): c["status"] for c in result.checks}
    for rank in (0, 1):
        for name in ("all_reduce", "all_gather", "broadcast", "reduce_scatter",
                     "deepspeed_zero2", "deepspeed_zero3"):
            assert got[(name, rank)] == "pass", result.log_tail
    assert result.status == "pass"
    zero3 = next(c for c in result.checks if c["name"] == "deepspeed_zero3")
    assert "loss" in zero3["message"] and "→" in zero3["message"]


def test_smoke_failure_names_rank_and_check(torch_env, tmp_path):
    """A rank that never joins: the other one times out naming the check, not a hang."""
    env = {**torch_env["env"]}
    smoke = Path(__file__).parents[2] / "envgen" / "verify" / "smoke.py"
    proc = subprocess.run(
        [torch_env["python"], str(smoke), "--framework", "none", "--out", str(tmp_path),
         "--timeout", "8"],
        capture_output=True, text=True, timeout=120,
        env={**env, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())})
    assert proc.returncode == 124, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "rank-0.json").read_text())
    assert doc["timed_out"] is True
    last = doc["checks"][-1]
    assert last["status"] == "fail" and last["message"].startswith("rank 0: init_process_group")
    assert "timed out after 8 s" in last["message"]


def test_verify_all_record_results_table(torch_env, lock_dir, tmp_path):
    record = tmp_path / "record.json"
    proc = envgen("verify", "all", "--python", torch_env["python"], "--lock", str(lock_dir),
                  "--ops", "fused_adam,cpu_adam,transformer_inference", "--nproc", "2",
                  "--record", str(record), env=torch_env["env"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(record.read_text())
    ops = {o["name"]: o for o in doc["ops"]}
    assert ops["cpu_adam"]["status"] == "pass"
    assert "vs torch.optim.AdamW" in ops["cpu_adam"]["check"]
    assert ops["fused_adam"]["status"] == "skip" and "GPU" in ops["fused_adam"]["message"]
    assert doc["smoke"]["backend"] == "gloo" and doc["gpu"]["count"] == 0
    assert doc["combination"] == COMBO and doc["lock_hash"] == LOCK_HASH
    assert doc["status"] == "pass" and doc["tools"]["framework_version"] == "0.19.8"

    results = tmp_path / "results"
    added = envgen("results", "add", str(record), "--results-dir", str(results),
                   env=torch_env["env"])
    assert added.returncode == 0, added.stderr
    again = envgen("results", "add", str(record), "--results-dir", str(results),
                   env=torch_env["env"])
    assert again.returncode == 0 and "already recorded" in (again.stdout + again.stderr)
    assert len(list(results.rglob("*.json"))) == 1
    table = envgen("table", "--results-dir", str(results), "--json", env=torch_env["env"])
    assert table.returncode == 0, table.stderr
    rows = [r for r in json.loads(table.stdout)["rows"] if r.get("combination") == COMBO]
    assert rows and rows[0]["status"] == "untested" and "CPU only" in json.dumps(rows[0])
