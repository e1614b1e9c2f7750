"""Name checks: every host of the job resolves, to the same address from every node, and no
node's own name points back at itself through a loopback address (the /etc/hosts trap).

Input: the job, what the launching node resolved, and each node's ``facts`` (node_probe.py:
``resolve``, ``hostname``, ``env``). Output: findings (envgen.doctor.findings.Finding).
"""

from __future__ import annotations

import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from envgen.doctor.findings import Finding

__all__ = ["from_here", "from_nodes", "is_loopback", "resolve_here"]


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def resolve_here(names: list[str], timeout: float = 10) -> dict[str, tuple[list[str], str | None]]:
    """name → (addresses, error) as this machine resolves it (getaddrinfo, IPv4 first), each
    lookup bounded by ``timeout`` (a resolver that hangs reads as an error)."""

    def one(name: str) -> tuple[list[str], str | None]:
        try:
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError, OSError) as exc:
            return [], str(exc)
        found: list[str] = []
        for family in (socket.AF_INET, socket.AF_INET6):
            for info in infos:
                if info[0] == family and info[4][0] not in found:
                    found.append(info[4][0])
        return found, None

    out: dict[str, tuple[list[str], str | None]] = {}
    if not names:
        return out
    pool = ThreadPoolExecutor(max_workers=min(16, len(names)))
    futures = {name: pool.submit(one, name) for name in names}
    for name, fut in futures.items():
        try:
            out[name] = fut.result(timeout=timeout)
        except FutureTimeout:
            out[name] = [], f"no answer from the resolver within {timeout:.0f} s"
    pool.shutdown(wait=False)
    return out


def from_here(catalog, resolved: dict[str, tuple[list[str], str | None]], launcher: str,
              job_names: set[str]) -> list[Finding]:
    """host-unresolved for each job host the launching node cannot resolve."""
    out = []
    for name, (_, error) in resolved.items():
        if error is None:
            continue
        role = "a node of the job" if name in job_names else "the master address"
        out.append(catalog.finding(
            "host-unresolved", f"{name} ({role}) does not resolve on {launcher}, the launching "
            f"node: {error}",
            {"host": name, "node": launcher, "error": error},
            f"fix the name (a typo in the hostfile or --hosts?) or make it resolvable on every "
            f"node: add it to DNS or to /etc/hosts everywhere; check with `getent hosts {name}`",
            f"getent hosts {name}"))
    return out


def from_nodes(catalog, facts: dict[str, dict], names: list[str], *, multi_node: bool,
               ifname_set: bool) -> list[Finding]:
    """What each node resolves: names it cannot resolve, names that resolve to different
    addresses on different nodes, and own names that resolve only to loopback."""
    out: list[Finding] = []
    for name in names:
        seen: dict[str, list[str]] = {}
        failed: dict[str, str] = {}
        for node, doc in facts.items():
            entry = (doc.get("resolve") or {}).get(name) or {}
            if entry.get("error") or not entry.get("addresses"):
                failed[node] = entry.get("error") or "no address"
            else:
                seen[node] = list(entry["addresses"])
        for node, error in failed.items():
            out.append(catalog.finding(
                "host-unresolved", f"{name} does not resolve on {node}: {error}",
                {"host": name, "node": node, "error": error},
                f"make {name} resolvable on {node} (DNS search domain, /etc/hosts); the "
                "launcher and the ranks on every node look it up",
                f"ssh {node} getent hosts {name}"))
        firsts = {node: _first_remote(addrs) for node, addrs in seen.items()}
        distinct = {a for a in firsts.values() if a is not None}
        if len(distinct) > 1:
            out.append(catalog.finding(
                "host-resolves-differently",
                f"{name} resolves to different addresses on different nodes: "
                + ", ".join(f"{node} → {addr}" for node, addr in sorted(firsts.items())),
                {"host": name, "addresses": {n: seen[n] for n in sorted(seen)}},
                f"make every node resolve {name} to the same reachable address (one DNS, or "
                "the same /etc/hosts lines on every node)", None))
    for node, doc in facts.items():
        own = doc.get("hostname")
        entry = (doc.get("resolve") or {}).get(own) or {} if own else {}
        addrs = entry.get("addresses") or []
        if own and addrs and all(is_loopback(a) for a in addrs):
            severe = multi_node and not ifname_set
            out.append(catalog.finding(
                "hostname-loopback",
                f"{node}'s own name {own} resolves only to {', '.join(addrs)} there: gloo and "
                "NCCL pick the address to announce from it, and the other nodes cannot "
                "connect to a loopback address",
                {"node": node, "hostname": own, "addresses": addrs},
                f"map {own} to the node's network address in {node}:/etc/hosts (replace the "
                "127.0.1.1 line), or set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the "
                "interface the nodes share",
                None, severity="error" if severe else None))
    return out


def _first_remote(addrs: list[str]) -> str | None:
    """The address a name means from a node, loopback addresses left out: a node's own name
    resolving to 127.0.1.1 there is the loopback trap, a check of its own."""
    kept = [a for a in addrs if not is_loopback(a)]
    return kept[0] if kept else None
