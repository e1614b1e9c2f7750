"""Preflight benchmark: the wall time of a healthy 3-node `envgen preflight`, the all_reduce
included, against the test cluster (tests/support/cluster: Docker containers as nodes, real
sshd, CPU torch 2.13.0 and DeepSpeed 0.19.8 in /opt/env), run on node0 as a user runs it before
`deepspeed --hostfile`. Prints each run's time and steps, then the median of N, the machine's
load average before and after (the nodes share this machine's cores: the figure moves with it),
and exits 1 when a run is not healthy (exit code, collective).

    python benchmarks/bench_preflight.py                 # start a cluster, 5 runs, remove it
    python benchmarks/bench_preflight.py --runs 9 --hosts
    python benchmarks/bench_preflight.py --container-prefix envgen-5d62952a-  # a started one

Needs root and dockerd (tests/support/docker-up.sh). The images are built (or found in the
build cache) from this working tree. Target (issue 43 part 6): median ≤ 10 s; the figure is
stated in docs/before-you-launch.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

HOSTFILE = "node0 slots=1\nnode1 slots=1\nnode2 slots=1\n"


def one(docker: str, node0: str, args: list[str]) -> tuple[float, int, dict]:
    t0 = time.monotonic()
    proc = subprocess.run([docker, "exec", "-w", "/root", node0, "envgen", "preflight", "--json",
                           *args], capture_output=True, text=True, timeout=600, check=False)
    took = time.monotonic() - t0
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = {"error": proc.stderr[-2000:]}
    return took, proc.returncode, doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", action="store_true",
                        help="--hosts node0,node1,node2 instead of the hostfile (DeepSpeed's view)")
    parser.add_argument("--container-prefix", metavar="P",
                        help="use the running containers P node0..node2 (e.g. a cluster a test "
                        "left up) instead of starting one")
    args = parser.parse_args(argv)
    from support.cluster import cluster as harness

    job = ["--hosts", "node0,node1,node2"] if args.hosts else ["--hostfile", "/root/hostfile"]
    c = None
    if args.container_prefix:
        node0 = f"{args.container_prefix}node0"
    else:
        images = harness.images(Path(tempfile.mkdtemp(prefix="envgen-bench-")))
        c = harness.Cluster(3, images["node"])
        node0 = c.containers["node0"]
    try:
        subprocess.run([harness.DOCKER, "exec", "-i", node0, "sh", "-c",
                        "cat > /root/hostfile"], input=HOSTFILE, text=True, check=True)
        one(harness.DOCKER, node0, job)  # warm-up: page cache, byte code on every node
        load0 = os.getloadavg()[0]
        times, bad = [], 0
        for i in range(args.runs):
            took, rc, doc = one(harness.DOCKER, node0, job)
            coll = doc.get("collective") or {}
            healthy = rc == 0 and coll.get("ok") is True
            bad += not healthy
            times.append(took)
            steps = ", ".join(f"{s['check']} {s['seconds']:.1f}" for s in doc.get("steps", []))
            print(f"run {i + 1}: {took:.1f} s (exit {rc}, collective "
                  f"{'ok' if healthy else coll.get('summary') or doc.get('error')}) — {steps}",
                  flush=True)
        load1 = os.getloadavg()[0]
    finally:
        if c is not None:
            c.close()
    print(f"median of {args.runs}: {statistics.median(times):.1f} s (min {min(times):.1f}, "
          f"max {max(times):.1f}); load average {load0:.1f} before, {load1:.1f} after, "
          f"{os.cpu_count()} cores")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
