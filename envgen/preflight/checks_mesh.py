"""Pairwise TCP reachability: a listener on every node, a connection from every node to every
other, so that a port a firewall drops is traced to the one node that drops it (every other
node times out to it while they reach each other) instead of to the nodes that waited for it.

Input: node → runner, the port (MASTER_PORT, or 0: a port from each node's ephemeral range,
where gloo's and NCCL's own listeners are), the time limit of one connection. Output:
:class:`Mesh` — per (source, target) whether it connected and how it failed — and its
findings (port-dropped naming the node, or the pairs that fail where no one node explains
them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from envgen.doctor.findings import Finding
from envgen.preflight.probe import SSH_PER_THREAD, SSH_THREADS, STEP_DEADLINE
from envgen.preflight.remote import Outcome, Runner, program
from envgen.shellcmd import ssh
from envgen.workers import MISSING, run_all, threads_for

__all__ = ["Mesh", "analyse", "mesh"]


@dataclass(frozen=True)
class Mesh:
    port: int  # as asked (0: each node's own ephemeral port)
    ports: dict[str, int]  # node → the port its listener got
    links: dict[tuple[str, str], dict[str, Any]]  # (source, target) → node_probe connect
    not_listening: dict[str, str] = field(default_factory=dict)  # node → why

    def to_dict(self) -> dict[str, Any]:
        return {"port": self.port, "ports": dict(self.ports),
                "links": [{"from": s, "to": t, "ok": r.get("ok"), "failure": r.get("kind"),
                           "error": r.get("error")} for (s, t), r in self.links.items()],
                "not_listening": dict(self.not_listening)}


def mesh(runners: dict[str, Runner], port: int, timeout: float) -> Mesh:
    """Listen on ``port`` on every node, then connect from every node to every other one."""
    text = program("node_probe.py")
    nodes = list(runners)
    listeners = {n: runners[n].start(text, ["listen", "--port", str(port), "--seconds",
                                            f"{timeout * 2 + 30:.0f}"]) for n in nodes}
    ports: dict[str, int] = {}
    not_listening: dict[str, str] = {}
    links: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + timeout + 10
        for n, running in listeners.items():
            first = running.first_json(max(0.5, deadline - time.monotonic()))
            if first and first.get("listening"):
                ports[n] = int(first["port"])
            else:
                not_listening[n] = (first or {}).get("error") or "the listener did not start"

        def one(source: str) -> Outcome:
            targets = ",".join(f"{t}:{ports[t]}" for t in nodes if t != source and t in ports)
            return runners[source].run(text, ["reach", "--targets", targets, "--timeout",
                                              f"{timeout:g}"], timeout=timeout + 15)

        sources = [n for n in nodes if any(t != n for t in ports)]
        limit = STEP_DEADLINE * (timeout + 15)
        outcomes = run_all(one, sources, workers=threads_for(
            len(sources), per_thread=SSH_PER_THREAD, low=SSH_THREADS[0], high=SSH_THREADS[1]),
            deadline=time.monotonic() + limit, name="envgen-mesh")
    finally:
        for running in listeners.values():
            running.stop()
    for source, outcome in zip(sources, outcomes, strict=True):
        doc = outcome.last_json() if outcome is not MISSING else None
        for r in (doc or {}).get("reach") or []:
            links[(source, str(r.get("host")))] = r
        if doc is None:
            for t in ports:
                if t != source:
                    links[(source, t)] = {"ok": None, "kind": "lost",
                                          "error": "no answer from the source node"}
    return Mesh(port, ports, links, not_listening)


def analyse(catalog, result: Mesh, *, what: str) -> list[Finding]:
    """port-dropped for each node every other node fails to reach while they reach others;
    for a source that reaches nobody, its outgoing connections; else the failing pairs."""
    nodes = sorted({s for s, _ in result.links} | {t for _, t in result.links})
    failed = {k for k, r in result.links.items() if r.get("ok") is False}
    if not failed:
        return []
    out: list[Finding] = []
    explained: set[tuple[str, str]] = set()
    for target in nodes:
        incoming = [(s, target) for s in nodes if (s, target) in result.links]
        bad = [k for k in incoming if k in failed]
        others_fine = any(r.get("ok") for (s, t), r in result.links.items()
                          if t != target and s != target)
        if incoming and len(bad) == len(incoming) and (others_fine or len(nodes) == 2):
            how = {result.links[k].get("kind") for k in bad}
            port = result.ports.get(target, result.port)
            verb = "drops" if how == {"timeout"} else "refuses" if how == {"refused"} \
                else "does not accept"
            out.append(catalog.finding(
                "port-dropped",
                f"{target} {verb} incoming TCP on {what} (port {port} there): "
                f"{', '.join(s for s, _ in bad)} cannot connect to it"
                + (" while the other nodes reach each other" if others_fine else "")
                + f" ({', '.join(sorted(str(h) for h in how))})",
                {"node": target, "port": port, "from": [s for s, _ in bad],
                 "failures": sorted(str(h) for h in how), "mesh": result.to_dict()},
                f"open {what} on {target}'s firewall for the job's nodes (e.g. `iptables -I "
                f"INPUT -p tcp -s <node subnet> --dport {port} -j ACCEPT`, or its cloud "
                "security group); the other nodes are not the cause",
                ssh(target, "iptables", "-S", "INPUT")))
            explained |= set(bad)
    rest = sorted(failed - explained)
    if rest:
        said = ", ".join(f"{s} → {t} ({result.links[(s, t)].get('kind')})" for s, t in rest)
        out.append(catalog.finding(
            "port-dropped", f"connections on {what} fail between these nodes: {said}",
            {"pairs": [list(k) for k in rest], "mesh": result.to_dict()},
            "check the firewalls and routes between the named pairs (both directions)", None))
    return out
