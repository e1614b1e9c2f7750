"""Interrupts and time limits: SIGTERM/SIGINT end `envgen preflight` within 2 s at any point
(lookups abandoned, ssh steps killed with their process groups, the program on the node
ended), name resolution ends at its stated deadline whatever the node count, and a check
that runs too long (`verify ops`) is stopped with everything it started.

The slow resolver is a loopback DNS server that never answers, in a network namespace of the
test's own (``unshare -n -m``: only the loopback interface, a resolv.conf and nsswitch.conf
bind-mounted over the system's): no lookup leaves the namespace. Timings are measured from
the moment the signal is sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

fault = pytest.mark.fault
pytestmark = pytest.mark.integration

NODES = "node[1-20000]"
SIGNAL_EXIT_LIMIT = 2.0  # seconds from the signal to the exit (the requirement)

_DEAD_DNS = r'''
import fcntl, socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0))[:18])[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # the namespace's lo up
s.bind(("127.0.0.1", 53))  # receives every query, answers none
open(sys.argv[1], "w").close()
time.sleep(3600)
'''

_WRAPPER = '''\
mount --bind "$1" /etc/resolv.conf || exit 97
if [ -e /etc/nsswitch.conf ]; then mount --bind "$2" /etc/nsswitch.conf || exit 97; fi
"$PYTHON" "$3" "$4" &
while [ ! -e "$4" ]; do sleep 0.05; done
shift 4
exec "$PYTHON" -m envgen "$@"
'''


def _namespaces_work() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    try:
        return subprocess.run(["unshare", "-n", "-m", "true"], timeout=10,
                              capture_output=True).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_netns = pytest.mark.skipif(not _namespaces_work(),
                                 reason="needs root and unshare (network + mount namespace)")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVGEN_")}
    env["PYTHON"] = sys.executable
    return env


def _start_dead_dns(tmp_path: Path, *argv: str) -> tuple[subprocess.Popen, Path, Path]:
    """envgen ARGV in a namespace whose only resolver is a loopback DNS that never answers;
    the Popen is envgen itself (sh execs it), in a session of its own."""
    (tmp_path / "resolv.conf").write_text("nameserver 127.0.0.1\n")
    (tmp_path / "nsswitch.conf").write_text("hosts: files dns\n")
    (tmp_path / "dead_dns.py").write_text(_DEAD_DNS)
    (tmp_path / "wrapper.sh").write_text(_WRAPPER)
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(
            ["unshare", "-n", "-m", "--", "sh", str(tmp_path / "wrapper.sh"),
             str(tmp_path / "resolv.conf"), str(tmp_path / "nsswitch.conf"),
             str(tmp_path / "dead_dns.py"), str(tmp_path / "dns-ready"), *argv],
            stdout=o, stderr=e, stdin=subprocess.DEVNULL, cwd=tmp_path, env=_clean_env(),
            start_new_session=True)
    return proc, out, err


def _wait_for(path: Path, text: str, proc: subprocess.Popen, limit: float = 60) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            pytest.fail(f"ended ({proc.returncode}) before {text!r}:\n{path.read_text()}")
        time.sleep(0.05)
    pytest.fail(f"no {text!r} within {limit} s:\n{path.read_text()}")


def _end(proc: subprocess.Popen) -> None:
    """Remove what the test started (the dead DNS server shares envgen's session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _signal_and_time(proc: subprocess.Popen, signum: int) -> float:
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running 60 s after {signal.Signals(signum).name}")
    return time.monotonic() - sent


def _gone(pid: int, within: float) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    return False


@needs_netns
@pytest.mark.parametrize("signum, code, fid", [
    pytest.param(signal.SIGTERM, 143, "T01", marks=fault(
        "T01", "SIGTERM during name resolution (20,000 names, a DNS that never answers)",
        exit=143)),
    pytest.param(signal.SIGINT, 130, "T02", marks=fault(
        "T02", "SIGINT during name resolution (20,000 names, a DNS that never answers)",
        exit=130))])
def test_a_signal_during_name_resolution_ends_it_within_2_s(tmp_path, signum, code, fid):
    proc, _out, err = _start_dead_dns(tmp_path, "preflight", "--hosts", NODES, "--python",
                                      sys.executable, "--no-collective")
    try:
        _wait_for(err, "resolving 20000 name(s)", proc)
        time.sleep(1.0)  # the lookups are in flight, blocked in the resolver
        elapsed = _signal_and_time(proc, signum)
    finally:
        _end(proc)
    text = err.read_text()
    print(f"\n{fid}: {signal.Signals(signum).name} → exit in {elapsed:.2f} s")
    assert proc.returncode == code, text
    assert f"interrupted by {signal.Signals(signum).name}" in text, text
    assert "Traceback" not in text
    assert elapsed <= SIGNAL_EXIT_LIMIT, f"{elapsed:.2f} s from the signal to the exit"


@needs_netns
@fault("T03", "20,000 names against a DNS that never answers: preflight ends at its stated "
       "deadline unprompted", exit=1)
def test_name_resolution_ends_at_its_deadline_whatever_the_node_count(tmp_path):
    deadline = 3  # --connect-timeout: all the lookups together
    started = time.monotonic()
    proc, out, err = _start_dead_dns(tmp_path, "preflight", "--hosts", NODES, "--python",
                                     sys.executable, "--no-collective", "--connect-timeout",
                                     str(deadline), "--json")
    try:
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("no end within 180 s")
    finally:
        _end(proc)
    total = time.monotonic() - started
    doc = json.loads(out.read_text())
    steps = {s["check"]: s["seconds"] for s in doc["steps"]}
    print(f"\nT03: names step {steps['names']:.2f} s (deadline {deadline} s), whole run "
          f"{total:.1f} s")
    assert proc.returncode == 1, err.read_text()
    assert deadline - 0.5 <= steps["names"] <= deadline + 1.5, steps
    assert total <= deadline + 60, total  # start-up, 20,000 nodes' report: well below a minute
    unresolved = [f for f in doc["findings"] if f["kind"] == "host-unresolved"]
    assert len(unresolved) == 20000
    said = {f["evidence"]["error"].split(":")[0] for f in unresolved}
    assert said <= {f"no answer from the resolver within {deadline} s", "not looked up"}, said
    assert "--connect-timeout" in json.dumps(doc["findings"])


_FAKE_SSH = '''#!/bin/sh
# an ssh that connects and then never answers: it and a child of its own sleep
sleep 300 &
echo "$$ $!" >> "{pids}"
wait
'''


@fault("T04", "SIGTERM while ssh steps hang: preflight exits within 2 s, every ssh and its "
       "children killed", exit=143)
def test_sigterm_during_the_ssh_step_kills_every_ssh_within_2_s(tmp_path):
    pids = tmp_path / "pids"
    fake = tmp_path / "fake-ssh"
    fake.write_text(_FAKE_SSH.format(pids=pids))
    fake.chmod(0o755)
    err = tmp_path / "stderr"
    env = _clean_env()
    with err.open("w") as e:  # numeric addresses: no lookup at all
        proc = subprocess.Popen(
            [sys.executable, "-m", "envgen", "preflight", "--hosts", "127.0.0.[1-40]",
             "--ssh", str(fake), "--python", sys.executable, "--no-collective"],
            stdout=subprocess.DEVNULL, stderr=e, stdin=subprocess.DEVNULL, cwd=tmp_path,
            env=env, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and (not pids.exists()
                                          or len(pids.read_text().splitlines()) < 40):
            assert proc.poll() is None, err.read_text()
            time.sleep(0.05)
        # at least one hanging ssh per node (the preflight may run several steps a node at
        # once: facts, the snapshot, the non-interactive PATH), each with a child
        started = [int(p) for line in pids.read_text().splitlines() for p in line.split()]
        assert len(started) >= 80
        elapsed = _signal_and_time(proc, signal.SIGTERM)
    finally:
        _end(proc)
    print(f"\nT04: SIGTERM with {len(started) // 2} hanging ssh steps → exit in {elapsed:.2f} s")
    assert proc.returncode == 143, err.read_text()
    assert elapsed <= SIGNAL_EXIT_LIMIT, f"{elapsed:.2f} s from the signal to the exit"
    # every ssh started, also one started after the count above
    started = [int(p) for line in pids.read_text().splitlines() for p in line.split()]
    left = [p for p in started if not _gone(p, 2.0)]
    assert not left, f"still running after the exit: {left}"


_DRIVER = '''
import socket, sys, time
from envgen.preflight.remote import LocalRunner, program
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
running = LocalRunner("n1", sys.executable).start(
    program("node_probe.py"), ["listen", "--port", str(port), "--seconds", "300"])
assert running.first_json(60), "no listener"
print(running.proc.pid, flush=True)
time.sleep(300)
'''


@fault("T05", "the preflight is killed (SIGKILL) while a probe runs on a node: the probe "
       "ends by itself", exit=None)
def test_a_probe_ends_when_the_preflight_that_started_it_is_gone(tmp_path):
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER], stdout=subprocess.PIPE,
                              text=True, env=_clean_env(), cwd=tmp_path,
                              start_new_session=True)
    try:
        probe = int(driver.stdout.readline())
        assert not _gone(probe, 1.0)  # it runs, in a session of its own
        killed = time.monotonic()
        driver.kill()  # no handler, no cleanup: only the probe's own watch can end it
        driver.wait(timeout=10)
        assert _gone(probe, 10), "the probe outlived the preflight"
        print(f"\nT05: the probe ended {time.monotonic() - killed:.2f} s after the SIGKILL")
    finally:
        _end(driver)
        driver.stdout.close()


