"""Ground truth for `envgen preflight` (issue 43): for each fault, what the preflight says and
what a real `deepspeed --hostfile` launch through pdsh then does — before and after the fix.

Run by `nox -s preflight_ground_truth` (not in the default run: a real launch per case, several
minutes on 2 cores); needs root and dockerd (tests/support/docker-up.sh) and the Debian mirror
(pdsh is installed on the launching node at run time). Prints one JSON line per case and a
table; exits 1 when a launch does not do what the preflight predicted.

The cluster is tests/support/cluster's (three containers, CPU torch 2.13.0 and DeepSpeed 0.19.8
in /opt/env). The job is a small script: torch.distributed over gloo on the variables
DeepSpeed's launcher sets, one checked all_reduce, and torch's ninja check (the first step of
every JIT op build).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.cluster import cluster as harness
from support.cluster.cluster import Cluster

HOSTFILE = "node0 slots=1\nnode1 slots=1\nnode2 slots=1\n"
# torch.distributed's own env:// rendezvous on the variables deepspeed.launcher.launch sets
# (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE): DeepSpeed's init_distributed on its CPU
# accelerator first JIT-builds a shared-memory op on every node (minutes on 2 shared cores)
JOB = """\
import torch, torch.distributed as dist
from torch.utils.cpp_extension import verify_ninja_availability
dist.init_process_group("gloo")
verify_ninja_availability()  # a JIT op build starts with this
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert t.item() == sum(range(1, dist.get_world_size() + 1)), t
print("ALLREDUCE_OK", dist.get_rank(), flush=True)
dist.destroy_process_group()
"""
LAUNCH_SECONDS = 120  # a launch that hangs (gloo waits 30 min by default) counts as failed


def launch(c: Cluster, extra: str = "") -> tuple[int, float, str]:
    start = time.monotonic()
    rc, out = c.sh("node0", f"cd /root/job && timeout -k 5 {LAUNCH_SECONDS} deepspeed "
                   f"--hostfile /root/hostfile {extra} train.py 2>&1",
                   timeout=LAUNCH_SECONDS + 60)
    return rc, round(time.monotonic() - start, 1), out[-1500:]


def preflight(c: Cluster, *args: str) -> tuple[int, list[str]]:
    rc, doc, _ = c.preflight("--hostfile", "/root/hostfile", "--connect-timeout", "3",
                             "--collective-timeout", "20", *args)
    return rc, sorted({f["kind"] for f in (doc or {}).get("findings", [])
                       if f["severity"] == "error"})


def _sshd_path(c: Cluster, node: str, on: bool) -> None:
    line = "SetEnv PATH=/opt/env/bin:"
    old, new = ("#gt ", "") if on else ("", "#gt ")
    c.sh(node, f"sed -i 's|^{old}{line}|{new}{line}|' /etc/ssh/sshd_config && kill -HUP 1",
         check=True)
    time.sleep(1)


def two_networks(c: Cluster) -> Callable[[], None]:
    other = f"{c.network}-b"
    harness._docker("network", "create", other)
    harness._docker("network", "connect", other, c.containers["node0"])
    harness._docker("network", "disconnect", c.network, c.containers["node0"])
    harness._docker("network", "connect", "--alias", "node0", c.network, c.containers["node0"])

    def undo() -> None:
        harness._docker("network", "disconnect", other, c.containers["node0"], check=False)
        harness._docker("network", "rm", other, check=False)
    return undo


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="envgen-ground-truth-") as tmp:
        images = harness.images(Path(tmp))
    rows = []
    failed = False
    with Cluster(3, images["node"], cap_net_admin=True) as c:
        c.sh("node0", "apt-get install -y -qq pdsh >/dev/null 2>&1", check=True, timeout=600)
        for node in c.nodes:  # the job's folder on every node, as a shared filesystem has it
            c.sh(node, "mkdir -p /root/job", check=True)
            c.write(node, "/root/job/train.py", JOB)
        c.write("node0", "/root/hostfile", HOSTFILE)
        saved_hosts = c.sh("node1", "cat /etc/hosts", check=True)[1]
        shared = c.sh("node1", "getent hosts node0", check=True)[1].split()[0]

        def env_file() -> Callable[[], None]:
            c.write("node0", "/root/.deepspeed_env", "GLOO_SOCKET_IFNAME=ib0\n")
            return lambda: c.sh("node0", "rm -f /root/.deepspeed_env", check=True)

        def path() -> Callable[[], None]:
            _sshd_path(c, "node2", on=False)
            return lambda: _sshd_path(c, "node2", on=True)

        def loopback() -> Callable[[], None]:
            c.write("node1", "/etc/hosts", "127.0.1.1 node1\n" + saved_hosts)
            return lambda: c.write("node1", "/etc/hosts", saved_hosts)

        cases: list[tuple[str, Callable[[], Callable[[], None]] | None, str]] = [
            ("healthy", None, ""),
            ("~/.deepspeed_env GLOO_SOCKET_IFNAME=ib0", env_file, ""),
            ("node2's non-interactive PATH without /opt/env/bin", path, ""),
            ("127.0.1.1 node1 above node1's real line", loopback, ""),
            ("node0's second network first in hostname -I", lambda: two_networks(c),
             f"--master_addr {shared}"),
        ]
        for name, fault, fixed_args in cases:
            undo = fault() if fault else None
            try:
                pre_rc, kinds = preflight(c)
                rc, secs, tail = launch(c)
                fixed = None
                if fixed_args:  # the fix is an option of the launch: applied with the fault
                    fixed = launch(c, fixed_args)
            finally:
                if undo:
                    undo()
            if fault and not fixed_args:
                fixed = launch(c)  # the fault undone, as the finding's fix says
            predicted_fail = pre_rc == 1
            launch_failed = rc != 0 or "ALLREDUCE_OK" not in tail
            agree = predicted_fail == launch_failed and (fixed is None or fixed[0] == 0)
            failed |= not agree
            row = {"case": name, "preflight_exit": pre_rc, "errors": kinds,
                   "launch_exit": rc, "launch_seconds": secs,
                   "fixed_launch_exit": fixed[0] if fixed else None,
                   "fixed_with": fixed_args or ("fault undone" if fault else None),
                   "agree": agree, "launch_tail": tail[-400:]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| case | preflight | its errors | deepspeed launch | after the fix |")
    print("|---|---|---|---|---|")
    for r in rows:
        after = "-" if r["fixed_launch_exit"] is None else f"exit {r['fixed_launch_exit']}"
        print(f"| {r['case']} | exit {r['preflight_exit']} | {', '.join(r['errors']) or '-'} | "
              f"exit {r['launch_exit']} ({r['launch_seconds']} s) | {after} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
