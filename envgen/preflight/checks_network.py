"""Network settings on every node: the interface NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME /
TP_SOCKET_IFNAME name exists there with an address, the NCCL knobs that are set, /dev/shm and
the memlock limit.

Input: node → node_probe facts, the variables the launch exports to every node. Output:
findings, and per node the address each *_SOCKET_IFNAME selects (for the reachability check).

The name rules are the libraries' own: NCCL_SOCKET_IFNAME is a comma list of prefixes, ``^``
excludes, ``=`` asks for exact names (NCCL's environment-variable docs); gloo's
GLOO_SOCKET_IFNAME a comma list of exact names, each of which must exist (torch's
ProcessGroupGloo); TP_SOCKET_IFNAME one exact name (TensorPipe). The citations are in
matrix/curated/preflight.toml ``[ifname]``.
"""

from __future__ import annotations

from envgen.doctor.findings import Finding
from envgen.shellcmd import ssh

__all__ = ["IFNAME_VARS", "effective_env", "interfaces", "matching", "settings"]

IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def effective_env(node_env: dict[str, str] | None, forwarded: dict[str, str]) -> dict[str, str]:
    """The variables a rank on the node sees: the node's own, overridden by those the launch
    exports."""
    return {**(node_env or {}), **forwarded}


def interfaces(doc: dict) -> dict[str, list[str]]:
    """Interface → its addresses (IPv4 first, without the prefix length)."""
    out = {}
    for name, info in (doc.get("interfaces") or {}).items():
        addrs = [a.split("/", 1)[0] for a in (info.get("ipv4") or []) + (info.get("ipv6") or [])]
        out[name] = addrs
    return out


def matching(var: str, spec: str, ifaces: dict[str, list[str]]) -> list[str]:
    """The interfaces (with an address) that ``var=spec`` selects on a node."""
    with_addr = [n for n, addrs in ifaces.items() if addrs]
    if var != "NCCL_SOCKET_IFNAME":
        wanted = [s.strip() for s in spec.split(",") if s.strip()]
        return [w for w in wanted if w in with_addr]
    text = spec.strip()
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    parts = [p.strip() for p in text.split(",") if p.strip()]

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in parts)

    if exclude:
        return [n for n in with_addr if not hit(n) and n != "lo"]
    return [n for n in with_addr if hit(n)]


def missing_everywhere(var: str, spec: str, facts: dict[str, dict]) -> bool:
    """Whether ``spec`` selects no interface on any node (a name that exists nowhere)."""
    return all(not matching(var, spec, interfaces(doc)) for doc in facts.values())


