"""`envgen preflight` against a real cluster: Docker containers on a network of their own, each a
node with its own hostname, addresses, sshd, /dev/shm and the same job environment (CPU torch
2.13.0 and DeepSpeed 0.19.8 in /opt/env; tests/support/cluster/). The preflight runs on node0,
the launching node, over real SSH, exactly as a user runs it before `deepspeed --hostfile`.

    fault                              how it is made                       what must be named
    (none)                             3 healthy nodes                      exit 0, collective-ok
    a node with another torch          node2: torch 2.14.1+cu130 (PyPI)     node-env-differs
    a node without the SSH key         node1's authorized_keys removed      ssh-auth-failed, node1
    MASTER_PORT taken                  a process listens on node0:29500     master-port-taken
    MASTER_PORT blocked                iptables drops node0:29500           port-dropped: node0
    high ports dropped on one node     node1 drops NEW to 32768-60999       port-dropped: node1
    a wrong socket interface           GLOO_SOCKET_IFNAME=eth9              ifname-missing
                                       --ifname eth9                        exit 2, the names
    a host that does not resolve       --hosts node0,node1,nodeX            host-unresolved
    a hostfile typo                    `node1 slot=2`                       exit 2, its line
    more slots than GPUs               slots=2, --device gpu                slots-exceed-gpus
    a node down                        node2 paused, --connect-timeout 3    ssh-unreachable
    a tiny /dev/shm                    node1 started with --shm-size 1m     shm-small, node1
    a node lost during the check       node2 paused in the all_reduce       collective-hang
    the launcher's view (one run):     hostfile, and                        (each named)
      ~/.deepspeed_env GLOO_SOCKET_IFNAME=ib0                               ifname-missing (+line)
      node2's sshd PATH without /opt/env/bin                                launcher-path
      node1's ulimit -n 256                                                 limits-differ
      MASTER_PORT 40000 held by an outgoing connection                      master-port-taken,
                                                                            master-port-ephemeral
    the 127.0.1.1 traps                node1: own name; node2: node0's      hostname-loopback,
                                                                            name-loopback
    two networks                       node0's second network first in      master-unreachable,
                                       its `hostname -I`                    node1 and node2
    Ctrl-C                             SIGINT during the all_reduce         exit 130 in 2 s
    torchrun (--launcher torchrun)     a real torchrun on every node,       the view's master,
                                       with and without --master-addr       port and variables are
                                                                            its workers';
                                                                            launcher-master-loopback

Each run is checked for its exit code, the finding's kind and node, and that the other nodes
were still checked; ranks the preflight gave up on must end with it (MASTER_PORT left free).
Needs root and dockerd (tests/support/docker-up.sh); skipped without them unless
ENVGEN_REQUIRE_DOCKER=1. Costs on a 2-core machine: images ~30 s warm over the
broken-environment tests' layers, each preflight 6-10 s (one SSH connection a node, the ranks
started ahead), the module 5 min 7 s on 2026-11-29 (20 tests, load ~4), of which the two
torchrun tests 18 s and 46 s (three real torchrun launches each, and a preflight; the second
waits out its 15 s rendezvous timeout).
"""

from __future__ import annotations

import json
import subprocess
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
    # one shared SSH connection a node, ended with the run, its socket folder removed; no rank
    # started ahead is left waiting on any node
    assert cluster.sh("node0", "pgrep -f 'ControlMaste[r]=yes'")[0] == 1
    assert cluster.sh("node0", "ls -d /tmp/envgen-ssh-*")[0] != 0
    _none_left(cluster, "-[-]hold")


def _none_left(c: Cluster, pattern: str, seconds: float = 15) -> None:
    """No process matching ``pattern`` (pgrep -f) on any node, within ``seconds`` (a program
    whose ssh was ended notices within its watch's half second)."""
    for node in c.nodes:
        deadline = time.monotonic() + seconds
        while c.sh(node, f"pgrep -f -- '{pattern}'")[0] == 0:
            assert time.monotonic() < deadline, f"{pattern} still runs on {node}"
            time.sleep(0.3)


