"""The preflight's checks on what nodes answered (node_probe facts, doctor snapshots, a
collective's result), against the fixture matrix's preflight catalog: each fault gives its
kind, names the node and says the fix; healthy answers give no error."""

from __future__ import annotations

import copy

import pytest

from envgen.doctor.snapshot import Snapshot
from envgen.preflight import checks_master, checks_names, checks_network, checks_same
from envgen.preflight.catalog import load_catalog
from envgen.preflight.collective import CollectiveResult, RankResult
from envgen.preflight.nodes import Node
from envgen.preflight.run import collective_findings


def facts_for(name: str, address: str, **changes) -> dict:
    doc = {
        "schema": 1, "hostname": name, "fqdn": name,
        "resolve": {n: {"addresses": [a], "error": None}
                    for n, a in (("node0", "10.0.0.10"), ("node1", "10.0.0.11"),
                                 ("node2", "10.0.0.12"))},
        "local_addresses": ["127.0.0.1", address],
        "interfaces": {"lo": {"up": True, "loopback": True, "ipv4": ["127.0.0.1/8"], "ipv6": []},
                       "eth0": {"up": True, "loopback": False, "ipv4": [f"{address}/24"],
                                "ipv6": []}},
        "shm": {"path": "/dev/shm", "total_bytes": 8 * 2**30, "free_bytes": 8 * 2**30},
        "memlock": {"soft": "unlimited", "hard": "unlimited"}, "cpus": 8, "env": {},
        "nvidia_smi": {"path": None, "rc": None, "stdout": "", "error": None}, "dev_nvidia": 0,
    }
    doc.update(changes)
    return doc


@pytest.fixture
def catalog(fixture_matrix):
    return load_catalog(fixture_matrix)


@pytest.fixture
def cluster():
    return {f"node{i}": facts_for(f"node{i}", f"10.0.0.1{i}") for i in range(3)}


NAMES = ["node0", "node1", "node2"]


def test_healthy_names_give_nothing(catalog, cluster):
    assert checks_names.from_nodes(catalog, cluster, NAMES, multi_node=True,
                                   ifname_set=False) == []


def test_a_name_one_node_cannot_resolve(catalog, cluster):
    cluster["node1"]["resolve"]["node2"] = {"addresses": [], "error": "Name or service not known"}
    found = checks_names.from_nodes(catalog, cluster, NAMES, multi_node=True, ifname_set=False)
    assert [(f.kind, f.evidence["node"], f.evidence["host"]) for f in found] == \
        [("host-unresolved", "node1", "node2")]
    assert found[0].severity == "error" and "node2" in found[0].fix


def test_a_name_that_resolves_differently(catalog, cluster):
    cluster["node2"]["resolve"]["node0"] = {"addresses": ["10.9.9.9"], "error": None}
    found = checks_names.from_nodes(catalog, cluster, NAMES, multi_node=True, ifname_set=False)
    assert [f.kind for f in found] == ["host-resolves-differently"]
    assert "node2 → 10.9.9.9" in found[0].summary


def test_the_etc_hosts_loopback_trap(catalog, cluster):
    cluster["node1"]["resolve"]["node1"] = {"addresses": ["127.0.1.1"], "error": None}
    found = checks_names.from_nodes(catalog, cluster, NAMES, multi_node=True, ifname_set=False)
    assert [(f.kind, f.severity) for f in found] == [("hostname-loopback", "error")]
    assert "127.0.1.1" in found[0].summary and "/etc/hosts" in found[0].fix
    # with an interface named for the job, gloo does not use the name: a warning only
    found = checks_names.from_nodes(catalog, cluster, NAMES, multi_node=True, ifname_set=True)
    assert [(f.kind, f.severity) for f in found] == [("hostname-loopback", "warning")]


def test_names_from_the_launching_node(catalog):
    answers = {"node0": (["10.0.0.10"], None), "nodex": ([], "Name or service not known")}
    found = checks_names.from_here(catalog, answers, "login1", {"node0", "nodex"})
    assert [(f.kind, f.evidence["host"]) for f in found] == [("host-unresolved", "nodex")]
    assert found[0].command == "getent hosts nodex"


