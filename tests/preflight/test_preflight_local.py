"""`envgen preflight` as a user runs it, without a cluster: `--local` for real on this machine (the
node probe and the doctor snapshot run as subprocesses of this interpreter), the screen and
--json contract, and bad input — exit 2, a message naming the problem and the fix (as JSON too),
no file written."""

from __future__ import annotations

import json
import os
import sys

import pytest
from support.run import in_process, run_envgen

pytestmark = pytest.mark.integration


@pytest.fixture
def run(fixture_matrix, capsys, monkeypatch, tmp_path):
    for var in [v for v in os.environ if v.startswith(("SLURM_", "MASTER_", "GLOO_", "NCCL_"))
                or v in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "NNODES", "NPROC_PER_NODE")]:
        monkeypatch.delenv(var)
    return in_process(fixture_matrix, capsys, monkeypatch, tmp_path)


def test_local_checks_this_node_for_real(run):
    code, out, err = run("preflight", "--local", "--python", sys.executable, "--json")
    doc = json.loads(out)
    assert code == (0 if doc["ok"] else 1)
    assert doc["local"] is True and doc["job"]["source"] == "this node"
    [node] = doc["nodes"]
    assert node["status"] == "ok"
    assert node["facts"]["cpus"] >= 1 and node["facts"]["hostname"]
    fields = {row["field"] for row in doc["table"]}
    assert {"Python", "torch", "OS", "glibc"} <= fields
    python = next(r for r in doc["table"] if r["field"] == "Python")
    assert list(python["values"].values()) == [".".join(map(str, sys.version_info[:3]))]
    # the collective needs every node: said, not silently skipped
    assert any(f["kind"] == "check-skipped" for f in doc["findings"])
    assert "asking 1 node(s) about themselves" in err


def test_local_screen_shows_the_node_table_and_the_verdict(run):
    code, out, _ = run("preflight", "--local", "--python", sys.executable, "--no-collective")
    assert code in (0, 1)
    assert out.startswith("envgen preflight — 1 node from this node")
    assert "  Python " in out and "\nchecks: " in out
    assert ("no problems found" in out) == (code == 0)


def test_an_env_without_torch_is_an_error_not_a_clean_bill(run, tmp_path):
    """A fresh venv (no torch, no DeepSpeed): the launcher's processes would die at their first
    import, so preflight says so as an error and exits 1 — never "no problems found"."""
    import subprocess

    env = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    code, out, _ = run("preflight", "--local", "--python", str(env / "bin" / "python"),
                       "--framework", "deepspeed", "--json")
    doc = json.loads(out)
    missing = {f["evidence"]["module"]: f for f in doc["findings"] if f["kind"] == "torch-missing"}
    assert code == 1 and doc["ok"] is False
    assert set(missing) == {"torch", "deepspeed"}
    assert missing["torch"]["severity"] == "error"
    assert "torch is not installed on" in missing["torch"]["summary"]
    code, out, _ = run("preflight", "--local", "--python", str(env / "bin" / "python"),
                       "--no-collective")
    assert code == 1 and "no problems found" not in out and "torch-missing" in out


def test_a_missing_interpreter_is_named(run, tmp_path):
    code, out, _ = run("preflight", "--local", "--python", str(tmp_path / "nope" / "python"),
                       "--json")
    doc = json.loads(out)
    assert code == 1
    kinds = [f["kind"] for f in doc["findings"]]
    assert "python-missing" in kinds, doc["findings"]


@pytest.mark.parametrize(("args", "message", "source"), [
    ((), "no nodes given", None),
    (("--hosts", ","), "names no hosts", "--hosts"),
    (("--hosts", "a,b,a"), "a is named twice", "--hosts"),
    (("--hosts", "node[3-1]"), "node[3-1]", "--hosts"),
    (("--hosts", "a", "--ifname", "eth 0"), "not an interface name", "--ifname"),
    (("--hosts", "a", "--master-port", "99999"), "not a TCP port", "--master-port"),
    (("--hosts", "a", "--timeout", "1"), "out of range", "--timeout"),
    (("--hostfile", "missing-hostfile"), "cannot read it", "--hostfile"),
])
def test_bad_input_exits_2_with_the_fix(run, tmp_path, args, message, source):
    before = set(os.listdir(tmp_path))
    code, out, err = run("preflight", *args, "--json")
    assert code == 2, (out, err)
    error = json.loads(out)["error"]
    assert error["kind"] == "usage" and message in error["message"]
    assert error["fix"] and error["source"] == source
    assert set(os.listdir(tmp_path)) == before  # nothing half-written


def test_a_hostfile_typo_names_file_and_line(run, tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# the job\nnode1 slots=8\nnode2 slots=eight\n")
    code, out, err = run("preflight", "--hostfile", str(hostfile))
    assert code == 2 and out == ""
    assert f"{hostfile} line 3" in err and "slots=eight" in err
    assert "hint: " in err


def test_two_node_sources_are_refused_by_the_parser():
    proc = run_envgen("preflight", "--hosts", "a", "--local")
    assert proc.returncode == 2
    assert "not allowed with argument" in proc.stderr


def test_local_with_a_deepspeed_env_naming_an_interface_this_node_lacks(run, monkeypatch,
                                                                          tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".deepspeed_env").write_text("GLOO_SOCKET_IFNAME=ib9\n")
    monkeypatch.setenv("HOME", str(home))
    code, out, _ = run("preflight", "--local", "--python", sys.executable, "--json")
    doc = json.loads(out)
    assert code == 1
    missing = [f for f in doc["findings"] if f["kind"] == "ifname-missing"]
    assert missing and missing[0]["severity"] == "error"
    assert "GLOO_SOCKET_IFNAME=ib9" in missing[0]["summary"]
    assert f"{home / '.deepspeed_env'} line 1" in missing[0]["summary"]
    assert doc["launcher"]["exports"]["GLOO_SOCKET_IFNAME"] == "ib9"
