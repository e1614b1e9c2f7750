"""The commands envgen prints for a shell (envgen/shellcmd.py), which paths a doctor fix may
delete (envgen/doctor/removable.py), the host-name check --hosts and hostfiles share, and the
terminal escaping of printed text (validate.shown_lines, cli.render.dump_json)."""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess

import pytest

from envgen.cli.render import dump_json
from envgen.doctor.removable import removable
from envgen.errors import UsageError
from envgen.preflight.hostlist import expand_nodelist, host_name
from envgen.shellcmd import command, ssh
from envgen.validate import shown_lines

HOSTILE = ["$(touch x)", "$(touch${IFS}x)", "`touch x`", "a;touch x", "a'b", 'a"b',
           "a && touch x", "a\ntouch x", "x|touch x", "~root", "*", "-rf"]


def test_safe_words_stay_bare():
    assert command("getent", "hosts", "node01.cluster") == "getent hosts node01.cluster"
    assert command("envgen", "install", "/opt/locks/ds-0.19", "--prefix", "./env") == \
        "envgen install /opt/locks/ds-0.19 --prefix ./env"
    assert ssh("node01", "ip", "-br", "addr") == "ssh node01 ip -br addr"
    assert ssh("n1", "true", options=("-o", "BatchMode=yes")) == "ssh -o BatchMode=yes n1 true"
    assert ssh("n1", "ss", "-ltnp", "sport", "=", ":29500") == "ssh n1 ss -ltnp sport = :29500"


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_is_one_word(value):
    assert shlex.split(command("getent", "hosts", value)) == ["getent", "hosts", value]


@pytest.mark.parametrize("value", HOSTILE)
def test_the_remote_shell_gets_the_word_as_it_is(value):
    """ssh joins the words after the host and a shell parses them again: two rounds of
    parsing give back the word."""
    local = shlex.split(ssh("n1", "getent", "hosts", value))
    assert local[:2] == ["ssh", "n1"]
    assert shlex.split(" ".join(local[2:])) == ["getent", "hosts", value]


def test_pasted_into_bash_nothing_runs(tmp_path):
    """The printed lines pasted into bash, with an `ssh` that runs its remote command in a
    shell here as sshd would: no file appears."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ssh").write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')
    (fake / "ssh").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    lines = [command("echo", v) for v in HOSTILE] + [ssh("n1", "echo", v) for v in HOSTILE]
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert list(work.iterdir()) == []
    assert "$(touch${IFS}x)" in proc.stdout.splitlines()


@pytest.mark.parametrize("path", [
    "/root/.cache/torch_extensions/py311_cu121/fused_adam",
    "/home/ann/.cache/torch_extensions/py312_cpu/cpu_adam",
])
def test_an_extension_in_the_default_cache_may_be_removed(path):
    assert removable(path)


@pytest.mark.parametrize(("path", "root"), [
    ("/ext/cpu_adam", "/ext"), ("/cache/fused_adam", "/cache/"),
    ("/scratch/ann/torch-ext/fused_adam", "/scratch/ann/torch-ext"),
])
def test_a_child_of_torch_extensions_dir_may_be_removed(path, root):
    assert removable(path, root)


@pytest.mark.parametrize(("path", "root"), [
    ("/", None), ("/", "/"), ("//", None), ("", None), (None, None), ("~", None),
    ("$HOME", None), ("~/.cache/torch_extensions/py311_cu121/x", None),
    ("relative/torch_extensions/py311_cu121/x", None),
    ("/root/.cache/torch_extensions/py311_cu121/..", None),
    ("/x/torch_extensions/py311_cu121/../../../..", None),
    ("/a/torch_extensions/py311_cu121/./", None),
    ("/a/torch_extensions/py311_cu121/x\n/", None),
    ("/home/ann", "/home"), ("/root", "/"), ("/etc", "/"), ("/usr/lib", "/usr"),
    ("/opt/conda", "/opt"), ("/home/ann/x", "/home/ann"),
    (os.path.expanduser("~") + "/x", os.path.expanduser("~")),
    ("/usr/torch_extensions/py311_cu121/x", None), ("/etc/passwd", "/etc"),
    ("/data/x/y", "/data"), ("/data/x", "/data/../data"),
    ("/torch_extensions/py311_cu121", None),  # the tag folder, not a build in it
])
def test_nothing_else_is_removed(path, root):
    assert not removable(path, root)


@pytest.mark.parametrize("name", ["node01", "gpu-001.cluster.local", "10.0.0.7", "fe80::1",
                                  "n_1"])
def test_host_names(name):
    assert host_name(name, "--hosts") == name


@pytest.mark.parametrize("name", ["$(touch x)", "-oProxyCommand=x", ".hidden", "a b",
                                  "\x1b]0;pwned\x07", "\x1b[2J", "a/b", "", "x" * 300])
def test_not_host_names(name):
    with pytest.raises(UsageError) as info:
        host_name(name, "hostfile line 3", "hostfile:3")
    assert info.value.exit_code == 2 and info.value.source == "hostfile:3"
    assert "\x1b" not in info.value.message and "\x07" not in info.value.message


def test_hosts_refuses_an_option_for_a_name():
    with pytest.raises(UsageError, match="not a host name"):
        expand_nodelist("node1,-oProxyCommand", "--hosts")


def test_shown_lines_keeps_the_lines_and_escapes_the_rest():
    assert shown_lines("a\nb") == "a\nb"
    assert shown_lines("ok\x1b[2J\nALL OK\x07") == "ok\\x1b[2J\nALL OK\\x07"


def test_json_output_carries_no_raw_control_character():
    out = io.StringIO()
    value = "eth0\x1b]0;pwned\x07\x9b2J\u2028"
    dump_json({"ifname": value}, out)
    assert out.getvalue().replace("\n", "").isprintable()
    assert json.loads(out.getvalue()) == {"ifname": value}