SNAP = {"python": "3.11.2", "torch": "2.13.0+cpu", "torch_cuda": None, "torch_nccl": None,
        "frameworks": {"deepspeed": "0.19.8"}, "driver": None, "gpus": [], "os": "Debian 12",
        "glibc": "2.36", "import_errors": {}}


def snaps(**per_node) -> dict[str, Snapshot]:
    out = {}
    for n in NAMES:
        doc = {**SNAP, **per_node.get(n, {})}
        out[n] = Snapshot.from_dict(doc)
    return out


def test_same_environment_gives_a_table_without_differences(catalog, cluster):
    rows, found = checks_same.compare(catalog, snaps(), cluster)
    assert found == []
    by = {r.field: r for r in rows}
    assert by["torch"].values == {n: "2.13.0+cpu" for n in NAMES}
    assert by["torch CUDA"].values["node0"] == "CPU build"
    assert "envgen lock" not in by  # no node has one
    assert not any(r.differs for r in rows)


def test_a_node_with_another_torch(catalog, cluster):
    rows, found = checks_same.compare(
        catalog, snaps(node2={"torch": "2.14.1", "import_errors": {"torch": "OSError: x"}}),
        cluster)
    # the failed import is shown in the table; the doctor's import_failed is its finding
    assert [(f.kind, f.evidence["field"], f.severity) for f in found] == [
        ("node-env-differs", "torch", "error")]
    assert "2.14.1 on node2" in found[0].summary and "node2" in found[0].fix
    assert {r.field for r in rows if r.differs} == {"torch", "torch imports"}


def test_a_driver_difference_is_a_warning(catalog, cluster):
    _, found = checks_same.compare(catalog, snaps(node1={"driver": "570.86.15"}), cluster)
    assert [(f.evidence["field"], f.severity) for f in found] == [("driver", "warning")]


def test_frameworks_and_lock_hash_are_compared(catalog, cluster):
    cluster["node0"]["env"] = {"ENVGEN_LOCK_HASH": "aaa"}
    cluster["node1"]["env"] = {"ENVGEN_LOCK_HASH": "aaa"}
    _, found = checks_same.compare(catalog, snaps(node1={"frameworks": {}}), cluster)
    fields = sorted(f.evidence["field"] for f in found)
    assert fields == ["deepspeed", "envgen lock"]


def test_unknown_values_are_not_differences(catalog, cluster):
    doc = dict(SNAP)
    doc.pop("driver")
    s = snaps()
    s["node1"] = Snapshot.from_dict(doc)
    rows, found = checks_same.compare(catalog, s, cluster)
    assert found == []
    assert next(r for r in rows if r.field == "driver").values["node1"] is None


def test_slots_against_gpus_and_cpus(catalog, cluster):
    gpu = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}] * 4,
           "driver": "550.54.15"}
    s = snaps(node0=gpu, node1=gpu, node2=gpu)
    nodes = [Node("node0", 4, 1), Node("node1", 8, 2), Node("node2", None)]
    assert checks_same.device_mode("auto", s) == "gpu"
    found = checks_same.slots(catalog, nodes, s, cluster, "gpu")
    assert [(f.kind, f.evidence["node"], f.evidence["line"]) for f in found] == \
        [("slots-exceed-gpus", "node1", 2)]
    assert "slots=4" in found[0].fix
    cpu = checks_same.slots(catalog, [Node("node0", 64, 1)], snaps(), cluster, "cpu")
    assert [(f.kind, f.severity) for f in cpu] == [("slots-exceed-cpus", "warning")]
    # a GPU job asked for on nodes without GPUs: every slot is too many
    none = checks_same.slots(catalog, [Node("node0", 1, 1)], snaps(), cluster, "gpu")
    assert [f.kind for f in none] == ["slots-exceed-gpus"]


