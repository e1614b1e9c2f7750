"""Name checks: every host of the job resolves, to the same address from every node, and no
node's own name points back at itself through a loopback address (the /etc/hosts trap).

Input: the job, what the launching node resolved, and each node's ``facts`` (node_probe.py:
``resolve``, ``hostname``, ``env``). Output: findings (envgen.doctor.findings.Finding).
"""

from __future__ import annotations

import ipaddress
import socket

from envgen.doctor.findings import Finding
from envgen.shellcmd import command, ssh

__all__ = ["from_here", "from_nodes", "is_loopback", "resolve_here"]


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


# name lookups: one thread per LOOKUPS_PER_THREAD names, LOOKUP_THREADS[0] to [1] at a time
LOOKUPS_PER_THREAD = 16
LOOKUP_THREADS = (16, 256)


def resolve_here(names: list[str], timeout: float = 10) -> dict[str, tuple[list[str], str | None]]:
    """name → (addresses, error) as this machine resolves it (getaddrinfo, IPv4 first).

    All the lookups together take at most ``timeout`` seconds, whatever their number: they
    run on daemon threads, more of them the more names there are (see LOOKUP_THREADS), and a
    name with no answer by then reads as an error (a resolver that hangs). A lookup still
    blocked in the resolver is abandoned, never waited for: neither the deadline nor an
    interrupt waits on it."""
    import time

    from envgen.workers import MISSING, run_all, threads_for

    started: set[str] = set()

    def one(name: str) -> tuple[list[str], str | None]:
        started.add(name)
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

    if not names:
        return {}
    threads = threads_for(len(names), per_thread=LOOKUPS_PER_THREAD, low=LOOKUP_THREADS[0],
                          high=LOOKUP_THREADS[1])
    answers = run_all(one, names, workers=threads, deadline=time.monotonic() + timeout,
                      name="envgen-resolve")
    out: dict[str, tuple[list[str], str | None]] = {}
    for name, answer in zip(names, answers, strict=True):
        if answer is not MISSING:
            out[name] = answer
        elif name in started:
            out[name] = [], f"no answer from the resolver within {timeout:g} s"
        else:
            out[name] = [], (f"not looked up: the {len(names)} lookups ({threads} at a time) "
                             f"may take {timeout:g} s in all (--connect-timeout), and the "
                             "resolver had not answered the earlier ones by then")
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
            f"node: add it to DNS or to /etc/hosts everywhere; check with "
            f"`{command('getent', 'hosts', name)}`",
            command("getent", "hosts", name)))
    return out


def from_nodes(catalog, facts: dict[str, dict], names: list[str], *, multi_node: bool,
               ifname_set: bool, master: str | None = None) -> list[Finding]:
    """What each node resolves: names it cannot resolve, names that resolve to different
    addresses on different nodes, own names whose first answer is loopback, and other names
    answered with loopback (an error for ``master``, the address the ranks connect to; a
    warning for a name the ranks do not look up)."""
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
                ssh(node, "getent", "hosts", name)))
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
        resolved = doc.get("resolve") or {}
        entry = resolved.get(own) or {} if own else {}
        addrs = entry.get("addresses") or []
        # gloo binds the first address of its own name that it can bind (not any of them):
        # a 127.0.1.1 line above the real one is the trap even when the real one follows
        if own and addrs and is_loopback(addrs[0]):
            severe = multi_node and not ifname_set
            rest = [a for a in addrs if not is_loopback(a)]
            out.append(catalog.finding(
                "hostname-loopback",
                f"{node}'s own name {own} resolves first to {addrs[0]} there (a loopback "
                "answer" + (f"; {', '.join(rest)} comes after it" if rest else "") + "): gloo "
                "and NCCL pick the address to announce from it, and the other nodes cannot "
                "connect to a loopback address",
                {"node": node, "hostname": own, "addresses": addrs},
                f"map {own} to the node's network address in {node}:/etc/hosts (replace the "
                f"{addrs[0]} line, or put the real one above it), or set GLOO_SOCKET_IFNAME / "
                "NCCL_SOCKET_IFNAME to the interface the nodes share",
                ssh(node, "getent", "ahosts", own), severity="error" if severe else None))
        for name in names:
            if name in (node, own):
                continue
            got = (resolved.get(name) or {}).get("addresses") or []
            if got and is_loopback(got[0]):
                out.append(catalog.finding(
                    "name-loopback",
                    f"{name} resolves first to {got[0]} on {node}, a loopback answer: {node} "
                    f"would connect to itself, not to {name} (an /etc/hosts line there names "
                    f"{name} with a loopback address)",
                    {"node": node, "host": name, "addresses": got},
                    f"remove the loopback line for {name} from {node}:/etc/hosts (or map "
                    f"{name} to its network address there)",
                    ssh(node, "getent", "ahosts", name),
                    severity=None if master is None or name == master else "warning"))
    return out


def _first_remote(addrs: list[str]) -> str | None:
    """The address a name means from a node, loopback addresses left out: a node's own name
    resolving to 127.0.1.1 there is the loopback trap, a check of its own."""
    kept = [a for a in addrs if not is_loopback(a)]
    return kept[0] if kept else None
