"""The collective as a check: whether it can run (every node answered, torch imports, no error
finding that already dooms it), running it with the launcher's variables, and its result in
words — collective-ok with its time and bus bandwidth, collective-hang naming the ranks that
did not arrive, collective-failed with the stage and the peer a rank was stuck connecting to.

Input: the catalog, the job, the options, one runner per node, the snapshots and the findings so
far. Output: the :class:`~envgen.preflight.collective.CollectiveResult` (or None when it was not
run) and its findings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from envgen.doctor.findings import Finding
from envgen.preflight import checks_same
from envgen.preflight.nodes import Job
from envgen.preflight.remote import Runner
from envgen.preflight.result import Options

__all__ = ["collective_findings", "doomed", "explain", "run_checked"]


_DOOMING = ("ifname-missing", "ifname-unreaching", "hostname-loopback", "name-loopback",
            "master-unreachable", "master-port-blocked", "master-port-taken",
            "deepspeed-env-line", "host-unresolved", "port-dropped", "launcher-master-loopback",
            "launcher-needs")
_BACKEND_VARS = {"gloo": ("GLOO_SOCKET_IFNAME",), "nccl": ("NCCL_SOCKET_IFNAME",)}


def doomed(findings: list[Finding], backend: str) -> Finding | None:
    for f in findings:
        if f.severity != "error" or f.kind not in _DOOMING:
            continue
        var = f.evidence.get("variable") if f.kind == "ifname-missing" else None
        if var and var not in _BACKEND_VARS.get(backend, ()):
            continue
        return f
    return None


def run_checked(catalog, job: Job, options: Options, runners: dict[str, Runner],
                names: list[str], status: dict[str, str], snaps: dict, master_addr: str,
                mode: str, findings: list[Finding], exported: dict[str, str],
                progress: Callable[[str], None], *, port: int | None = None,
                warm: dict[str, Any] | None = None, no_master: bool = False) -> Any:
    """The all_reduce across ``names`` (the first is rank 0, which hosts the store: the master
    node) at ``master_addr``:``port`` (the job's port when None) with the launcher's variables,
    or None with a check-skipped finding saying why not; ``warm``: node → its rank started
    ahead (collective.prewarm), used instead of a new one; ``no_master``: the master address is
    none of the nodes'."""
    from envgen.preflight.collective import run_collective

    if options.local:
        findings.append(catalog.finding(
            "check-skipped", "the collective needs every node of the job: run the preflight "
            "without --local from the launching node", {}, "", None))
        return None
    gpus = [checks_same.gpu_count(snaps.get(n)) or 0 for n in names]
    backend = options.backend
    if backend == "auto":
        cuda = all(snaps[n].torch_cuda for n in names if n in snaps)
        backend = "nccl" if mode == "gpu" and gpus and min(gpus) > 0 and cuda else "gloo"
    left_out = [n for n in names if status[n] != "ok"]
    no_torch = [n for n in names if n in snaps and (
        not snaps[n].torch or (snaps[n].import_errors or {}).get("torch"))]
    why, because = None, None
    if no_master:
        why = (f"the master address {master_addr} is none of the nodes': no rank would host "
               "the rendezvous store there")
    elif left_out:
        why = f"{', '.join(left_out)} could not be checked"
    elif no_torch:
        why = f"torch does not import on {', '.join(no_torch)}"
    elif (because := doomed(findings, backend)) is not None:
        said = because.summary if len(because.summary) <= 160 else \
            because.summary[:159].rsplit(" ", 1)[0] + " …"
        why = (f"the error finding {because.kind} ({said}) already makes the "
               f"{backend} all_reduce fail; running it would only wait for its time-out")
    if why:
        findings.append(catalog.finding(
            "check-skipped", f"the collective was not run: {why}",
            {"reason": why, "because": because.kind if because else None},
            "fix the findings above and run the preflight again", None))
        return None
    nproc = min(gpus) if backend == "nccl" else 1
    world = len(names) * nproc
    progress(f"running a {backend} all_reduce across {world} rank(s) on {len(names)} node(s)")
    result = run_collective([runners[n] for n in names], master_addr=master_addr,
                            master_port=job.master_port if port is None else port,
                            backend=backend, timeout=options.collective_timeout, nproc=nproc,
                            size_mb=options.size_mb, env=exported, warm=warm)
    findings.extend(collective_findings(catalog, result))
    return result


_PEER = re.compile(r"\[([0-9A-Fa-f.:]+)\]:(\d+)|(\d{1,3}(?:\.\d{1,3}){3}):(\d+)")


def explain(result) -> str:
    """Why a collective failed, in words: who never joined, who was stuck connecting to
    which address (read from gloo's / NCCL's / the store's own error text), who timed out in
    the operation itself."""
    from envgen.preflight.checks_names import is_loopback

    parts: list[str] = []
    if result.missing:
        parts.append("never joined: " + ", ".join(f"rank {r} ({n})" for r, n in result.missing))
    connecting: dict[str, list[str]] = {}
    in_op: list[str] = []
    for r in result.ranks:
        if r.ok or not r.error:
            continue
        text = r.error + " " + result.node_errors.get(r.node, "")
        if r.failed_stage == "allreduce" and r.timed_out:
            in_op.append(f"rank {r.rank} ({r.node})")
            continue
        m = _PEER.search(text)
        if m and re.search(r"connect|refused|timed? ?out|unreachable|reset|closed", text, re.I):
            host = m.group(1) or m.group(3)
            port = m.group(2) or m.group(4)
            connecting.setdefault(f"{host}:{port}", []).append(f"rank {r.rank} ({r.node})")
        elif "Unable to find address" in text:
            connecting.setdefault("an address for its interface", []).append(
                f"rank {r.rank} ({r.node})")
    for peer, who in connecting.items():
        note = (" — a loopback address: a node announced its own name's 127.x answer "
                "(see name-loopback / hostname-loopback)"
                if is_loopback(peer.rsplit(":", 1)[0].strip("[]")) else "")
        parts.append(f"stuck connecting to {peer}: {', '.join(who)}{note}")
    if in_op:
        parts.append("timed out in the all_reduce itself: " + ", ".join(in_op))
    return "; ".join(parts)


def collective_findings(catalog, result) -> list[Finding]:
    """collective-ok (time, bandwidth), collective-hang (the ranks that did not arrive) or
    collective-failed (the stage and error, or the wrong value), with :func:`explain`."""
    doc = result.to_dict()
    if result.ok:
        bw = result.bandwidth or {}
        said = ""
        if bw.get("busbw_gbps") is not None:
            said = (f"; {bw.get('bytes', 0) / 2**20:.0f} MiB all_reduce: median "
                    f"{bw.get('seconds_median', 0) * 1000:.1f} ms, bus bandwidth "
                    f"{bw['busbw_gbps']:.2f} GB/s")
        return [catalog.finding(
            "collective-ok",
            f"{result.backend} all_reduce across {result.world_size} ranks returned the "
            f"expected sum on every rank in {result.seconds:.1f} s{said}",
            doc, "", None)]
    why = explain(result)
    doc["why"] = why
    if result.missing:
        who = ", ".join(f"rank {r} ({n})" for r, n in result.missing)
        return [catalog.finding(
            "collective-hang",
            f"the {result.backend} rendezvous hung: {who} did not arrive within "
            f"{result.seconds:.0f} s while the others waited" + (f" ({why})" if why else ""),
            doc, "check the named node: is its rank started (ssh, the launcher's command), "
            "can it reach MASTER_ADDR:MASTER_PORT, is *_SOCKET_IFNAME right there?", None)]
    bad = [r for r in result.ranks if not r.ok]
    said = "; ".join(f"rank {r.rank} ({r.node}) at {r.stage_reached}: "
                     f"{(r.error or ('timed out' if r.timed_out else 'wrong value'))[:300]}"
                     for r in bad[:4])
    return [catalog.finding(
        "collective-failed", f"the {result.backend} all_reduce failed"
        + (f" — {why}" if why else "") + f": {said}",
        doc, "read the error of the first failing rank: an interface name, a port, a "
        "firewall between the nodes or different torch builds are the usual causes", None)]