def test_interface_names(catalog, cluster):
    assert checks_network.matching("NCCL_SOCKET_IFNAME", "eth", {"eth0": ["1"], "lo": ["2"]}) \
        == ["eth0"]
    assert checks_network.matching("NCCL_SOCKET_IFNAME", "=eth", {"eth0": ["1"]}) == []
    assert checks_network.matching("NCCL_SOCKET_IFNAME", "^docker", {
        "eth0": ["1"], "docker0": ["2"], "lo": ["3"]}) == ["eth0"]
    assert checks_network.matching("GLOO_SOCKET_IFNAME", "eth", {"eth0": ["1"]}) == []
    assert checks_network.matching("GLOO_SOCKET_IFNAME", "eth0,ib0", {"eth0": ["1"]}) == ["eth0"]
    found, chosen = checks_network.settings(catalog, cluster, {"GLOO_SOCKET_IFNAME": "eth0"},
                                            mode="cpu")
    assert found == [] and chosen["node1"] == {"GLOO_SOCKET_IFNAME": "10.0.0.11"}
    cluster["node2"]["interfaces"]["ib0"] = {"up": True, "ipv4": ["192.168.1.2/24"],
                                             "ipv6": []}
    found, _ = checks_network.settings(catalog, cluster, {"NCCL_SOCKET_IFNAME": "ib0"},
                                       mode="cpu")
    assert sorted(f.evidence["node"] for f in found) == ["node0", "node1"]
    assert all(f.kind == "ifname-missing" and "eth0" in f.fix for f in found)
    assert not checks_network.missing_everywhere("GLOO_SOCKET_IFNAME", "ib0", cluster)
    assert checks_network.missing_everywhere("GLOO_SOCKET_IFNAME", "eth9", cluster)


def test_node_own_variables_count_too(catalog, cluster):
    cluster["node1"]["env"] = {"GLOO_SOCKET_IFNAME": "eth9", "NCCL_IB_DISABLE": "1"}
    found, _ = checks_network.settings(catalog, cluster, {}, mode="cpu")
    assert sorted(f.kind for f in found) == ["ifname-missing", "nccl-settings"]
    knobs = next(f for f in found if f.kind == "nccl-settings")
    assert knobs.evidence["settings"] == {"NCCL_IB_DISABLE": {"node1": "1"}}


def test_shm_and_memlock(catalog, cluster):
    cluster["node2"]["shm"] = {"path": "/dev/shm", "total_bytes": 2**20, "free_bytes": 2**20}
    cluster["node1"]["memlock"] = {"soft": 8 * 2**20, "hard": 8 * 2**20}
    found, _ = checks_network.settings(catalog, cluster, {}, mode="cpu")
    # node1's memlock is the odd one out (limits-differ); node2's small shm is shm-small's
    assert [(f.kind, f.evidence.get("node", f.evidence.get("odd"))) for f in found] == \
        [("shm-small", "node2"), ("limits-differ", ["node1"])]
    assert "1.0 MiB" in found[0].summary
    found, _ = checks_network.settings(catalog, cluster, {}, mode="gpu")
    assert sorted(f.kind for f in found) == ["limits-differ", "memlock-limited", "shm-small"]
    found, _ = checks_network.settings(catalog, cluster, {"NCCL_IB_DISABLE": "1"}, mode="gpu")
    assert "memlock-limited" not in {f.kind for f in found}


def test_master_node_and_port(catalog, cluster):
    assert checks_master.master_node("node0", cluster, {}) == "node0"
    assert checks_master.master_node("10.0.0.12", cluster, {}) == "node2"
    assert checks_master.master_node("login", cluster, {"login": ["10.1.1.1"]}) is None
    doc = copy.deepcopy(cluster["node0"])
    doc["port"] = {"port": 29500, "free": False, "error": "[Errno 98] Address already in use",
                   "holder": "python3 -m http.server 29500"}
    found = checks_master.port_taken(catalog, "node0", 29500, doc)
    assert found.kind == "master-port-taken" and "http.server" in found.summary
    doc["port"]["free"] = True
    assert checks_master.port_taken(catalog, "node0", 29500, doc) is None


def _result(**kw) -> CollectiveResult:
    ranks = kw.pop("ranks")
    base = dict(backend="gloo", world_size=len(ranks), ok=all(r.ok for r in ranks),
                seconds=3.2, ranks=tuple(ranks), missing=(), bandwidth=None)
    base.update(kw)
    return CollectiveResult(**base)


