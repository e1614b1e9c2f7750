"""Text from a file, a node or a report that tries to run or to rewrite the terminal: a hostile
hostfile, a MASTER_ADDR holding `$(...)`, an interface name with escape sequences, a snapshot
whose extension cache is `/`. Every command envgen prints has each value quoted (pasted into
bash, nothing runs), every value is shown with its control characters escaped, and no fix
deletes a path outside the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

fault = pytest.mark.fault

TOUCH = "$(touch${IFS}x)"
ESCAPES = ("\x1b]0;pwned\x07", "\x1b[2J")


@pytest.fixture
def mx(fixture_matrix, monkeypatch):
    for var in [v for v in os.environ if v.startswith(("SLURM_", "MASTER_", "GLOO_", "NCCL_"))
                or v in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "NNODES", "NPROC_PER_NODE",
                         "TP_SOCKET_IFNAME")]:
        monkeypatch.delenv(var)
    return ["--matrix-dir", str(fixture_matrix)]


def _raw_controls(text: str) -> list[str]:
    return [c for c in text.replace("\n", "") if not c.isprintable()]


def _run_lines(out: str) -> list[str]:
    return [line.split("run", 1)[1].strip() for line in out.splitlines()
            if line.startswith("  run ")]


def _paste(lines: list[str], where, tmp_path) -> subprocess.CompletedProcess:
    """The lines pasted into bash in ``where``; `ssh` runs its remote command in a shell here,
    as sshd would run it on the node."""
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "ssh").write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')
    (fake / "ssh").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", "\n".join(lines)], cwd=where, env=env,
                          capture_output=True, text=True, timeout=60)


@fault("Q01", "a hostfile name that is shell code (`$(touch x)`)", exit=2)
def test_hostfile_name_with_shell_code(cli, mx, tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(f"node1 slots=8\n{TOUCH} slots=8\n")
    r = cli("preflight", *mx, "--hostfile", hostfile, "--json")
    assert r.code == 2
    error = r.error
    assert error["kind"] == "usage" and error["source"] == f"{hostfile}:2"
    assert f"{hostfile} line 2: '{TOUCH}' is not a host name" == error["message"]
    assert error["fix"]
    assert not (tmp_path / "work" / "x").exists()


@fault("Q02", "hostfile names with escape sequences (retitle, clear screen)", exit=2)
@pytest.mark.parametrize("name", ESCAPES)
def test_hostfile_name_with_escapes(cli, mx, tmp_path, name):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(f"# the job\n{name} slots=8\nnode2 slots=8\n")
    r = cli("preflight", *mx, "--hostfile", hostfile)
    assert r.code == 2 and r.out == ""
    escaped = name.encode("unicode_escape").decode()
    assert r.says(f"{hostfile} line 2: '{escaped}' is not a host name", "hint: ")
    assert not _raw_controls(r.err), r.err


@fault("Q03", "a hostfile line that is only an escape sequence: the hint shows it escaped",
       exit=2)
def test_hostfile_line_of_escapes(cli, mx, tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("\x1b[2J\x1b]0;ALL OK\x07\n")
    r = cli("preflight", *mx, "--hostfile", hostfile)
    assert r.code == 2 and r.says(f"{hostfile} line 1", "is not `HOST slots=N`")
    assert not _raw_controls(r.err), r.err


@fault("Q04", "MASTER_ADDR that is an option or holds a control character", exit=2)
@pytest.mark.parametrize("value", ["-oProxyCommand=touch${IFS}x", "node1\x1b[2J"])
def test_master_addr_option_or_control(cli, mx, value):
    r = cli("preflight", *mx, "--hosts", "node1", "--json", env={"MASTER_ADDR": value})
    assert r.code == 2 and r.error["source"] == "MASTER_ADDR"
    assert not _raw_controls(r.out + r.err)


@fault("Q05", "MASTER_ADDR as the only node must be a host name (ssh connects to it)", exit=2)
def test_master_addr_as_the_node(cli, mx):
    r = cli("preflight", *mx, "--json", env={"MASTER_ADDR": TOUCH})
    assert r.code == 2 and r.error["source"] == "MASTER_ADDR"
    assert "is not a host name" in r.error["message"]


@fault("Q06", "MASTER_ADDR `$(touch${IFS}x)`: the printed commands quote it; pasted, nothing "
       "runs", exit=1)
def test_master_addr_shell_code_is_quoted(cli, mx, tmp_path):
    r = cli("preflight", *mx, "--hosts", "node-a.invalid", "--no-collective",
            "--connect-timeout", "5", env={"MASTER_ADDR": TOUCH})
    assert r.code == 1
    runs = _run_lines(r.out)
    assert f"getent hosts '{TOUCH}'" in runs, r.out
    assert f"`getent hosts '{TOUCH}'`" in r.out.replace("\n           ", " ")
    paste = tmp_path / "paste"
    paste.mkdir()
    _paste(runs, paste, tmp_path)
    assert list(paste.iterdir()) == []


@fault("Q07", "MASTER_ADDR `$(...)` in the command a node runs over ssh: quoted for both "
       "shells", exit=1)
def test_master_addr_quoted_for_the_remote_shell(cli, mx, tmp_path):
    """--local for real: this node's probe cannot resolve the address, and the finding tells
    to look it up there over ssh; the remote shell parses the command a second time."""
    r = cli("preflight", *mx, "--local", "--python", sys.executable, "--no-collective",
            env={"MASTER_ADDR": TOUCH})
    # the master lookup's commands (a machine whose own name answers with loopback also gets
    # `ssh <node> getent ahosts <node>`, which names no MASTER_ADDR)
    runs = [line for line in _run_lines(r.out) if line.startswith("ssh ")
            and "getent hosts " in line]
    assert runs and all(TOUCH in line for line in runs), r.out
    paste = tmp_path / "paste"
    paste.mkdir()
    proc = _paste(runs, paste, tmp_path)
    assert list(paste.iterdir()) == [], proc.stderr


FAKE_PYTHON = """\
#!{python}
# the job's python on a node whose facts name an interface with escape sequences
import json, subprocess, sys
program = sys.stdin.read()
proc = subprocess.run([{python!r}, *sys.argv[1:]], input=program, capture_output=True,
                      text=True)  # python - ARGV: the program comes on stdin
