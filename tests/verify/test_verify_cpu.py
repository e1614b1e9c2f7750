"""The CPU path for real, for each framework: torchrun with 2 gloo processes through the smoke
harness (collectives; DeepSpeed ZeRO-2 and ZeRO-3, Colossal-AI's Booster with TorchDDPPlugin,
Megatron-Core tensor parallel = 2), the ops that run on CPU against their references
(DeepSpeed's CPU Adam vs AdamW, Megatron-Core's dataset helpers vs NumPy), and the record
each run produces through `envgen results add` and `envgen table`."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from verify_envs import LOCK_HASH, envgen, write_lock

from envgen import inside
from envgen.verify.launch import run_smoke

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_smoke_engine_failure_names_rank_and_check(megatron_env):
    """One training step cannot show a decreasing loss: every rank reports that check as
    failed, with its rank and the losses, and the run fails."""
    result = run_smoke(megatron_env["python"], "megatron-core", nproc=2, backend="gloo",
                       timeout=300, steps=1, env=megatron_env["env"])
    assert result.status == "fail" and result.returncode == 1
    failed = {c["rank"]: c["message"] for c in result.checks if c["status"] == "fail"}
    assert set(failed) == {0, 1}, result.checks
    for rank, message in failed.items():
        assert message.startswith(f"rank {rank}: megatron_tensor_parallel: loss did not "
                                  "decrease"), message
    passed = {c["name"] for c in result.checks if c["status"] == "pass"}
    assert {"all_reduce", "all_gather", "broadcast", "reduce_scatter"} <= passed


def test_smoke_framework_missing_fails_on_every_rank(megatron_env):
    """Asked for a framework the env lacks: each rank names the failed import, nothing
    hangs, and the collectives never start."""
    result = run_smoke(megatron_env["python"], "colossalai", nproc=2, backend="gloo",
                       timeout=120, env=megatron_env["env"])
    assert result.status == "fail"
    assert [(c["rank"], c["name"], c["status"]) for c in sorted(
        result.checks, key=lambda c: c["rank"])] == [(0, "import colossalai", "fail"),
                                                       (1, "import colossalai", "fail")]
    assert all("No module named 'colossalai'" in c["message"] for c in result.checks)


def test_ops_of_a_missing_framework_fail_instead_of_skipping(megatron_env):
    """Without a GPU the Colossal-AI ops would skip; without Colossal-AI they must fail."""
    proc = envgen("verify", "ops", "--python", megatron_env["python"], "--framework",
                  "colossalai", "--json", env=megatron_env["env"])
    assert proc.returncode == 1, proc.stderr[-2000:]
    ops = json.loads(proc.stdout)["ops"]["ops"]
    assert len(ops) == 7 and {o["status"] for o in ops} == {"fail"}
    assert all(o["message"].startswith("colossalai does not import: ModuleNotFoundError")
               for o in ops)
    assert "moe_cuda                 fail" in proc.stderr  # streamed as each op ends


def test_ops_unknown_op_is_a_usage_error(megatron_env):
    ops = inside.path("ops.py")
    proc = subprocess.run([megatron_env["python"], str(ops), "--framework", "megatron-core",
                           "--ops", "helpers_cpp,fused_adam"], capture_output=True, text=True,
                          env=megatron_env["env"], timeout=120)
    assert proc.returncode == 2
    assert "unknown megatron-core op(s) ['fused_adam']; known: ['helpers_cpp']" in proc.stderr


def test_smoke_failure_names_rank_and_check(torch_env, tmp_path):
    """A rank that never joins: the other one times out naming the check, not a hang."""
    env = {**torch_env["env"]}
    smoke = inside.path("smoke.py")
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


# framework → the env fixture, the combination its env is, the ops it is asked for (all by
# default) and what each op and engine check must end as on 2 CPU processes
CASES = {
    "deepspeed": {
        "env": "torch_env",
        "combination": "deepspeed-0.19.8-torch2.13.0-cu128-py3.11-debian12-x86_64",
        "ops": "fused_adam,cpu_adam,transformer_inference",  # AIO's JIT build takes ~6 min
        "want_ops": {"cpu_adam": "pass", "fused_adam": "skip",
                     "transformer_inference": "skip"},
        "want_smoke": {"deepspeed_zero2": "pass", "deepspeed_zero3": "pass"},
    },
    "megatron-core": {
        "env": "megatron_env",
        "combination": "megatron-core-0.16.1-torch2.13.0-cu128-py3.11-debian12-x86_64",
        "want_ops": {"helpers_cpp": "pass"},
        "want_smoke": {"megatron_tensor_parallel": "pass"},
    },
    "colossalai": {
        "env": "colossalai_env",
        "combination": "colossalai-0.5.0-torch2.5.1-cu124-py3.11-debian12-x86_64",
        # every extension is a CUDA extension: all skip without a GPU, saying so
        "want_ops": {name: "skip" for name in (
            "cpu_adam", "fused_optim_cuda", "layernorm_cuda", "scaled_masked_softmax_cuda",
            "scaled_upper_triangle_masked_softmax_cuda", "inference_ops_cuda", "moe_cuda")},
        "want_smoke": {"colossalai_ddp": "pass", "colossalai_zero2": "skip"},
    },
}


# Colossal-AI's newest release caps torch at 2.5.1, and PyPI's 2.5.1 is a CUDA build: its venv
# installs several GB of NVIDIA wheels (~3.5 minutes on 2 cores, most of the default run's
# margin), so that case runs in `nox -s cuda_wheel_envs`, not in `nox -s tests`
FRAMEWORK_CASES = [pytest.param(name, marks=pytest.mark.cuda_toolchain) if name == "colossalai"
                   else name for name in sorted(CASES)]


@pytest.mark.parametrize("framework", FRAMEWORK_CASES)
def test_verify_all_record_results_table(framework, request, tmp_path):
    """verify all on 2 gloo ranks → one record → results add (twice: stored once) → table."""
    case = CASES[framework]
    target = request.getfixturevalue(case["env"])
    combination = case["combination"]
    lock = write_lock(tmp_path / "lock", combination, framework)
    record = tmp_path / "record.json"
    ops = ["--ops", case["ops"]] if "ops" in case else []
    proc = envgen("verify", "all", "--python", target["python"], "--lock", str(lock), *ops,
                  "--nproc", "2", "--record", str(record), env=target["env"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(record.read_text())
    assert {o["name"]: o["status"] for o in doc["ops"]} == case["want_ops"], doc["ops"]
    for op in doc["ops"]:
        if op["status"] == "skip":
            assert "GPU" in op["message"] or "CUDA" in op["message"], op
        else:
            assert op["check"] and op["message"] == "", op
    checks = {(c["name"], c["rank"]): c for c in doc["smoke"]["checks"]}
    for name, status in {**case["want_smoke"], "all_reduce": "pass", "all_gather": "pass",
                         "broadcast": "pass", "reduce_scatter": "pass"}.items():
        for rank in (0, 1):
            assert checks[(name, rank)]["status"] == status, checks[(name, rank)]
    for name, status in case["want_smoke"].items():
        if status == "pass":
            assert "loss" in checks[(name, 0)]["message"], checks[(name, 0)]
    assert doc["smoke"]["backend"] == "gloo" and doc["gpu"]["count"] == 0
    assert doc["combination"] == combination and doc["lock_hash"] == LOCK_HASH
    version = combination.split("-torch")[0].rsplit("-", 1)[1]
    assert doc["status"] == "pass" and doc["tools"]["framework_version"] == version

    results = tmp_path / "results"
    added = envgen("results", "add", str(record), "--results-dir", str(results),
                   env=target["env"])
    assert added.returncode == 0, added.stderr
    again = envgen("results", "add", str(record), "--results-dir", str(results),
                   env=target["env"])
    assert again.returncode == 0 and "already recorded" in (again.stdout + again.stderr)
    assert len(list(results.rglob("*.json"))) == 1
    table = envgen("table", "--results-dir", str(results), "--json", env=target["env"])
    assert table.returncode == 0, table.stderr
    rows = [r for r in json.loads(table.stdout)["rows"] if r.get("combination") == combination]
    assert rows and rows[0]["status"] == "untested" and "CPU only" in json.dumps(rows[0])