def test_collective_findings(catalog):
    ok = [RankResult(rank=i, node=f"node{i}", stage_reached="bandwidth", ok=True, error=None,
                     timed_out=False) for i in range(3)]
    good = collective_findings(catalog, _result(ranks=ok, bandwidth={
        "bytes": 16 * 2**20, "seconds_median": 0.05, "algbw_gbps": 0.3, "busbw_gbps": 0.45}))
    assert [(f.kind, f.severity) for f in good] == [("collective-ok", "info")]
    assert "0.45 GB/s" in good[0].summary and "3 ranks" in good[0].summary
    hung = [ok[0], ok[1], RankResult(rank=2, node="node2", stage_reached="start", ok=False,
                                     error=None, timed_out=True)]
    found = collective_findings(catalog, _result(ranks=hung, missing=((2, "node2"),)))
    assert [f.kind for f in found] == ["collective-hang"]
    assert "rank 2 (node2)" in found[0].summary
    wrong = [ok[0], RankResult(rank=1, node="node1", stage_reached="check", ok=False,
                               error="expected 6.0, got 5.0", timed_out=False), ok[2]]
    found = collective_findings(catalog, _result(ranks=wrong))
    assert [f.kind for f in found] == ["collective-failed"] and "expected 6.0" in \
        found[0].summary


# ------------------------------------------------------------------ what the launcher carries

def test_a_variable_deepspeeds_runner_drops_is_named(catalog, tmp_path):
    from envgen.preflight import checks_launcher

    exported = {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_DEBUG": "INFO", "TP_SOCKET_IFNAME": "eth1"}
    found = checks_launcher.not_forwarded(catalog, exported, {}, cwd=tmp_path, home=tmp_path)
    assert [f.evidence["variable"] for f in found] == ["GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"]
    assert all(f.kind == "env-not-forwarded" and f.severity == "warning" for f in found)
    assert found[0].command == "echo GLOO_SOCKET_IFNAME=eth1 >> ~/.deepspeed_env"
    assert "NCCL*" in found[0].summary  # what it does export, from the catalog


def test_deepspeed_env_lines_are_forwarded_from_home_or_cwd(catalog, tmp_path):
    from envgen.preflight import checks_launcher

    home, cwd = tmp_path / "home", tmp_path / "job"
    home.mkdir()
    cwd.mkdir()
    (home / ".deepspeed_env").write_text("GLOO_SOCKET_IFNAME=eth1\n# TP_SOCKET_IFNAME=x\n")
    exported = {"GLOO_SOCKET_IFNAME": "eth1", "TP_SOCKET_IFNAME": "eth1"}
    found = checks_launcher.not_forwarded(catalog, exported, {}, cwd=cwd, home=home)
    assert [f.evidence["variable"] for f in found] == ["TP_SOCKET_IFNAME"]  # a comment is not
    assert found[0].evidence["env_files"] == [str(home / ".deepspeed_env")]
    (cwd / "my.env").write_text("TP_SOCKET_IFNAME=eth1\n")
    found = checks_launcher.not_forwarded(catalog, exported, {"DS_ENV_FILE": "my.env"},
                                          cwd=cwd, home=home)
    assert found and found[0].evidence["variable"] == "GLOO_SOCKET_IFNAME"  # ~/my.env: none


def test_torch_or_a_framework_missing_is_an_error_naming_the_nodes(catalog):
    node0, node1, node2 = NAMES[:3]
    found = checks_same.missing_software(catalog, snaps(**{
        node0: {"frameworks": {}},
        node1: {"torch": None},
        node2: {"import_errors": {"torch": "ImportError: libc10.so: cannot open"}}}),
        ("deepspeed",))
    assert all(f.kind == "torch-missing" and f.severity == "error" for f in found)
    assert sorted((f.evidence["module"], tuple(f.evidence["nodes"]), f.evidence["error"])
                  for f in found) == [
        ("deepspeed", (node0,), None), ("torch", (node1,), None),
        ("torch", (node2,), "ImportError: libc10.so: cannot open")]
    summaries = sorted(f.summary for f in found)
    assert summaries[1].startswith(f"torch fails to import (ImportError: libc10.so: cannot "
                                   f"open) on {node2}")
    assert summaries[2].startswith(f"torch is not installed on {node1}")
    assert checks_same.missing_software(catalog, snaps(), ("deepspeed",)) == []