def test_a_node_with_another_torch_and_a_tiny_shm(images):
    if "node-other-torch" not in images:
        common.unavailable(f"{harness.OTHER_TORCH} is missing (set ENVGEN_TEST_OTHER_TORCH to "
                           "a torch wheel for CPython 3.11 other than the CPU build)")
    with Cluster(3, images["node"], images={"node2": images["node-other-torch"]},
                 shm={"node1": "1m"}) as c:
        rc, doc = run(c, *HOSTS, "--no-collective", "--launcher", "torchrun",
                      "--master-addr", "node0")
    assert rc == 1
    # torchrun's view was read in torch 2.13.0: node2's torch is another release
    assert any("node2 has 2.14.1+cu130" in n for n in doc["launcher"]["notes"]), doc["launcher"]
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
    """node0's firewall drops MASTER_PORT: traced pairwise to node0, not to the nodes that
    waited for it."""
    cluster.block_port("node0", 29500)
    try:
        start = time.monotonic()
        rc, doc = run(cluster, *HOSTS, "--no-collective", "--connect-timeout", "3")
        took = time.monotonic() - start
    finally:
        cluster.unblock_port("node0", 29500)
    assert rc == 1
    dropped = [f for f in doc["findings"] if f["kind"] == "port-dropped"]
    assert [f["evidence"]["node"] for f in dropped] == ["node0"], doc["findings"]
    assert dropped[0]["evidence"]["from"] == ["node1", "node2"]
    assert "node0 drops incoming TCP on MASTER_PORT 29500" in dropped[0]["summary"]
    assert "master-port-blocked" not in kinds(doc)  # replaced by the node that drops it
    assert took < 90


def test_high_ports_dropped_on_one_node(cluster):
    """node1 (rank 1: of each pair of ranks one listens, one connects, so the middle rank
    receives connections in any case) drops new incoming connections to its ephemeral range,
    where gloo's listeners are: the all_reduce fails, and the pairwise check names node1
    alone."""
    rule = "INPUT -p tcp --dport 32768:60999 -m conntrack --ctstate NEW -j DROP"
    cluster.sh("node1", f"iptables -I {rule}", check=True)
    try:
        rc, doc = run(cluster, *HOSTS, "--collective-timeout", "5", "--connect-timeout", "3")
    finally:
        cluster.sh("node1", f"iptables -D {rule}", check=True)
    assert rc == 1
    assert {"collective-failed", "collective-hang"} & set(kinds(doc)), doc["findings"]
    dropped = [f for f in doc["findings"] if f["kind"] == "port-dropped"]
    assert [f["evidence"]["node"] for f in dropped] == ["node1"], dropped
    assert "ephemeral ports gloo and NCCL listen on" in dropped[0]["summary"]


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
    # 256 MiB: the timed all_reduces last seconds, so the pause lands in them (the ranks are
    # started ahead with torch imported: the rendezvous itself is over in well under a second)
    proc = cluster.start_preflight(*HOSTS, "--collective-timeout", "15", "--size-mb", "256")
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "all_reduce" in line:
                time.sleep(0.5)
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
    # depending on when the pause lands: node2's rank never arrives (collective-hang), its
    # ssh stops answering (node-lost), or the others' gloo reports node2 not responding
    # (collective-failed, explained): each names node2
    lost = [f for f in doc["findings"] if f["kind"] in ("collective-hang", "node-lost")
            or (f["kind"] == "collective-failed" and "node2" in f["summary"])]
    assert lost, doc["findings"]
    assert "node2" in lost[0]["summary"]
    # the ranks the preflight gave up on end with it: nothing keeps MASTER_PORT taken
    for node in ("node0", "node1"):
        deadline = time.monotonic() + 15
        while cluster.sh(node, "pgrep -f -- '- --maste[r]-addr'")[0] == 0:
            assert time.monotonic() < deadline, f"a rank still runs on {node}"
            time.sleep(0.5)



# ---- the launcher's own view (issue 43) --------------------------------------------------------
# Each fault below is applied to the shared cluster and undone afterwards; several faults share
# one preflight run where they do not hide each other (CI time: one run each, 10-25 s).

HOSTFILE = "node0 slots=1\nnode1 slots=1\nnode2 slots=1\n"
PATH_LINE = "SetEnv PATH=/opt/env/bin:"  # tests/support/cluster/Dockerfile's sshd_config line


def _sshd_path(c: Cluster, node: str, on: bool) -> None:
    """Put the environment's bin folder on (or off) the PATH sshd gives a session on ``node``
    (sshd_config SetEnv; sshd, the container's PID 1, re-reads it on SIGHUP)."""
    old, new = ("#envgen-test ", "") if on else ("", "#envgen-test ")
    c.sh(node, f"sed -i 's|^{old}{PATH_LINE}|{new}{PATH_LINE}|' /etc/ssh/sshd_config && "
         "kill -HUP 1", check=True)
    want = "/opt/env/bin" if on else "/usr/bin"
    deadline = time.monotonic() + 20
    while not c.sh("node0", f"ssh {node} 'command -v python3'")[1].startswith(want):
        assert time.monotonic() < deadline, f"sshd on {node} did not reload"
        time.sleep(0.3)


