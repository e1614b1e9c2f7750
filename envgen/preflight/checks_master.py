"""The master: MASTER_ADDR resolves and is reachable from every node, and MASTER_PORT is free
on the master and reachable through any firewall — shown with a real listener on the master
port and a real connection from every node, not inferred.

Input: the master's runner, every node's runner, the address and port, each node's source
address when a *_SOCKET_IFNAME picks one. Output: findings, and the nodes that were lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from envgen.doctor.findings import Finding
from envgen.preflight.probe import SSH_PER_THREAD, SSH_THREADS, STEP_DEADLINE
from envgen.preflight.remote import Outcome, Runner, program
from envgen.shellcmd import ssh
from envgen.workers import MISSING, run_all, threads_for

__all__ = ["MasterCheck", "master_node", "on_link", "port_ephemeral", "port_taken", "reach"]


def master_node(master_addr: str, facts: dict[str, dict], resolved: dict[str, list[str]]
                ) -> str | None:
    """The node of the job that is the master: named so, or holding the address it resolves
    to; None when the master is not one of the nodes checked."""
    if master_addr in facts:
        return master_addr
    wanted = set(resolved.get(master_addr) or []) | {master_addr}
    for node, doc in facts.items():
        if wanted & set(doc.get("local_addresses") or []):
            return node
        if doc.get("hostname") == master_addr:
            return node
    return None


def _owner_text(owner: dict, holder: str | None) -> str:
    """Who holds the port, as node_probe's port_owner saw it."""
    proc = f"pid {owner['pid']}: {owner.get('cmd') or '?'}" if owner.get("pid") else None
    how = owner.get("how")
    if how in ("connected", "connection"):
        return (f"an outgoing connection to {owner.get('remote') or '?'} that was given it as "
                f"its local port ({proc or 'its process is not readable here'})")
    if how == "closing connection":
        return (f"a closing connection to {owner.get('remote') or '?'} (TIME_WAIT: no process; "
                "the kernel frees it within a minute)")
    if how == "listening":
        return f"a listener ({proc or holder or 'its process is not readable here'})"
    return proc or holder or "a socket bound to it"


def port_taken(catalog, master: str, port: int, doc: dict) -> Finding | None:
    info = doc.get("port") or {}
    if info.get("free") is not False:
        return None
    holder = info.get("holder")
    owner = info.get("owner") or {}
    who = _owner_text(owner, holder) if (owner or holder) else None
    outgoing = owner.get("how") in ("connected", "connection", "closing connection")
    fix = ("pick a MASTER_PORT outside the ephemeral range (see master-port-ephemeral), e.g. "
           "29500, or reserve it: `sysctl -w net.ipv4.ip_local_reserved_ports=PORT`; the "
           "connection that holds it now ends by itself" if outgoing else
           f"stop what holds port {port} on {master} (a rank of an earlier job still running?), "
           "or pick a free port: MASTER_PORT=<port> (DeepSpeed: --master_port, torchrun: "
           "--master-port)")
    return catalog.finding(
        "master-port-taken",
        f"MASTER_PORT {port} is already in use on the master {master}"
        + (f" (by {who})" if who else "") + f": {info.get('error') or 'bind failed'}",
        {"node": master, "port": port, "error": info.get("error"), "holder": holder,
         "owner": owner},
        fix, ssh(master, "ss", "-tanp", "sport", "=", f":{port}"))


def port_ephemeral(catalog, master: str, port: int, doc: dict) -> Finding | None:
    """master-port-ephemeral when ``port`` lies in the master's ip_local_port_range."""
    span = doc.get("port_range")
    if not (isinstance(span, list) and len(span) == 2 and span[0] <= port <= span[1]):
        return None
    return catalog.finding(
        "master-port-ephemeral",
        f"MASTER_PORT {port} lies in {master}'s ephemeral port range {span[0]}-{span[1]} "
        "(net.ipv4.ip_local_port_range): any outgoing connection there may be given it and "
        "hold it when the job starts",
        {"node": master, "port": port, "port_range": span},
        f"pick a MASTER_PORT below {span[0]} (29500 is torchrun's and DeepSpeed's default), or "
        f"reserve it on {master}: `sysctl -w net.ipv4.ip_local_reserved_ports={port}`",
        ssh(master, "cat", "/proc/sys/net/ipv4/ip_local_port_range"))


