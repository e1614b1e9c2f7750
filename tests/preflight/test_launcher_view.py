"""What DeepSpeed's runner will do, computed from small fixtures (no network, no SSH): its
environment files read as it reads them, the exports with their origins, the master address
from `hostname -I`, the PATH of a non-interactive session, names that answer with loopback,
limits that differ, the port's owner and the ephemeral range, a failed collective explained,
and the collective skipped after an error that dooms it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from envgen.preflight import checks_launcher, checks_master, checks_names, checks_network
from envgen.preflight.catalog import load_catalog
from envgen.preflight.checks_collective import collective_findings, doomed, explain
from envgen.preflight.collective import NodeRun, summarise
from envgen.preflight.launcher_view import deepspeed_view, env_file_findings, master_from


@pytest.fixture
def catalog(fixture_matrix):
    return load_catalog(fixture_matrix)


def node(name: str, address: str, **changes) -> dict:
    doc = {
        "schema": 1, "hostname": name,
        "resolve": {n: {"addresses": [a], "error": None}
                    for n, a in (("node0", "10.0.0.10"), ("node1", "10.0.0.11"),
                                 ("node2", "10.0.0.12"))},
        "local_addresses": ["127.0.0.1", address],
        "interfaces": {"lo": {"up": True, "loopback": True, "ipv4": ["127.0.0.1/8"], "ipv6": []},
                       "eth0": {"up": True, "loopback": False, "ipv4": [f"{address}/24"],
                                "ipv6": []}},
        "shm": {"path": "/dev/shm", "total_bytes": 2**31, "free_bytes": 2**31},
        "memlock": {"soft": "unlimited", "hard": "unlimited"},
        "nofile": {"soft": 1048576, "hard": 1048576}, "port_range": [32768, 60999],
        "cpus": 8, "env": {},
        "session": {"path": "/opt/env/bin:/usr/bin:/bin", "executable": "/opt/env/bin/python",
                    "which": {"python": "/opt/env/bin/python", "ninja": "/opt/env/bin/ninja",
                              "deepspeed": "/opt/env/bin/deepspeed"},
                    "beside_python": {"python": True, "ninja": True, "deepspeed": True}},
        "hostname_i": {"rc": 0, "stdout": f"{address} \n", "error": None},
    }
    doc.update(changes)
    return doc


@pytest.fixture
def cluster() -> dict[str, dict]:
    return {f"node{i}": node(f"node{i}", f"10.0.0.1{i}") for i in range(3)}


# ---------------------------------------------------------------- the environment files


def view(catalog, tmp_path: Path, home_text: str | None, cwd_text: str | None = None,
         environ: dict | None = None):
    home, cwd = tmp_path / "home", tmp_path / "job"
    home.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    if home_text is not None:
        (home / ".deepspeed_env").write_text(home_text)
    if cwd_text is not None:
        (cwd / ".deepspeed_env").write_text(cwd_text)
    return deepspeed_view(catalog, environ or {}, cwd=cwd, home=home)


def test_names_and_values_with_their_origins(catalog, tmp_path):
    v = view(catalog, tmp_path, "GLOO_SOCKET_IFNAME=ib0\nWANDB_MODE = offline \n",
             "GLOO_SOCKET_IFNAME=eth0\n",
             {"NCCL_DEBUG": "INFO", "PYTHONPATH": "/lib", "HOME": "/x", "WANDB_KEY": "k"})
    # ~ first, then . (runner.py L604): the folder's line wins; values stripped
    assert v.exports["GLOO_SOCKET_IFNAME"] == "eth0"
    assert v.origins["GLOO_SOCKET_IFNAME"].endswith("job/.deepspeed_env line 1")
    assert v.exports["WANDB_MODE"] == "offline"
    assert v.exports["NCCL_DEBUG"] == "INFO" and "prefix" in v.origins["NCCL_DEBUG"]
    assert v.exports["PYTHONPATH"] == f"{tmp_path / 'job'}:/lib"  # the launch folder first
    assert "HOME" not in v.exports and "WANDB_KEY" not in v.exports
    assert env_file_findings(catalog, v) == []


def test_launched_from_home_the_file_is_read_once(catalog, tmp_path):
    (tmp_path / ".deepspeed_env").write_text("\n")
    v = deepspeed_view(catalog, {}, cwd=tmp_path, home=tmp_path)
    assert v.files == (str(tmp_path / ".deepspeed_env"),)
    assert len(env_file_findings(catalog, v)) == 1


def test_ds_env_file_names_another_file(catalog, tmp_path):
    other = tmp_path / "my.env"
    other.write_text("NCCL_SOCKET_IFNAME=ib0\n")
    v = deepspeed_view(catalog, {"DS_ENV_FILE": str(other)}, cwd=tmp_path, home=tmp_path)
    assert v.exports["NCCL_SOCKET_IFNAME"] == "ib0"
    assert v.files == (str(other),)


@pytest.mark.parametrize(("text", "words"), [
    ("A=1\n\nB=2\n", "has no '='"),  # a blank line: ValueError in DeepSpeed
    ("# GLOO_SOCKET_IFNAME=ib0\n", "comments out the rest"),
    ("MY VAR=1\n", "not a variable name"),
])
def test_lines_that_break_the_launch(catalog, tmp_path, text, words):
    v = view(catalog, tmp_path, text)
    found = env_file_findings(catalog, v)
    assert [(f.kind, f.severity) for f in found] == [("deepspeed-env-line", "error")]
    assert words in found[0].summary and ".deepspeed_env line" in found[0].summary
    assert "edit" in found[0].fix


def test_a_value_the_nodes_shell_rewrites_is_a_warning(catalog, tmp_path):
    v = view(catalog, tmp_path, "LD_LIBRARY_PATH=$HOME/lib:/usr/lib\n")
    found = env_file_findings(catalog, v)
    assert [(f.kind, f.severity) for f in found] == [("deepspeed-env-line", "warning")]
    assert v.exports["LD_LIBRARY_PATH"] == "$HOME/lib:/usr/lib"


def test_an_env_file_interface_no_node_has_names_file_and_line(catalog, tmp_path, cluster):
    v = view(catalog, tmp_path, "GLOO_SOCKET_IFNAME=ib0\n")
    found, _ = checks_network.settings(catalog, cluster, v.exports, mode="cpu",
                                       origins=v.origins)
    missing = [f for f in found if f.kind == "ifname-missing"]
    assert [f.evidence["node"] for f in missing] == ["node0", "node1", "node2"]
    assert all(f.severity == "error" for f in missing)
    first = missing[0]
    assert "GLOO_SOCKET_IFNAME=ib0" in first.summary
    assert ".deepspeed_env line 1" in first.summary and ".deepspeed_env line 1" in first.fix
    assert "eth0" in first.fix


# ---------------------------------------------------------------- the master address


def test_master_from_hostname_i():
    assert master_from({"rc": 0, "stdout": "10.99.0.2 172.18.0.2 \n"}) == \
        ("10.99.0.2", "10.99.0.2 172.18.0.2")
    addr, why = master_from({"rc": 0, "stdout": "\n"})
    assert addr is None and "printed nothing" in why
    assert master_from({"rc": None, "error": "hostname: command not found"}) == \
        (None, "hostname: command not found")


def test_an_address_on_no_network_of_the_node(catalog, cluster):
    doc = {"ok": False, "kind": "timeout", "error": "timed out", "address": "10.99.0.2"}
    found = checks_master._connect_finding(catalog, "node1", doc, "10.99.0.2", 29500, None,
                                           "the first word of `hostname -I` on node0",
                                           cluster["node1"], ("10.0.0.10",))
    assert found.kind == "master-unreachable" and found.severity == "error"
    assert "no address on that network" in found.summary and "hostname -I" in found.summary
    assert "--master_addr 10.0.0.10" in found.fix  # node0's address on node1's network
    assert checks_master.on_link("10.0.0.10", cluster["node1"]) is True


def test_a_loopback_answer_is_not_blamed_on_a_firewall(catalog):
    doc = {"ok": False, "kind": "refused", "error": "Connection refused", "address": "127.0.1.1"}
    found = checks_master._connect_finding(catalog, "node1", doc, "node0", 29500, None)
    assert found.kind == "name-loopback" and "not a firewall" in found.summary


# ---------------------------------------------------------------- names, PATH, limits, ports


def test_own_name_first_answer_loopback_even_with_the_real_one_after(catalog, cluster):
    cluster["node1"]["resolve"]["node1"] = {"addresses": ["127.0.1.1", "10.0.0.11"],
                                            "error": None}
    found = checks_names.from_nodes(catalog, cluster, ["node0", "node1", "node2"],
                                    multi_node=True, ifname_set=False)
    assert [(f.kind, f.severity, f.evidence["node"]) for f in found] == \
        [("hostname-loopback", "error", "node1")]
    assert "127.0.1.1" in found[0].summary and "10.0.0.11 comes after it" in found[0].summary


def test_another_nodes_name_answered_with_loopback(catalog, cluster):
    cluster["node2"]["resolve"]["node0"] = {"addresses": ["127.0.1.1"], "error": None}
    found = checks_names.from_nodes(catalog, cluster, ["node0", "node1", "node2"],
                                    multi_node=True, ifname_set=False)
    loop = [f for f in found if f.kind == "name-loopback"]
    assert [(f.evidence["node"], f.evidence["host"]) for f in loop] == [("node2", "node0")]
    assert "/etc/hosts" in loop[0].fix and loop[0].severity == "error"
    # the ranks connect to an IP address (DeepSpeed's `hostname -I`): node2's answer for the
    # name is not used by the launch, a warning
    found = checks_names.from_nodes(catalog, cluster, ["node0", "node1", "node2"],
                                    multi_node=True, ifname_set=False, master="10.0.0.10")
    assert [f.severity for f in found if f.kind == "name-loopback"] == ["warning"]


def test_a_session_path_without_the_envs_bin(catalog, cluster):
    cluster["node2"]["session"] = {
        "path": "/usr/local/bin:/usr/bin:/bin", "executable": "/opt/env/bin/python",
        "which": {"python": None, "python3": "/usr/bin/python3", "ninja": None,
                  "deepspeed": None},
        "beside_python": {"python": True, "python3": True, "ninja": True, "deepspeed": True}}
    found = checks_launcher.session_path(catalog, cluster, "/opt/env/bin/python", {})
    assert [(f.kind, f.severity, f.evidence["node"]) for f in found] == \
        [("launcher-path", "error", "node2")]
    assert "works when you ssh in, fails in the launcher" in found[0].summary
    assert "`ninja` is not found" in found[0].summary
    assert "SetEnv PATH=/opt/env/bin:" in found[0].fix
    # a PATH line in .deepspeed_env is what the ranks get: nothing to say
    assert checks_launcher.session_path(catalog, cluster, "/opt/env/bin/python",
                                        {"PATH": "/opt/env/bin:/usr/bin"}) == []


def test_the_odd_node_out_of_the_limits(catalog, cluster):
    cluster["node1"]["nofile"] = {"soft": 256, "hard": 256}
    found = checks_network.limits_differ(catalog, cluster)
    assert [(f.kind, f.evidence["limit"], f.evidence["odd"]) for f in found] == \
        [("limits-differ", "nofile", ["node1"])]
    assert "node1: 256" in found[0].summary and "1048576 on the other 2 nodes" in \
        found[0].summary


def test_the_port_owner_and_the_ephemeral_range(catalog, cluster):
    doc = copy.deepcopy(cluster["node0"])
    doc["port"] = {"port": 40000, "free": False, "error": "[Errno 98] Address already in use",
                   "holder": None, "owner": {"how": "connected", "remote": "10.0.0.11:22",
                                             "pid": 77, "cmd": "ssh node1"}}
    taken = checks_master.port_taken(catalog, "node0", 40000, doc)
    assert "an outgoing connection to 10.0.0.11:22" in taken.summary
    assert "pid 77: ssh node1" in taken.summary
    assert "-tanp" in taken.command  # every state, not only listeners
    early = checks_master.port_ephemeral(catalog, "node0", 40000, doc)
    assert early.kind == "master-port-ephemeral" and "32768-60999" in early.summary
    assert checks_master.port_ephemeral(catalog, "node0", 29500, doc) is None


# ---------------------------------------------------------------- the collective


def test_a_failed_collective_says_who_was_stuck_connecting_where(catalog):
    events = ({"event": "start", "rank": 0}, {"event": "error", "rank": 0, "stage": "rendezvous",
               "step": "init", "error": "RuntimeError: [pair.cc:761] connect [127.0.1.1]:41234:"
               " Connection refused"})
    result = summarise([NodeRun("node0", events, rc=1),
                        NodeRun("node1", ({"event": "start", "rank": 1},
                                          {"event": "rendezvous", "rank": 1}), rc=1)],
                       backend="gloo")
    why = explain(result)
    assert "stuck connecting to 127.0.1.1:41234: rank 0 (node0)" in why
    assert "loopback" in why
    found = collective_findings(catalog, result)
    assert found[0].kind in ("collective-failed", "collective-hang")
    assert "stuck connecting to 127.0.1.1:41234" in found[0].summary


def test_the_collective_is_skipped_after_an_error_that_dooms_it(catalog, tmp_path, cluster):
    v = view(catalog, tmp_path, "GLOO_SOCKET_IFNAME=ib0\n")
    found, _ = checks_network.settings(catalog, cluster, v.exports, mode="cpu",
                                       origins=v.origins)
    assert doomed(found, "gloo").kind == "ifname-missing"
    assert doomed(found, "nccl") is None  # gloo's variable: NCCL does not read it


# ---------------------------------------------------------------- pairwise ports


def _mesh(drop_to: str | None, nodes=("node0", "node1", "node2"), kind: str = "timeout"):
    from envgen.preflight.checks_mesh import Mesh

    links = {}
    for s in nodes:
        for t in nodes:
            if s != t:
                ok = t != drop_to
                links[(s, t)] = {"ok": ok, "kind": None if ok else kind,
                                 "error": None if ok else "timed out"}
    return Mesh(29500, dict.fromkeys(nodes, 29500), links)


def test_a_dropped_port_is_traced_to_the_node_that_drops_it(catalog):
    from envgen.preflight.checks_mesh import analyse

    found = analyse(catalog, _mesh("node2"), what="MASTER_PORT 29500")
    assert [(f.kind, f.evidence.get("node")) for f in found] == [("port-dropped", "node2")]
    assert found[0].evidence["from"] == ["node0", "node1"]
    assert "node2 drops incoming TCP" in found[0].summary
    assert "while the other nodes reach each other" in found[0].summary
    assert analyse(catalog, _mesh(None), what="x") == []


def test_pairs_no_single_node_explains_are_listed(catalog):
    from envgen.preflight.checks_mesh import analyse

    m = _mesh(None)
    m.links[("node0", "node1")] = {"ok": False, "kind": "timeout", "error": "timed out"}
    found = analyse(catalog, m, what="x")
    assert [(f.kind, f.evidence.get("node")) for f in found] == [("port-dropped", None)]
    assert "node0 → node1 (timeout)" in found[0].summary


def test_an_interrupted_preflight_shows_the_findings_so_far(catalog):
    from envgen.cli.preflight_cmd import render
    from envgen.preflight.nodes import job_from
    from envgen.preflight.result import Options, State

    job = job_from(hosts="node0,node1", environ={})
    st = State(job, Options(python="/opt/env/bin/python"))
    st.findings.append(catalog.finding("shm-small", "node1: /dev/shm is 64.0 MiB", {}, None))
    result = st.result(interrupted="the collective")
    doc = result.to_dict()
    assert doc["interrupted"] == "the collective"
    assert [f["kind"] for f in doc["findings"]] == ["shm-small", "check-skipped"]
    text = render(result)
    assert "interrupted during the collective: the findings so far" in text
    assert "node1: /dev/shm is 64.0 MiB" in text


# ---------------------------------------------------------------- the other launchers


def test_a_module_the_launchers_ranks_import_is_missing(catalog):
    from types import SimpleNamespace

    from envgen.preflight.launchers import needs_findings

    snaps = {"node0": SimpleNamespace(packages={"torch": "2.13.0", "mpi4py": "4.0.1"}),
             "node1": SimpleNamespace(packages={"torch": "2.13.0"})}
    [f] = needs_findings(catalog, catalog.launcher("deepspeed-openmpi"), snaps)
    assert f.kind == "launcher-needs" and f.severity == "error"
    assert f.evidence["nodes"] == ["node1"] and "No module named 'mpi4py'" in f.summary
    assert needs_findings(catalog, catalog.launcher("deepspeed"), snaps) == []  # pdsh: none


def test_an_interface_the_launcher_pins_mpi_to_is_missing(catalog, cluster):
    from envgen.preflight.launchers import interface_findings

    cluster["node2"]["interfaces"]["ens5"] = cluster["node2"]["interfaces"].pop("eth0")
    [f] = interface_findings(catalog, catalog.launcher("deepspeed-openmpi"), cluster)
    assert f.kind == "launcher-interface" and f.evidence["nodes"] == ["node2"]
    assert f.evidence["have"] == ["ens5"] and "eth0" in f.summary
    assert "btl_tcp_if_include" in f.fix
    assert interface_findings(catalog, catalog.launcher("mpirun"), cluster) == []


@pytest.mark.parametrize("launcher, words", [
    ("mpirun", "`mpirun -x NCCL_DEBUG ...`"),
    ("torchrun", "`NCCL_DEBUG=INFO torchrun ...`"),
])
def test_a_variable_the_launcher_leaves_behind_says_how_to_pass_it(catalog, launcher, words):
    [f] = checks_launcher.not_carried(catalog, catalog.launcher(launcher), {"NCCL_DEBUG": "INFO"})
    assert f.kind == "env-not-forwarded" and words in f.fix
    assert "no rank will have it" in f.summary


def test_the_view_finding_says_where_the_ranks_start_and_read_their_rank(catalog, tmp_path):
    from envgen.preflight.launchers import launcher_view, with_master

    rule = catalog.launcher("srun")
    v = launcher_view(catalog, rule, {"NCCL_DEBUG": "INFO", "HOME": "/root"}, cwd=tmp_path,
                      home=tmp_path)
    v = with_master(v, "node0", "node0, the first host", 29500)
    f = checks_launcher.view_finding(catalog, v, exported=v.exports, master="node0",
                                     master_said="node0, the first host")
    assert "NCCL_DEBUG=INFO" in f.summary and "HOME" not in f.summary
    assert "the caller's environment, PATH included" in f.summary
    assert "looked up on the caller's PATH" in f.summary  # the interpreter, as srun(1) says
    assert "SLURM_PROCID" in f.summary and "1 more variables" in f.summary
    assert f.evidence["id"] == "srun" and f.evidence["master_port"] == 29500


def test_an_unknown_launcher_or_export_is_a_usage_error(fixture_matrix):
    from envgen.api import PreflightRequest, preflight
    from envgen.errors import UsageError
    from envgen.facts.matrix import Matrix

    matrix = Matrix(fixture_matrix)
    with pytest.raises(UsageError) as bad:
        preflight(PreflightRequest(hosts="a,b", launcher="pdsh2", environ={}), matrix=matrix)
    assert bad.value.source == "--launcher" and "torchrun" in bad.value.hint
    with pytest.raises(UsageError) as bad:
        preflight(PreflightRequest(hosts="a,b", launcher="mpirun", exports=("1X=2",),
                                   environ={}), matrix=matrix)
    assert bad.value.source == "--export"


def test_nodes_with_another_version_than_the_record_was_read_in_are_named(catalog):
    from types import SimpleNamespace

    from envgen.preflight.launchers import version_notes

    snaps = {"node0": SimpleNamespace(packages={"deepspeed": "0.19.8"}, torch="2.13.0+cpu"),
             "node1": SimpleNamespace(packages={"deepspeed": "0.18.2"}, torch="2.14.1"),
             "node2": SimpleNamespace(packages={"deepspeed": "0.18.2"}, torch="2.13.0")}
    [ds] = version_notes(catalog.launcher("deepspeed-openmpi"), snaps)
    assert "deepspeed 0.19.8's code" in ds and "node1, node2 have 0.18.2" in ds
    [tr] = version_notes(catalog.launcher("torchrun"), snaps)
    assert "torch 2.13.0's code" in tr and "node1 has 2.14.1" in tr  # +cpu is the same release
    assert version_notes(catalog.launcher("srun"), snaps) == ()  # not a Python package