def _outgoing_from_port(c: Cluster, node: str, port: int, peer: str) -> str:
    """A process on ``node`` whose outgoing connection to ``peer``:22 has ``port`` as its local
    port; its pid."""
    program = (f"import socket,time; s=socket.socket(); s.bind(('', {port})); "
               f"s.connect(('{peer}', 22)); time.sleep(600)")
    _, out = c.sh(node, f'/opt/env/bin/python -c "{program}" >/dev/null 2>&1 & echo $!',
                  check=True)
    deadline = time.monotonic() + 20
    while c.sh(node, f"ss -Htn 'sport = :{port}' | grep -q ESTAB")[0] != 0:
        assert time.monotonic() < deadline, f"no connection from {node}:{port}"
        time.sleep(0.2)
    return out.strip()


def test_the_launchers_view_of_a_hostfile_job(cluster):
    """DeepSpeed's runner exports ~/.deepspeed_env's GLOO_SOCKET_IFNAME=ib0 (no node has ib0);
    node2's non-interactive SSH PATH lacks /opt/env/bin; node1's open-files limit is 256;
    MASTER_PORT 40000 (ephemeral) is held by an outgoing connection on node0."""
    c = cluster
    c.write("node0", "/root/hostfile", HOSTFILE)
    c.write("node0", "/root/.deepspeed_env", "GLOO_SOCKET_IFNAME=ib0\n")
    _sshd_path(c, "node2", on=False)
    hard = c.sh("node1", "prlimit --pid 1 --nofile --noheadings --output HARD")[1].strip()
    soft = c.sh("node1", "prlimit --pid 1 --nofile --noheadings --output SOFT")[1].strip()
    c.sh("node1", f"prlimit --pid 1 --nofile=256:{hard}", check=True)
    holder = _outgoing_from_port(c, "node0", 40000, "node1")
    try:
        start = time.monotonic()
        rc, doc = run(c, "--hostfile", "/root/hostfile", "--master-port", "40000")
        took = time.monotonic() - start
    finally:
        c.sh("node0", f"kill {holder}; rm -f /root/.deepspeed_env")
        c.sh("node1", f"prlimit --pid 1 --nofile={soft}:{hard}")
        _sshd_path(c, "node2", on=True)
    assert rc == 1
    missing = [f for f in doc["findings"] if f["kind"] == "ifname-missing"]
    assert {f["evidence"]["node"] for f in missing} == {"node0", "node1", "node2"}
    assert all(f["severity"] == "error" and "GLOO_SOCKET_IFNAME=ib0" in f["summary"]
               and "/root/.deepspeed_env line 1" in f["summary"]
               and "/root/.deepspeed_env line 1" in f["fix"] for f in missing), missing
    assert doc["launcher"]["exports"]["GLOO_SOCKET_IFNAME"] == "ib0"
    path = finding(doc, "launcher-path")
    assert path["evidence"]["node"] == "node2" and path["severity"] == "error"
    assert "works when you ssh in, fails in the launcher" in path["summary"]
    assert "`ninja` is not found" in path["summary"] and "SetEnv PATH=/opt/env/bin" in path["fix"]
    assert "ninja_missing" not in kinds(doc)  # not "pip install ninja": it is installed
    limits = finding(doc, "limits-differ")
    assert limits["evidence"]["limit"] == "nofile" and limits["evidence"]["odd"] == ["node1"]
    taken = finding(doc, "master-port-taken")
    assert "an outgoing connection to" in taken["summary"] and f"pid {holder}" in taken["summary"]
    assert "-tanp" in taken["command"]
    assert finding(doc, "master-port-ephemeral")["evidence"]["port"] == 40000
    skipped = finding(doc, "check-skipped")
    assert "ifname-missing" in skipped["summary"] and doc["collective"] is None
    assert took < 60, took
    _none_left(c, "-[-]hold")  # the ranks started ahead end with the skipped collective