def on_link(address: str, doc: dict) -> bool | None:
    """Whether a node (its node_probe facts) has an address in the same network as
    ``address``; None when that cannot be told."""
    import ipaddress

    try:
        target = ipaddress.ip_address(address)
    except ValueError:
        return None
    nets = []
    for info in (doc.get("interfaces") or {}).values():
        for cidr in (info.get("ipv4") or []) + (info.get("ipv6") or []):
            try:
                nets.append(ipaddress.ip_interface(cidr).network)
            except ValueError:
                continue
    if not nets:
        return None
    return any(target in n for n in nets if n.version == target.version)


@dataclass(frozen=True)
class MasterCheck:
    findings: tuple[Finding, ...]
    lost: tuple[str, ...]  # nodes that stopped answering during the check
    listened: bool  # the listener ran on the master (False: it could not be started)


def reach(catalog, master_runner: Runner, runners: list[Runner], *, master_addr: str,
          port: int, sources: dict[str, str | None], timeout: float, listen_seconds: float,
          picked: str | None = None, facts: dict[str, dict] | None = None,
          candidates: tuple[str, ...] = ()) -> MasterCheck:
    """A listener on the master port, then a connection to MASTER_ADDR:MASTER_PORT from every
    node (from the *_SOCKET_IFNAME address where one is set). ``picked``: how the launcher
    chose the address (DeepSpeed's `hostname -I`), said in the findings; ``facts``: the nodes'
    facts, to tell an address on no network of the node from a dropped port."""
    text = program("node_probe.py")
    listener = master_runner.start(text, ["listen", "--port", str(port), "--seconds",
                                          f"{listen_seconds:.0f}", "--expect",
                                          str(len(runners))])
    first = listener.first_json(timeout)
    if not first or not first.get("listening"):
        ended = listener.kill()
        if first and "listening" in first:
            finding = port_taken(catalog, master_runner.node, port,
                                 {"port": {"free": False, "error": first.get("error"),
                                           "holder": first.get("holder")}})
            return MasterCheck((finding,) if finding else (), (), False)
        return MasterCheck((catalog.finding(
            "node-lost", f"the master {master_runner.node} stopped answering: the listener on "
            f"port {port} did not start within {timeout:.0f} s",
            {"node": master_runner.node, "stderr": ended.stderr[-500:]},
            f"check that {master_runner.node} is up (`{ssh(master_runner.node, 'true')}`) and "
            "run the preflight again", None),), (master_runner.node,), False)

    def one(runner: Runner):
        argv = ["connect", "--host", master_addr, "--port", str(port), "--timeout",
                f"{max(1.0, timeout - 5):.0f}"]
        if sources.get(runner.node):
            argv += ["--source", sources[runner.node]]
        return runner.run(text, argv, timeout=timeout + 10)

    limit = STEP_DEADLINE * (timeout + 10)
    try:
        outcomes = run_all(one, runners, workers=threads_for(
            len(runners), per_thread=SSH_PER_THREAD, low=SSH_THREADS[0], high=SSH_THREADS[1]),
            deadline=time.monotonic() + limit, name="envgen-connect")
    finally:
        listener.kill()
    out, lost = [], []
    for runner, outcome in zip(runners, outcomes, strict=True):
        if outcome is MISSING:
            outcome = Outcome(runner.node, None, "", f"not answered within {limit:g} s, the "
                              f"limit of this step on all {len(runners)} nodes", limit, True)
        doc = outcome.last_json()
        if doc is None:
            lost.append(runner.node)
            why = (f"no answer within {int(timeout + 10)} s" if outcome.timed_out
                   else f"ssh exit {outcome.rc}")
            out.append(catalog.finding(
                "node-lost", f"{runner.node} stopped answering during the master check ({why})",
                {"node": runner.node, "stderr": outcome.stderr[-500:]},
                f"check {runner.node} (`{ssh(runner.node, 'true')}`); the other nodes were still "
                "checked", None))
            continue
        if doc.get("ok"):
            continue
        out.append(_connect_finding(catalog, runner.node, doc, master_addr, port,
                                    sources.get(runner.node), picked,
                                    (facts or {}).get(runner.node), candidates))
    return MasterCheck(tuple(out), tuple(lost), True)