sys.stderr.write(proc.stderr)
if sys.argv[2:3] != ["facts"]:
    sys.stdout.write(proc.stdout)
    sys.exit(proc.returncode)
doc = json.loads(proc.stdout.strip().splitlines()[-1])
doc["interfaces"] = {{
    "lo": {{"ipv4": ["127.0.0.1/8"], "ipv6": [], "loopback": True, "up": True}},
    {name!r}: {{"ipv4": ["10.9.9.9/24"], "ipv6": [], "loopback": False, "up": True}},
}}
print(json.dumps(doc))
"""


@fault("Q08", "an interface name with escape sequences reported by a node: shown escaped",
       exit=1)
@pytest.mark.parametrize("as_json", [False, True])
def test_interface_name_with_escapes(cli, mx, tmp_path, as_json):
    name = "eth0\x1b]0;pwned\x07\x1b[2J"
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON.format(python=sys.executable, name=name))
    python.chmod(0o755)
    r = cli("preflight", *mx, "--local", "--python", python, "--no-collective",
            *(["--json"] if as_json else []), env={"GLOO_SOCKET_IFNAME": "ib9"})
    assert not _raw_controls(r.out + r.err), (r.out, r.err)
    if as_json:
        doc = json.loads(r.out)
        [missing] = [f for f in doc["findings"] if f["kind"] == "ifname-missing"]
        assert name in missing["evidence"]["interfaces"]  # the value itself, JSON-escaped
    else:
        assert "ifname-missing" in r.out
        assert "eth0\\x1b]0;pwned\\x07\\x1b[2J (10.9.9.9)" in r.out.replace("\n           ", " ")


def _snapshot(tmp_path, extensions, env=None):
    doc = {"schema": 1, "torch": "2.4.0+cu121", "torch_cuda": "12.1", "python": "3.11.9",
           "torch_cxx11_abi": True, "env": env or {}, "torch_extensions": extensions}
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(doc))
    return path


@fault("Q09", "a crafted snapshot whose extension cache is `/`, `~/..` or a home: no `rm -rf` "
       "of it", exit=1)
@pytest.mark.parametrize(("path", "env"), [
    ("/", {"TORCH_EXTENSIONS_DIR": "/"}), ("~/..", {}), ("$HOME", {}),
    ("/root/.cache/torch_extensions/py311_cu121/../../..", {}),
    ("/home/ann", {"TORCH_EXTENSIONS_DIR": "/home"}),
    ("/usr/lib", {"TORCH_EXTENSIONS_DIR": "/usr"}),
    (os.path.expanduser("~"), {}),
])
def test_snapshot_cannot_make_the_doctor_delete_outside(cli, mx, tmp_path, path, env):
    snap = _snapshot(tmp_path, [{"path": path, "torch": "2.3.0"},
                                {"path": path, "cxx11_abi": False}], env)
    r = cli("doctor", *mx, "--snapshot", snap, "--json")
    assert r.code == 1
    found = [f for f in json.loads(r.out)["findings"]
             if f["kind"] in ("stale_extension_cache", "abi_mismatch")]
    assert {f["kind"] for f in found} == {"stale_extension_cache", "abi_mismatch"}
    for f in found:
        assert f["command"] is None and "rm " not in f["fix"]
        assert "remove it by hand" in f["fix"]
    text = cli("doctor", *mx, "--snapshot", snap)
    assert "rm -rf" not in text.out and "remove it by hand" in text.out


@fault("Q10", "an honest extension cache still gets its `rm -rf` (quoted)", exit=1)
def test_snapshot_honest_extension_is_removed(cli, mx, tmp_path):
    good = "/home/ann/.cache/torch_extensions/py311_cu121/fused_adam"
    spaced = "/scratch/my ext/cpu_adam"
    snap = _snapshot(tmp_path, [{"path": good, "torch": "2.3.0"},
                                {"path": spaced, "torch": "2.3.0"}],
                     {"TORCH_EXTENSIONS_DIR": "/scratch/my ext"})
    r = cli("doctor", *mx, "--snapshot", snap, "--json")
    commands = {f["evidence"]["path"]: f["command"] for f in json.loads(r.out)["findings"]
                if f["kind"] == "stale_extension_cache"}
    assert commands == {good: f"rm -rf {good}", spaced: "rm -rf '/scratch/my ext/cpu_adam'"}


@fault("Q11", "a snapshot's `pip check` line whose requirement is a pip option: no command",
       exit=1)
def test_snapshot_requirement_that_is_an_option(cli, mx, tmp_path):
    doc = {"schema": 1, "torch": "2.4.0+cu121", "python": "3.11.9",
           "conflicts": [{"package": "deepspeed", "version": "0.14.0",
                          "requires": "--index-url=https://evil.example/simple torch"},
                         {"package": "deepspeed", "version": "0.14.0",
                          "requires": "ninja>=1.11", "have": None}]}
    snap = tmp_path / "snapshot.json"
    snap.write_text(json.dumps(doc))
    r = cli("doctor", *mx, "--snapshot", snap, "--json")
    assert r.code == 1
    commands = {f["evidence"]["requires"]: f["command"] for f in json.loads(r.out)["findings"]
                if f["kind"] == "dependency_conflict"}
    assert commands["--index-url=https://evil.example/simple torch"] is None
    assert commands["ninja>=1.11"].endswith("-m pip install 'ninja>=1.11'")
