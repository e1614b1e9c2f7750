"""`envgen preflight` against a real cluster: Docker containers on a network of their own, each a
node with its own hostname, addresses, sshd, /dev/shm and the same job environment (CPU torch
2.13.0 and DeepSpeed 0.19.8 in /opt/env; tests/support/cluster/). The preflight runs on node0,
the launching node, over real SSH, exactly as a user runs it before `deepspeed --hostfile`.

    fault                              how it is made                       what must be named
    (none)                             3 healthy nodes                      exit 0, collective-ok
    a node with another torch          node2: torch 2.14.1+cu130 (PyPI)     node-env-differs
    a node without the SSH key         node1's authorized_keys removed      ssh-auth-failed, node1
    MASTER_PORT taken                  a process listens on node0:29500     master-port-taken
    MASTER_PORT blocked                iptables drops node0:29500           master-port-blocked
    a wrong socket interface           GLOO_SOCKET_IFNAME=eth9              ifname-missing
                                       --ifname eth9                        exit 2, the names
    a host that does not resolve       --hosts node0,node1,nodeX            host-unresolved
    a hostfile typo                    `node1 slot=2`                       exit 2, its line
    more slots than GPUs               slots=2, --device gpu                slots-exceed-gpus
    a node down                        node2 paused, --connect-timeout 3    ssh-unreachable
    a tiny /dev/shm                    node1 started with --shm-size 1m     shm-small, node1
    a node lost during the check       node2 paused in the all_reduce       collective-hang

Each run is checked for its exit code, the finding's kind and node, and that the other nodes
were still checked; ranks the preflight gave up on must end with it (MASTER_PORT left free).
Needs root and dockerd (tests/support/docker-up.sh); skipped without them unless
ENVGEN_REQUIRE_DOCKER=1. Costs on a 2-core machine: images ~30 s warm over the
broken-environment tests' layers, each preflight 9-15 s, the module about 3 minutes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from support.broken_envs import common
from support.cluster import cluster as harness
from support.cluster.cluster import Cluster

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

HOSTS = ("--hosts", "node0,node1,node2")


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, str]:
    return harness.images(tmp_path_factory.mktemp("cluster"))


@pytest.fixture(scope="module")
def cluster(images) -> Iterator[Cluster]:
    """Three healthy nodes, shared by the tests whose fault is undone afterwards."""
    with Cluster(3, images["node"], cap_net_admin=True) as c:
        yield c


def kinds(doc: dict, severity: str | None = None) -> list[str]:
    return [f["kind"] for f in doc["findings"] if severity in (None, f["severity"])]


def finding(doc: dict, kind: str) -> dict:
    found = [f for f in doc["findings"] if f["kind"] == kind]
    assert found, f"no {kind} finding in {[(f['kind'], f['summary']) for f in doc['findings']]}"
    return found[0]


def statuses(doc: dict) -> dict[str, str]:
    return {n["name"]: n["status"] for n in doc["nodes"]}


def run(c: Cluster, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    rc, doc, err = c.preflight(*args, env=env)
    assert doc is not None, f"exit {rc}, no JSON document; stderr:\n{err[-3000:]}"
    return rc, doc


def test_healthy_cluster_passes(cluster):
    rc, doc = run(cluster, *HOSTS)
    assert rc == 0, doc["findings"]
    assert doc["ok"] is True
    assert kinds(doc, "error") == [] and kinds(doc, "warning") == []
    ok = finding(doc, "collective-ok")
    assert "3 ranks" in ok["summary"]
    assert statuses(doc) == {"node0": "ok", "node1": "ok", "node2": "ok"}
    rows = {r["field"]: r for r in doc["table"]}
    assert rows["torch"]["values"] == {n: "2.13.0+cpu" for n in ("node0", "node1", "node2")}
    assert not any(r["differs"] for r in doc["table"])


def test_a_node_with_another_torch_and_a_tiny_shm(images):
    if "node-other-torch" not in images:
        common.unavailable(f"{harness.OTHER_TORCH} is missing (set ENVGEN_TEST_OTHER_TORCH to "
                           "a torch wheel for CPython 3.11 other than the CPU build)")
    with Cluster(3, images["node"], images={"node2": images["node-other-torch"]},
                 shm={"node1": "1m"}) as c:
        rc, doc = run(c, *HOSTS, "--no-collective")
    assert rc == 1
    differs = {f["evidence"]["field"]: f for f in doc["findings"]
               if f["kind"] == "node-env-differs"}
    assert differs["torch"]["severity"] == "error"
    assert "2.14.1+cu130 on node2" in differs["torch"]["summary"], differs["torch"]
    assert "2.13.0+cpu on node0, node1" in differs["torch"]["summary"]
    shm = [f for f in doc["findings"] if f["kind"] == "shm-small"]
    assert [f["evidence"]["node"] for f in shm] == ["node1"], shm
    assert "--shm-size" in shm[0]["fix"]


def test_a_node_without_the_ssh_key(cluster):
    _, pub = cluster.sh("node0", "cat /root/.ssh/id_ed25519.pub")
    cluster.remove_key("node1")
    try:
        rc, doc = run(cluster, *HOSTS, "--no-collective")
    finally:
        cluster.write("node1", "/root/.ssh/authorized_keys", pub)
    assert rc == 1
    auth = finding(doc, "ssh-auth-failed")
    assert auth["evidence"]["node"] == "node1"
    assert "Permission denied" in auth["evidence"]["detail"]
    assert statuses(doc) == {"node0": "ok", "node1": "unreachable", "node2": "ok"}


def test_master_port_taken(cluster):
    cluster.take_port("node0", 29500)
    try:
        rc, doc = run(cluster, *HOSTS, "--no-collective")
    finally:
        cluster.free_port("node0", 29500)
    assert rc == 1
    taken = finding(doc, "master-port-taken")
    assert "29500" in taken["summary"] and "node0" in taken["summary"]
    assert "python3" in str(taken["evidence"])  # the process holding it, read from /proc


def test_master_port_blocked(cluster):
    cluster.block_port("node0", 29500)
    try:
        start = time.monotonic()
        rc, doc = run(cluster, *HOSTS, "--no-collective", "--connect-timeout", "3")
        took = time.monotonic() - start
    finally:
        cluster.unblock_port("node0", 29500)
    assert rc == 1
    blocked = [f for f in doc["findings"] if f["kind"] == "master-port-blocked"]
    assert {"node1", "node2"} <= {f["evidence"]["node"] for f in blocked}, doc["findings"]
    assert "a firewall drops it" in blocked[0]["summary"]
    assert took < 90


def test_a_socket_interface_no_node_has(cluster):
    rc, doc = run(cluster, *HOSTS, "--collective-timeout", "20",
                  env={"GLOO_SOCKET_IFNAME": "eth9"})
    assert rc == 1
    missing = finding(doc, "ifname-missing")
    assert "eth9" in missing["summary"]
    assert "eth0" in missing["fix"] or "eth0" in str(missing["evidence"])


def test_an_interface_no_node_has_is_a_usage_error(cluster):
    rc, doc, _ = cluster.preflight(*HOSTS, "--ifname", "eth9")
    assert rc == 2
    assert doc["error"]["source"] == "--ifname"
    assert "no node has an interface of that name" in doc["error"]["message"]
    assert "eth0" in doc["error"]["fix"]  # what the nodes do have


def test_a_host_that_does_not_resolve(cluster):
    rc, doc = run(cluster, "--hosts", "node0,node1,nodeX", "--no-collective")
    assert rc == 1
    unresolved = finding(doc, "host-unresolved")
    assert "nodeX" in unresolved["summary"]
    assert statuses(doc)["nodeX"] == "unresolved"
    assert statuses(doc)["node1"] == "ok"


def test_a_hostfile_typo_names_its_line(cluster):
    cluster.write("node0", "/root/hostfile", "node0 slots=1\nnode1 slot=2\nnode2 slots=1\n")
    rc, doc, _ = cluster.preflight("--hostfile", "/root/hostfile")
    assert rc == 2
    assert doc["error"]["kind"] == "usage"
    assert "line 2" in doc["error"]["message"] and "slot=2" in doc["error"]["message"]
    assert doc["error"]["source"] == "/root/hostfile:2"


def test_more_slots_than_gpus(cluster):
    cluster.write("node0", "/root/hostfile", "node0 slots=2\nnode1 slots=2\nnode2 slots=2\n")
    rc, doc = run(cluster, "--hostfile", "/root/hostfile", "--device", "gpu", "--no-collective")
    assert rc == 1
    slots = [f for f in doc["findings"] if f["kind"] == "slots-exceed-gpus"]
    assert slots and "slots=2" in slots[0]["summary"], doc["findings"]


def test_a_node_down(cluster):
    cluster.pause("node2")
    try:
        start = time.monotonic()
        rc, doc = run(cluster, *HOSTS, "--connect-timeout", "3", "--no-collective")
        took = time.monotonic() - start
    finally:
        cluster.unpause("node2")
    assert rc == 1
    down = finding(doc, "ssh-unreachable")
    assert down["evidence"]["node"] == "node2"
    assert statuses(doc) == {"node0": "ok", "node1": "ok", "node2": "unreachable"}
    assert took < 60


def test_a_node_lost_during_the_collective(cluster):
    proc = cluster.start_preflight(*HOSTS, "--collective-timeout", "15")
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "all_reduce" in line:
                time.sleep(1)
                cluster.pause("node2")
                break
        out, _ = proc.communicate(timeout=300)
    finally:
        cluster.unpause("node2")
        if proc.poll() is None:  # the test failed first: end it, and close its pipes
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 1
    doc = json.loads(out)
    lost = [f for f in doc["findings"] if f["kind"] in ("collective-hang", "node-lost")]
    assert lost, doc["findings"]
    assert "node2" in lost[0]["summary"]
    # the ranks the preflight gave up on end with it: nothing keeps MASTER_PORT taken
    for node in ("node0", "node1"):
        deadline = time.monotonic() + 15
        while cluster.sh(node, "pgrep -f -- '- --maste[r]-addr'")[0] == 0:
            assert time.monotonic() < deadline, f"a rank still runs on {node}"
            time.sleep(0.5)