def _connect_finding(catalog, node: str, doc: dict, master_addr: str, port: int,
                     source: str | None, picked: str | None = None,
                     node_facts: dict | None = None, candidates: tuple[str, ...] = ()
                     ) -> Finding:
    from envgen.preflight.checks_names import is_loopback

    kind_of = doc.get("kind")
    error = doc.get("error") or kind_of
    evidence = {"node": node, "master_addr": master_addr, "port": port, "error": error,
                "failure": kind_of, "source": source, "seconds": doc.get("seconds"),
                "picked": picked, "address": doc.get("address")}
    address = doc.get("address")
    if address and is_loopback(address) and not is_loopback(master_addr):
        return catalog.finding(
            "name-loopback",
            f"{node} → {master_addr}:{port}: {master_addr} resolves to {address} on {node}, a "
            f"loopback answer, so {node} connected to itself ({error}); not a firewall",
            evidence, f"remove the loopback line for {master_addr} from {node}:/etc/hosts (or "
            "map it to the master's network address there)",
            ssh(node, "getent", "ahosts", master_addr))
    linked = on_link(master_addr, node_facts) if node_facts else None
    if picked and linked is False and kind_of in ("timeout", "unreachable", "other"):
        shared = next((c for c in candidates if on_link(c, node_facts)), None)
        addr = shared or "ADDR"
        return catalog.finding(
            "master-unreachable",
            f"{node} cannot reach {master_addr}, the master address the launcher picks "
            f"({picked}): {node} has no address on that network ({error})",
            evidence | {"shared": shared}, f"give the launcher an address every node "
            f"reaches: `deepspeed --master_addr {addr} ...` (and --master-addr {addr} here)"
            + (f" — {addr} is the master's address on the network {node} shares with it"
               if shared else ", the master's address on the network the nodes share")
            + "; or make the shared network's interface come first in `hostname -I` on the "
            "master",
            ssh(node, "ip", "route", "get", master_addr))
    if source and kind_of in ("bind", "unreachable", "timeout"):
        return catalog.finding(
            "ifname-unreaching",
            f"{node}: from {source} (the address its *_SOCKET_IFNAME selects) "
            f"{master_addr}:{port} cannot be reached: {error}",
            evidence, "set *_SOCKET_IFNAME to an interface on the network the master is on",
            ssh(node, "ip", "route", "get", doc.get("address") or master_addr))
    if kind_of in ("resolve", "unreachable"):
        return catalog.finding(
            "master-unreachable", f"{node} cannot reach the master {master_addr}: {error}",
            evidence, f"make {master_addr} resolvable and routable from {node}, or set "
            "MASTER_ADDR to the master's address on the network all nodes share",
            ssh(node, "getent", "hosts", master_addr))
    blocked = "dropped (no answer: a firewall drops it)" if kind_of == "timeout" else \
        "refused although a listener was running (a firewall rejects it)" \
        if kind_of == "refused" else error
    return catalog.finding(
        "master-port-blocked",
        f"{node} → {master_addr}:{port}: {blocked}; the ranks cannot rendezvous",
        evidence, f"open TCP port {port} (and the ports gloo/NCCL pick, or a fixed range) "
        f"on {master_addr} for the job's nodes, e.g. `iptables -I INPUT -p tcp --dport {port} "
        "-j ACCEPT` / your cloud security group, or pick a MASTER_PORT that is open",
        None)