def test_the_etc_hosts_loopback_traps(cluster):
    """node1: `127.0.1.1 node1` above its real line (the Debian trap); node2: `127.0.1.1 node0`
    (another node's name answered with loopback) — named as loopback answers, not firewalls."""
    c = cluster
    saved = {n: c.sh(n, "cat /etc/hosts", check=True)[1] for n in ("node1", "node2")}
    c.write("node1", "/etc/hosts", "127.0.1.1 node1\n" + saved["node1"])
    c.write("node2", "/etc/hosts", "127.0.1.1 node0\n" + saved["node2"])
    try:
        rc, doc = run(c, *HOSTS, "--connect-timeout", "3")
    finally:
        for n, text in saved.items():
            c.write(n, "/etc/hosts", text)
    assert rc == 1
    own = finding(doc, "hostname-loopback")
    assert own["evidence"]["node"] == "node1" and own["severity"] == "error"
    assert "resolves first to 127.0.1.1" in own["summary"] and "/etc/hosts" in own["fix"]
    other = [f for f in doc["findings"] if f["kind"] == "name-loopback"]
    assert other and all(f["evidence"]["node"] == "node2" for f in other), other
    assert any("not a firewall" in f["summary"] for f in other)  # the master check's answer
    assert "master-port-blocked" not in kinds(doc)
    assert "hostname-loopback" in finding(doc, "check-skipped")["summary"]


def test_a_master_address_on_a_network_the_others_lack(cluster):
    """node0 joins a second network that comes first in its `hostname -I`: DeepSpeed's runner
    would give every rank that address as MASTER_ADDR."""
    c = cluster
    c.write("node0", "/root/hostfile", HOSTFILE)
    other = f"{c.network}-b"
    harness._docker("network", "create", other)
    try:
        harness._docker("network", "connect", other, c.containers["node0"])
        # reconnected, the shared network's interface comes after the new one
        harness._docker("network", "disconnect", c.network, c.containers["node0"])
        harness._docker("network", "connect", "--alias", "node0", c.network,
                        c.containers["node0"])
        first = c.sh("node0", "hostname -I", check=True)[1].split()
        shared = c.sh("node1", "getent hosts node0", check=True)[1].split()[0]
        assert first[0] != shared and shared in first, first
        rc, doc = run(c, "--hostfile", "/root/hostfile", "--connect-timeout", "3")
        # DeepSpeed's openmpi mode: the ranks take rank 0's `hostname -I` whatever
        # --master_addr says; the fix moves the address, not the option
        _, mpi = run(c, "--hostfile", "/root/hostfile", "--connect-timeout", "3",
                     "--launcher", "deepspeed-openmpi", "--master-addr", shared)
    finally:
        harness._docker("network", "disconnect", other, c.containers["node0"], check=False)
        harness._docker("network", "rm", other, check=False)
    assert rc == 1
    far = [f for f in doc["findings"] if f["kind"] == "master-unreachable"]
    assert {f["evidence"]["node"] for f in far} == {"node1", "node2"}, doc["findings"]
    assert all("`hostname -I` on node0" in f["summary"] and first[0] in f["summary"]
               and f"--master_addr {shared}" in f["fix"] for f in far), far
    view = finding(doc, "launcher-view")
    assert f"master address {first[0]}" in view["summary"]
    assert "master-unreachable" in finding(doc, "check-skipped")["summary"]
    assert mpi["launcher"]["master_addr"] == first[0] and mpi["launcher"]["master_port"] == 29500
    far = [f for f in mpi["findings"] if f["kind"] == "master-unreachable"]
    assert {f["evidence"]["node"] for f in far} == {"node1", "node2"}, mpi["findings"]
    assert all("first in `hostname -I`" in f["fix"] and "--master_addr does not reach them"
               in f["fix"] for f in far), far