def settings(catalog, facts: dict[str, dict], forwarded: dict[str, str], *, mode: str,
             origins: dict[str, str] | None = None
             ) -> tuple[list[Finding], dict[str, dict[str, str]]]:
    """(findings, node → {var: the IPv4/IPv6 address the variable selects there}).
    ``origins``: where an exported variable comes from (an environment file's line), named in
    the finding and its fix."""
    origins = origins or {}
    out: list[Finding] = []
    chosen: dict[str, dict[str, str]] = {}
    knobs: dict[str, dict[str, str]] = {}
    for node, doc in facts.items():
        env = effective_env(doc.get("env"), forwarded)
        ifaces = interfaces(doc)
        chosen[node] = {}
        for var in IFNAME_VARS:
            spec = env.get(var)
            if not spec:
                continue
            hits = matching(var, spec, ifaces)
            if hits:
                chosen[node][var] = ifaces[hits[0]][0]
                continue
            have = ", ".join(f"{n} ({', '.join(a)})" for n, a in ifaces.items() if a) or "none"
            origin = origins.get(var) if var in forwarded else None
            where = (f" (from {origin}, which the launcher exports to every rank)"
                     if origin and " line " in origin else f" (from {origin})" if origin else "")
            fix = (f"edit {origin}: set {var} to the interface the nodes share (on {node}: "
                   f"{_suggest(ifaces)}), or remove the line" if origin and " line " in origin
                   else f"set {var} to the interface the nodes share (on {node}: "
                   f"{_suggest(ifaces)})")
            out.append(catalog.finding(
                "ifname-missing",
                f"{node}: {var}={spec}{where} selects no interface with an address there (it "
                f"has: {have})",
                {"node": node, "variable": var, "value": spec, "origin": origin,
                 "interfaces": {n: a for n, a in ifaces.items()}},
                f"{fix}; names must exist on every node — check with `ip -br addr`",
                ssh(node, "ip", "-br", "addr")))
        for name in catalog.nccl_settings:
            if name in env and name not in IFNAME_VARS:
                knobs.setdefault(name, {})[node] = env[name]
        shm = doc.get("shm") or {}
        total = shm.get("total_bytes")
        if isinstance(total, int) and total < catalog.shm_min_bytes:
            out.append(catalog.finding(
                "shm-small",
                f"{node}: /dev/shm is {_size(total)} (below {_size(catalog.shm_min_bytes)}): "
                "NCCL's shared-memory transport and DataLoader workers fail with 'Bus error' "
                "or 'failed to extend /dev/shm' when it fills",
                {"node": node, "shm_bytes": total, "min_bytes": catalog.shm_min_bytes},
                catalog.shm_fix, None))
        memlock = doc.get("memlock") or {}
        soft = memlock.get("soft")
        if mode == "gpu" and env.get("NCCL_IB_DISABLE") != "1" and isinstance(soft, int):
            out.append(catalog.finding(
                "memlock-limited",
                f"{node}: the locked-memory limit is {_size(soft)}, not unlimited: NCCL over "
                "InfiniBand / RoCE cannot register its buffers",
                {"node": node, "memlock_soft": soft, "memlock_hard": memlock.get("hard")},
                catalog.memlock_fix, None))
    out += limits_differ(catalog, facts)
    if knobs:
        said = "; ".join(f"{k}=" + ", ".join(f"{v} on {n}" for n, v in per.items())
                         for k, per in sorted(knobs.items()))
        out.append(catalog.finding(
            "nccl-settings", f"NCCL settings in effect: {said}",
            {"settings": knobs, "meaning": {k: catalog.nccl_settings[k] for k in knobs}},
            "check they are meant for this cluster (a leftover NCCL_IB_DISABLE=1 or "
            "NCCL_P2P_DISABLE=1 makes a job run, slowly)", None))
    return out, chosen


def _limit(doc: dict, what: str) -> object:
    if what == "shm":
        return (doc.get("shm") or {}).get("total_bytes")
    return (doc.get(what) or {}).get("soft")


_LIMITS = (("nofile", "open files (ulimit -n)", "ulimit -n"),
           ("memlock", "locked memory (ulimit -l)", "ulimit -l"),
           ("shm", "/dev/shm size", "df -h /dev/shm"))


def limits_differ(catalog, facts: dict[str, dict]) -> list[Finding]:
    """limits-differ: the node(s) whose open-files limit, memlock limit or /dev/shm size is
    not the one most nodes have (only where one value is held by more nodes than any other);
    a /dev/shm already below the threshold is shm-small's, not repeated here."""
    out: list[Finding] = []
    if len(facts) < 2:
        return out
    for key, label, how in _LIMITS:
        values = {n: _limit(d, key) for n, d in facts.items()}
        known = {n: v for n, v in values.items() if v is not None}
        counts: dict[object, int] = {}
        for v in known.values():
            counts[v] = counts.get(v, 0) + 1
        if len(counts) < 2:
            continue
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        # no value held by more nodes than any other: all of them are named
        common = None if ranked[0][1] == ranked[1][1] else ranked[0][0]
        odd = {n: v for n, v in known.items() if v != common}
        if key == "shm":
            odd = {n: v for n, v in odd.items()
                   if not (isinstance(v, int) and v < catalog.shm_min_bytes)}
            if not odd:
                continue

        def show(v: object, key: str = key) -> str:
            return _size(v) if key in ("shm", "memlock") and isinstance(v, int) else str(v)

        said = ", ".join(f"{n}: {show(v)}" for n, v in odd.items())
        most = (f"{show(common)} on the other {len(known) - len(odd)} node"
                f"{'s' if len(known) - len(odd) != 1 else ''}" if common is not None
                else "no value held by most nodes")
        out.append(catalog.finding(
            "limits-differ", f"{label} differs: {said} ({most})",
            {"limit": key, "values": values, "common": common, "odd": sorted(odd)},
            None, ssh(sorted(odd)[0], "sh", "-c", how)))
    return out


def _suggest(ifaces: dict[str, list[str]]) -> str:
    names = [n for n, a in ifaces.items() if a and n != "lo"]
    return ", ".join(names) or "no interface but lo has an address"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
