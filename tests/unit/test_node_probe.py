"""envgen/inside/node_probe.py run for real (a subprocess, as a node runs it: facts, a held
port and its holder, listen + connect on 127.0.0.1, refused and unresolvable peers, a source
address this host does not have), and envgen.preflight.collective.summarise on hand-written
event lists (all ok, a wrong sum, a hang with the missing rank named, a crash, nproc > 1).
"""

from __future__ import annotations

import errno
import glob
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from envgen import inside
from envgen.preflight.collective import NodeRun, summarise

NODE_PROBE = inside.path("node_probe.py")


def probe(*args: str, python: str = sys.executable, env: dict | None = None,
          timeout: float = 60) -> tuple[int, list[dict], str]:
    proc = subprocess.run([python, str(NODE_PROBE), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, lines, proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


@pytest.fixture
def held_port():
    """A port this test process listens on (0.0.0.0)."""
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


def _load_probe():
    spec = importlib.util.spec_from_file_location("node_probe", NODE_PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- facts


def test_facts_shape_names_and_loopback():
    port = free_port()
    env = {**os.environ, "NCCL_DEBUG": "INFO", "MASTER_PORT": "29500", "ENVGEN_UNRELATED": "1"}
    rc, lines, err = probe("facts", "--names", "localhost,no-such-host.invalid",
                           "--port", str(port), env=env)
    assert rc == 0, err
    assert len(lines) == 1
    facts = lines[0]
    assert facts["schema"] == 1
    assert {"hostname", "fqdn", "resolve", "local_addresses", "interfaces", "shm", "memlock",
            "cpus", "env", "nvidia_smi", "dev_nvidia", "port"} <= set(facts)
    # every name asked for, and the node's own host name
    assert set(facts["resolve"]) == {"localhost", "no-such-host.invalid", facts["hostname"]}
    local = facts["resolve"]["localhost"]
    assert local["error"] is None and local["addresses"]
    assert set(local["addresses"]) <= {"127.0.0.1", "::1"}
    if "127.0.0.1" in local["addresses"]:
        assert local["addresses"][0] == "127.0.0.1"  # IPv4 first
    bad = facts["resolve"]["no-such-host.invalid"]
    assert bad["addresses"] == [] and bad["error"]
    # the loopback interface, with its address and prefix
    lo = facts["interfaces"]["lo"]
    assert lo["loopback"] is True and lo["up"] is True and "127.0.0.1/8" in lo["ipv4"]
    assert "127.0.0.1" in facts["local_addresses"]
    assert facts["port"] == {"port": port, "free": True, "error": None, "holder": None}
    assert isinstance(facts["cpus"], int) and facts["cpus"] >= 1
    assert facts["shm"] is None or facts["shm"]["total_bytes"] >= facts["shm"]["free_bytes"] >= 0
    assert facts["memlock"] is None or set(facts["memlock"]) == {"soft", "hard"}
    assert facts["env"]["NCCL_DEBUG"] == "INFO" and facts["env"]["MASTER_PORT"] == "29500"
    assert "ENVGEN_UNRELATED" not in facts["env"]
    assert set(facts["nvidia_smi"]) == {"path", "rc", "stdout", "error"}
    assert isinstance(facts["dev_nvidia"], int)


def test_interfaces_without_iproute2_from_the_ioctls(tmp_path):
    """No `ip` on PATH: if_nameindex + SIOCGIF* ioctls + /proc/net/if_inet6 find the same."""
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty folder: no ip, no nvidia-smi
    rc, [facts], err = probe("facts", env=env)
    assert rc == 0, err
    assert facts["interfaces_from"] == "ioctl"
    lo = facts["interfaces"]["lo"]
    assert lo["loopback"] is True and lo["up"] is True and lo["ipv4"] == ["127.0.0.1/8"]
    assert facts["nvidia_smi"]["path"] is None
    if shutil.which("ip"):  # both ways agree on the IPv4 addresses of every interface
        _, [with_ip], _ = probe("facts")
        assert with_ip["interfaces_from"] == "ip -j addr"
        assert ({k: v["ipv4"][:1] for k, v in with_ip["interfaces"].items()}
                == {k: v["ipv4"] for k, v in facts["interfaces"].items()})


def test_runs_under_python_3_8():
    found = sorted(glob.glob("/root/.pyenv/versions/3.8.*/bin/python3.8")) or [
        p for p in [shutil.which("python3.8")] if p]
    if not found:
        pytest.skip("no Python 3.8 on this machine")
    rc, [facts], err = probe("facts", "--names", "localhost", python=found[0])
    assert rc == 0, err
    assert facts["python"].startswith("3.8.") and "lo" in facts["interfaces"]


def test_held_port_is_not_free_and_its_holder_named(held_port):
    rc, [facts], err = probe("facts", "--port", str(held_port))
    assert rc == 0, err
    port = facts["port"]
    assert port["free"] is False and "Address already in use" in port["error"]
    # this test's own process holds it: its pid and command line, read from /proc
    assert port["holder"].startswith(f"pid {os.getpid()}: ")
    assert "python" in port["holder"]


def test_a_port_out_of_range_is_reported_not_raised():
    rc, [facts], err = probe("facts", "--port", "70000")
    assert rc == 0, err
    assert facts["port"]["free"] is False and facts["port"]["error"]


# ---------------------------------------------------------------- listen and connect


def test_listen_and_connect_round_trip():
    port = free_port()
    listener = subprocess.Popen(
        [sys.executable, str(NODE_PROBE), "listen", "--port", str(port), "--seconds", "30",
         "--expect", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(listener.stdout.readline())
        assert first == {"listening": True, "port": port, "address": "0.0.0.0"}
        rc, [result], err = probe("connect", "--host", "127.0.0.1", "--port", str(port),
                                  "--timeout", "5")
        assert rc == 0, err
        assert result["ok"] is True and result["handshake"] is True
        assert result["kind"] is None and result["error"] is None
        assert result["address"] == "127.0.0.1" and result["source"] is None
        assert 0 <= result["seconds"] < 5
        out, _ = listener.communicate(timeout=20)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.communicate()
    assert listener.returncode == 0
    assert json.loads(out.splitlines()[-1]) == {"done": True, "peers": ["127.0.0.1"]}


def test_listen_on_a_held_port_names_the_holder(held_port):
    rc, [line], _ = probe("listen", "--port", str(held_port), "--seconds", "1")
    assert rc == 1
    assert line["listening"] is False and "Address already in use" in line["error"]
    assert line["holder"].startswith(f"pid {os.getpid()}: ")


def test_connect_with_a_source_address():
    port = free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen(1)
        rc, [ok], err = probe("connect", "--host", "127.0.0.1", "--port", str(port),
                              "--source", "127.0.0.1", "--timeout", "1")
    # a port that accepts but does not answer the handshake is still open
    assert rc == 0, err
    assert ok["ok"] is True and ok["handshake"] is False and ok["source"] == "127.0.0.1"
    # 203.0.113.0/24 is TEST-NET-3 (RFC 5737): no interface here has it
    rc, [bad], _ = probe("connect", "--host", "127.0.0.1", "--port", str(port),
                         "--source", "203.0.113.77", "--timeout", "3")
    assert rc == 1
    assert bad["ok"] is False and bad["kind"] == "bind" and "assign" in bad["error"]


def test_connect_to_a_closed_port_is_refused():
    port = free_port()
    rc, [result], _ = probe("connect", "--host", "127.0.0.1", "--port", str(port),
                            "--timeout", "5")
    assert rc == 1
    assert result["ok"] is False and result["kind"] == "refused"
    assert result["address"] == "127.0.0.1" and "refused" in result["error"].lower()


def test_connect_to_an_unresolvable_name():
    rc, [result], _ = probe("connect", "--host", "no-such-host.invalid", "--port", "29500",
                            "--timeout", "5")
    assert rc == 1
    assert result["ok"] is False and result["kind"] == "resolve"
    assert result["address"] is None and result["error"]


def test_connect_errors_are_classified():
    np = _load_probe()
    assert np._classify(TimeoutError("timed out")) == "timeout"
    assert np._classify(OSError(errno.ETIMEDOUT, "Connection timed out")) == "timeout"
    assert np._classify(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == "refused"
    assert np._classify(OSError(errno.EHOSTUNREACH, "No route to host")) == "unreachable"
    assert np._classify(OSError(errno.ENETUNREACH, "Network is unreachable")) == "unreachable"
    assert np._classify(OSError(errno.EACCES, "Permission denied")) == "other"


def test_the_scripts_are_shipped():
    assert {"node_probe.py", "collective.py"} <= set(inside.SCRIPTS)
    assert Path(inside.path("collective.py")).is_file()


# ---------------------------------------------------------------- summarise (pure)


def _ok_events(rank: int, world: int) -> tuple[dict, ...]:
    return (
        {"event": "start", "rank": rank, "host": "h", "torch": "2.5.1", "backend": "gloo"},
        {"event": "rendezvous", "rank": rank, "seconds": 0.2},
        {"event": "check", "rank": rank, "ok": True, "expected": world * (world + 1) // 2,
         "got": world * (world + 1) // 2},
        {"event": "bandwidth", "rank": rank, "bytes": 4194304, "iters": 3,
         "seconds_median": 0.01, "algbw_gbps": 0.42, "busbw_gbps": 0.56 + rank},
    )


def test_summarise_all_ok():
    runs = [NodeRun(node, _ok_events(r, 3), rc=0) for r, node in enumerate("abc")]
    result = summarise(runs, backend="gloo", seconds=4.2)
    assert result.ok and result.world_size == 3 and result.missing == ()
    assert not result.hang and result.stage is None
    assert [r.stage_reached for r in result.ranks] == ["bandwidth"] * 3
    assert all(r.ok and r.error is None for r in result.ranks)
    assert result.bandwidth["busbw_gbps"] == 0.56  # rank 0's
    assert "0.56 GB/s" in result.summary
    json.dumps(result.to_dict())


def test_summarise_a_wrong_sum_fails_the_allreduce():
    runs = [NodeRun("a", _ok_events(0, 2), rc=0),
            NodeRun("b", ({"event": "start", "rank": 1},
                          {"event": "rendezvous", "rank": 1, "seconds": 0.1},
                          {"event": "check", "rank": 1, "ok": False, "expected": 3, "got": 5}),
                    rc=1)]
    result = summarise(runs, backend="gloo")
    assert not result.ok and not result.hang and result.missing == ()
    assert result.stage == "allreduce"
    bad = result.ranks[1]
    assert not bad.ok and bad.stage_reached == "check" and bad.failed_stage == "allreduce"
    assert "5" in bad.error and "expected 3" in bad.error
    assert result.summary.startswith("gloo: rank 1 (b): allreduce")


def test_summarise_a_hang_names_the_rank_that_never_signed_in():
    timeout = {"event": "timeout", "stage": "rendezvous", "step": "join", "seconds": 8.0,
               "joined": [0, 1], "missing": [2]}
    runs = [NodeRun("a", ({"event": "start", "rank": 0}, {**timeout, "rank": 0}), rc=3),
            NodeRun("b", ({"event": "start", "rank": 1}, {**timeout, "rank": 1}), rc=3),
            # its process started (torch imported) but it never reached the store
            NodeRun("c", ({"event": "start", "rank": 2},
                          {"event": "timeout", "rank": 2, "stage": "rendezvous",
                           "step": "store", "seconds": 8.0, "by": "watchdog"}), rc=3)]
    result = summarise(runs, backend="gloo", master="10.0.0.1:29500")
    assert result.missing == ((2, "c"),)
    assert result.hang and not result.ok and result.stage == "rendezvous"
    assert all(r.timed_out for r in result.ranks)
    assert "never signed in: ranks 2" in result.ranks[0].error
    assert "rendezvous store at 10.0.0.1:29500" in result.ranks[2].error
    assert result.summary == ("gloo: rank 2 (c) never reached the rendezvous; "
                              "ranks 0 (a), 1 (b) waited")


def test_summarise_a_hang_without_the_store_list_uses_how_far_each_got():
    store_wait = {"event": "timeout", "stage": "rendezvous", "step": "store", "seconds": 8.0,
                  "by": "watchdog"}
    runs = [NodeRun("a", (), rc=None, timed_out=True),  # rank 0: no output, killed
            NodeRun("b", ({"event": "start", "rank": 1}, {**store_wait, "rank": 1}), rc=3),
            NodeRun("c", ({"event": "start", "rank": 2}, {**store_wait, "rank": 2}), rc=3)]
    result = summarise(runs, backend="gloo")
    assert result.missing == ((0, "a"),)
    assert result.hang and result.stage == "launch"
    first = result.ranks[0]
    assert first.stage_reached == "none" and first.timed_out and "killed" in first.error
    assert "rank 0 (a) never reached the rendezvous" in result.summary


def test_summarise_all_stuck_at_the_same_stage_names_nobody():
    runs = [NodeRun("a", ({"event": "start", "rank": 0},
                          {"event": "error", "rank": 0, "stage": "rendezvous", "step": "store",
                           "error": "DistNetworkError: address already in use"}), rc=1),
            NodeRun("b", ({"event": "start", "rank": 1},
                          {"event": "timeout", "rank": 1, "stage": "rendezvous",
                           "step": "store", "seconds": 8.0}), rc=3)]
    result = summarise(runs, backend="gloo")
    assert result.missing == () and result.stage == "rendezvous" and result.hang
    assert "rank 0 (a)" in result.summary and "address already in use" in result.summary


def test_summarise_a_crash_keeps_the_stderr_tail():
    runs = [NodeRun("a", _ok_events(0, 2), rc=0),
            NodeRun("b", ({"event": "start", "rank": 1},
                          {"event": "rendezvous", "rank": 1, "seconds": 0.1}),
                    rc=-11, stderr="NCCL WARN something\nSegmentation fault\n")]
    result = summarise(runs, backend="nccl")
    bad = result.ranks[1]
    assert not bad.ok and not bad.timed_out and bad.failed_stage == "allreduce"
    assert "rc -11" in bad.error and "Segmentation fault" in bad.error
    assert result.node_errors == {"b": "NCCL WARN something\nSegmentation fault\n"}


def test_summarise_nproc_maps_ranks_to_their_node():
    import_error = {"event": "error", "stage": "import",
                    "error": "ImportError: backend nccl: torch 2.5.1 sees no CUDA device"}
    runs = [NodeRun("a", _ok_events(0, 4)[:1] + _ok_events(1, 4)[:1], rc=3),
            NodeRun("b", ({**import_error, "rank": 2}, {**import_error, "rank": 3}), rc=2)]
    result = summarise(runs, backend="nccl", nproc=2)
    assert result.world_size == 4
    assert [(r.rank, r.node) for r in result.ranks] == [(0, "a"), (1, "a"), (2, "b"), (3, "b")]
    assert [r.failed_stage for r in result.ranks[2:]] == ["import", "import"]
    assert result.stage == "import"
    assert result.missing == ((2, "b"), (3, "b"))  # they never got as far as ranks 0 and 1