def test_ctrl_c_prints_the_findings_so_far(cluster):
    """SIGINT during the all_reduce: the findings made until then, exit 130, within 2 s."""
    proc = subprocess.Popen(
        [harness.DOCKER, "exec", cluster.containers["node0"], "sh", "-c",
         'echo "pid $$" >&2; exec envgen preflight --json --hosts node0,node1,node2'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid, sent = None, None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("pid ") and pid is None:
                pid = line.split()[1]
            if "all_reduce" in line:
                sent = time.monotonic()
                cluster.sh("node0", f"kill -INT {pid}", check=True)
                break
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - (sent or 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert sent is not None and proc.returncode == 130
    doc = json.loads(out)
    assert doc["interrupted"] == "the collective" and doc["error"]["kind"] == "interrupted"
    assert doc["findings"] and all(n["status"] == "ok" for n in doc["nodes"])
    print(f"Ctrl-C to exit: {took:.2f} s")
    assert took < 2.5, took  # 2 s, plus the `docker exec` that sends the signal
    for node in ("node0", "node1", "node2"):  # nothing of it goes on running
        deadline = time.monotonic() + 15
        while cluster.sh(node, "pgrep -f -- '- --maste[r]-addr'")[0] == 0:
            assert time.monotonic() < deadline, f"a rank still runs on {node}"
            time.sleep(0.5)


# ---- torchrun's view against a real torchrun launch (the ground truth) -------------------------

TORCHRUN_JOB = """\
import json, os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
keys = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS")
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys} | {"sum": t.item()}), flush=True)
dist.destroy_process_group()
"""


def _torchrun_everywhere(c: Cluster, options: str, seconds: int) -> dict[str, tuple[int, str]]:
    """torchrun started on every node from node0 over ssh (non-interactive sessions, as a user
    or pdsh starts it), node i with --node-rank i; node → (exit code, output)."""
    for node in c.nodes:
        c.write(node, "/root/job.py", TORCHRUN_JOB)
    starts = " ".join(
        f"(timeout {seconds} ssh {node} /opt/env/bin/torchrun --nnodes {len(c.nodes)} "
        f"--node-rank {i} --nproc-per-node 1 {options} /root/job.py > /tmp/tr-{node}.out 2>&1;"
        f" echo $? > /tmp/tr-{node}.rc) &" for i, node in enumerate(c.nodes))
    c.sh("node0", f"{starts} wait", timeout=seconds + 60, check=True)
    out = {}
    for node in c.nodes:
        _, rc = c.sh("node0", f"cat /tmp/tr-{node}.rc", check=True)
        _, text = c.sh("node0", f"cat /tmp/tr-{node}.out", check=True)
        out[node] = (int(rc.strip()), text)
    return out


def _worker_env(text: str) -> dict:
    line = next(ln for ln in text.splitlines() if ln.startswith("ENV "))
    return json.loads(line[4:])


def test_torchruns_view_is_what_torchrun_gives_its_workers(cluster):
    """--launcher torchrun --master-addr node0: the master address, port and variables the
    preflight shows are those a real torchrun on every node hands its workers, and both pass."""
    runs = _torchrun_everywhere(cluster, "--master-addr node0 --master-port 29500", 120)
    assert all(rc == 0 for rc, _ in runs.values()), runs
    workers = {n: _worker_env(text) for n, (_, text) in runs.items()}
    assert {w["sum"] for w in workers.values()} == {6.0}
    rc, doc = run(cluster, *HOSTS, "--launcher", "torchrun", "--master-addr", "node0")
    assert rc == 0, doc["findings"]
    view = doc["launcher"]
    for w in workers.values():
        assert (view["master_addr"], str(view["master_port"])) == (w["MASTER_ADDR"],
                                                                  w["MASTER_PORT"])
        for var, value in view["exports"].items():  # what torchrun adds, exactly
            assert w[var] == value, (var, w)
        assert w["OMP_NUM_THREADS"] is None and "OMP_NUM_THREADS" not in view["exports"]
    assert doc["collective"]["ok"] and doc["collective"]["world_size"] == 3


def test_torchrun_without_a_master_address_fails_and_is_named(cluster):
    """No --master-addr (MASTER_ADDR in the shell does not count): every torchrun rendezvouses
    at its own 127.0.0.1 and the launch fails; the preflight names it without running it."""
    runs = _torchrun_everywhere(cluster, "--rdzv-conf timeout=15", 90)
    assert all(rc != 0 for rc, _ in runs.values()), runs
    rc, doc = run(cluster, *HOSTS, "--launcher", "torchrun", env={"MASTER_ADDR": "node0"})
    assert rc == 1
    loop = finding(doc, "launcher-master-loopback")
    assert "127.0.0.1" in loop["summary"] and "MASTER_ADDR=node0" in loop["summary"]
    assert "--master-addr node0" in loop["fix"]
    assert doc["collective"] is None
    assert "launcher-master-loopback" in finding(doc, "check-skipped")["summary"]


def test_a_master_that_is_not_the_first_node_hosts_rank_0(cluster):
    """--master-addr node2 (the launchers start node rank 0 there): the collective's rank 0,
    which hosts the rendezvous store, runs on node2 — the job passes, it does not hang."""
    rc, doc = run(cluster, *HOSTS, "--master-addr", "node2", "--launcher", "torchrun")
    assert rc == 0, doc["findings"]
    assert doc["master"] == "node2" and doc["launcher"]["master_addr"] == "node2"
    rank0 = doc["collective"]["ranks"][0]
    assert (rank0["rank"], rank0["node"]) == (0, "node2")
