"""envgen.preflight.collective with real processes: three LocalRunners on 127.0.0.1 form a real
gloo job under the CPU torch wheel (rendezvous, the checked all_reduce, its bandwidth), and a
hang — world size 3 with the third node stuck before Python starts — whose result names the
missing rank within the timeout.

Without the CPU torch wheel in /opt/wheels (or ENVGEN_TEST_TORCH) these tests skip, unless
ENVGEN_REQUIRE_TORCH=1, where they fail (as tests/doctor/test_collect.py).
"""

from __future__ import annotations

import glob
import os
import socket
import subprocess
import sys

import pytest

from envgen.preflight.collective import run_collective
from envgen.preflight.remote import LocalRunner


def _torch_requirement() -> list[str] | None:
    if os.environ.get("ENVGEN_TEST_TORCH"):
        return [os.environ["ENVGEN_TEST_TORCH"]]
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    local = sorted(glob.glob(f"/opt/wheels/torch-*+cpu-{tag}-*.whl"))
    return [local[-1]] if local else None


def _fail_or_skip(reason: str):
    if os.environ.get("ENVGEN_REQUIRE_TORCH"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory) -> str:
    """A venv with the CPU torch wheel."""
    requirement = _torch_requirement()
    if requirement is None:
        _fail_or_skip("no CPU torch wheel for this Python in /opt/wheels (set ENVGEN_TEST_TORCH)")
    root = tmp_path_factory.mktemp("torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True)
    python = str(root / "bin" / "python")
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", *requirement],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if proc.returncode != 0:
        _fail_or_skip(f"cannot install the CPU torch wheel: {proc.stderr[-1500:]}")
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
def test_a_real_gloo_job_on_three_local_ranks(torch_python):
    runners = [LocalRunner(f"node{i}", torch_python) for i in range(3)]
    result = run_collective(runners, master_addr="127.0.0.1", master_port=free_port(),
                            backend="gloo", timeout=60, size_mb=8, iters=3)
    print(f"\ngloo, 3 ranks on 127.0.0.1: {result.seconds} s; {result.summary}")
    assert result.ok, result.to_dict()
    assert result.world_size == 3 and result.missing == () and not result.hang
    assert [(r.rank, r.node, r.stage_reached) for r in result.ranks] == [
        (0, "node0", "bandwidth"), (1, "node1", "bandwidth"), (2, "node2", "bandwidth")]
    bw = result.bandwidth
    assert bw["bytes"] == 8 * 1024 * 1024 and bw["iters"] == 3
    assert bw["seconds_median"] > 0 and bw["algbw_gbps"] > 0
    # nccl-tests' bus bandwidth of an all_reduce: algbw * 2(n-1)/n
    assert bw["busbw_gbps"] == pytest.approx(bw["algbw_gbps"] * 4 / 3, rel=1e-3)
    assert result.stage is None and "GB/s" in result.summary


@pytest.mark.integration
def test_a_rank_that_never_starts_is_named_within_the_timeout(torch_python, tmp_path):
    stuck = tmp_path / "stuck-python"  # a node whose Python never gets going
    stuck.write_text("#!/bin/sh\nexec sleep 300\n")
    stuck.chmod(0o755)
    runners = [LocalRunner("node0", torch_python), LocalRunner("node1", torch_python),
               LocalRunner("node2", str(stuck))]
    # ranks 0 and 1 import torch (the grace) and then wait for rank 2 themselves (the
    # timeout): 8 s + 8 s was too short on a loaded machine (load 20 on 2 cores)
    timeout, grace = 20.0, 30.0
    result = run_collective(runners, master_addr="127.0.0.1", master_port=free_port(),
                            backend="gloo", timeout=timeout, size_mb=1, iters=1, grace=grace)
    print(f"\nhang case: {result.seconds} s; {result.summary}")
    assert not result.ok and result.hang
    assert result.missing == ((2, "node2"),)
    assert result.seconds <= timeout + grace + 3
    r0, r1, r2 = result.ranks
    # ranks 0 and 1 met at the store and gave up waiting for rank 2 themselves
    assert r0.stage_reached == r1.stage_reached == "start"
    assert r0.timed_out and r1.timed_out and "never signed in: ranks 2" in r0.error
    assert r2.stage_reached == "none" and r2.timed_out and r2.failed_stage == "launch"
    assert result.summary == ("gloo: rank 2 (node2) never reached the rendezvous; "
                              "ranks 0 (node0), 1 (node1) waited")


@pytest.mark.integration
def test_ranks_started_ahead_import_torch_then_take_their_arguments(torch_python):
    """prewarm: each rank imports torch (with the launch's variables) and says so, then waits;
    run_collective gives it its arguments on standard input and the job is the same real one.
    A rank started ahead and not used ends when its input closes."""
    from envgen.preflight.collective import prewarm

    runners = [LocalRunner(f"node{i}", torch_python) for i in range(3)]
    warm = prewarm(runners, env={"GLOO_SOCKET_IFNAME": "lo"})
    assert all(w.first_json(120) == {"event": "ready", "ok": True} for w in warm.values())
    result = run_collective(runners, master_addr="127.0.0.1", master_port=free_port(),
                            backend="gloo", timeout=60, size_mb=1, iters=1, warm=warm)
    assert result.ok, result.to_dict()
    assert [r.stage_reached for r in result.ranks] == ["bandwidth"] * 3
    # the rendezvous and all_reduce alone: torch was imported before the arguments came
    assert result.seconds < 20, result.seconds

    spare = prewarm(runners[:1])["node0"]
    assert spare.first_json(120)["event"] == "ready"
    spare.close_input()
    outcome = spare.wait(30)
    assert outcome.rc == 0 and not outcome.timed_out