_HANGING_PYTHON = '''#!/bin/sh
sleep 300 &
echo $! > "{child}"
wait
'''


@fault("T06", "verify ops hangs: stopped at --ops-timeout with what it started, the step "
       "and the limit named", exit=4)
def test_verify_ops_is_stopped_at_its_time_limit(tmp_path):
    child = tmp_path / "child"
    fake = tmp_path / "python"
    fake.write_text(_HANGING_PYTHON.format(child=child))
    fake.chmod(0o755)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envgen", "verify", "ops", "--python",
                           str(fake), "--framework", "deepspeed", "--ops-timeout", "2",
                           "--json"], capture_output=True, text=True, timeout=120,
                          env=_clean_env(), cwd=tmp_path)
    took = time.monotonic() - started
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 4, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "timeout"
    assert "the ops check" in error["message"] and "within 2 s" in error["message"]
    assert "--ops-timeout" in error["fix"] and error["source"] == "--ops-timeout"
    assert took < 60
    assert _gone(int(child.read_text()), 5), "the check's child outlived it"


@fault("T07", "ENVGEN_TOOL_TIMEOUT is not a number of seconds", exit=2)
def test_a_bad_tool_timeout_is_a_usage_error(monkeypatch):
    from envgen.errors import UsageError
    from envgen.proc import TOOL_TIMEOUT_VAR, limit

    monkeypatch.setenv(TOOL_TIMEOUT_VAR, "soon")
    with pytest.raises(UsageError) as caught:
        limit(60)
    assert caught.value.source == TOOL_TIMEOUT_VAR and caught.value.exit_code == 2
    monkeypatch.setenv(TOOL_TIMEOUT_VAR, "90")
    assert limit(60) == 90


def test_run_kills_the_whole_group_on_expiry(tmp_path):
    """envgen.proc.run: a program and its child are both gone when the limit passes."""
    from envgen.proc import run

    child = tmp_path / "child"
    with pytest.raises(subprocess.TimeoutExpired):
        run(["sh", "-c", f"sleep 300 & echo $! > {child}; wait"], timeout=1,
            capture_output=True)
    assert _gone(int(child.read_text()), 3)


def test_lookups_never_hold_up_the_deadline(monkeypatch):
    """resolve_here with a resolver that hangs: back at the deadline, every name an error."""
    from envgen.preflight import checks_names

    def hang(*_a, **_k):
        time.sleep(30)

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    names = [f"n{i}" for i in range(5000)]
    started = time.monotonic()
    out = checks_names.resolve_here(names, timeout=1)
    assert time.monotonic() - started < 3
    assert all(addrs == [] and error for addrs, error in out.values())
    assert "not looked up" in out["n4999"][1] and "within 1 s" in out["n0"][1]
