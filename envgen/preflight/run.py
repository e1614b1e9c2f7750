"""The preflight of a job, in order: launcher variables, names, SSH, the same environment on
every node, network settings, the master address and port, a real collective.

Input: a :class:`~envgen.preflight.nodes.Job`, :class:`~envgen.preflight.result.Options`, the
preflight catalog and the resolver's facts (for the doctor's judgement of each node). Output: a
:class:`~envgen.preflight.result.PreflightResult` — per node what was learnt, the comparison
table, the findings (worst first) and the collective's result. A check stops only where the later
ones cannot run: a node that does not resolve or answer is left out of the later steps and named;
the others go on. The steps live beside this module: snapshots.py (facts and snapshots asked and
judged), checks_*.py (each check), checks_collective.py (the all_reduce as a check).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from envgen.doctor.findings import Finding
from envgen.preflight import (
    checks_launcher,
    checks_master,
    checks_names,
    checks_network,
)
from envgen.preflight.checks_collective import collective_findings, explain, run_checked
from envgen.preflight.collective import prewarm
from envgen.preflight.launcher_view import deepspeed_view, env_file_findings
from envgen.preflight.launchers import (
    interface_findings,
    launch_port,
    launcher_view,
    master_choice,
    needs_findings,
    version_notes,
    with_master,
)
from envgen.preflight.mux import Multiplex, shares
from envgen.preflight.nodes import Job
from envgen.preflight.remote import LocalRunner, Runner, SSHRunner
from envgen.preflight.result import NodeReport, Options, PreflightResult, State
from envgen.preflight.snapshots import ask_nodes, judge_snapshots, reply_finding
from envgen.shellcmd import ssh

# collective_findings and explain: imported from here by earlier callers
__all__ = ["NodeReport", "Options", "PreflightResult", "collective_findings", "explain",
           "preflight"]


def _runners(nodes: list[str], options: Options,
             shared: dict[str, str] | None = None) -> dict[str, Runner]:
    if options.local:
        return {n: LocalRunner(n, options.python) for n in nodes}
    return {n: SSHRunner(n, options.python, connect_timeout=options.connect_timeout,
                         ssh=options.ssh, options=options.ssh_options,
                         control=(shared or {}).get(n)) for n in nodes}


def preflight(job: Job, options: Options, catalog, facts_db=None, *, doctor_catalog=None,
              index_urls=None,
              progress: Callable[[str], None] = lambda _m: None) -> PreflightResult:
    """The checks of ``job``, in order. An interrupt (Ctrl-C, SIGTERM) propagates at once
    with the result so far on the exception's ``partial`` attribute (the CLI prints it).
    Every node's steps share one SSH connection (mux.py), closed at the end."""
    st = State(job, options)
    mux = None if options.local or not shares(options.ssh) else Multiplex(
        options.ssh, options.ssh_options, options.connect_timeout)
    try:
        return _preflight(st, catalog, facts_db, doctor_catalog, index_urls, progress, mux)
    except KeyboardInterrupt as exc:
        from envgen.proc import kill_all

        kill_all()  # the steps' programs, whichever thread waits on them
        exc.partial = st.result(interrupted=st.step)  # type: ignore[attr-defined]
        raise
    finally:
        for running in st.warm.values():  # ranks started ahead that the collective did not use
            running.stop()
        if mux is not None:
            mux.close()


def _deepspeed_launch(job: Job, options: Options) -> bool:
    """Whether DeepSpeed's multi-node runner launches this job when no launcher is named: a
    hostfile of several nodes checked from the launching node (its default launcher, pdsh)."""
    return not options.local and len(job.nodes) > 1 and job.source.startswith("hostfile")


def _exports(st: State, catalog) -> dict[str, str]:
    """The variables every rank will have from the launcher, as the checks and the collective
    use them: the named launcher's exports exactly (``--launcher``; DeepSpeed's for a hostfile
    when none is named), plus --ifname's; else this shell's NCCL_/GLOO_/TORCH_NCCL_ variables
    and the lines of a .deepspeed_env."""
    options = st.options
    cwd, home = options.cwd or Path.cwd(), Path(options.environ.get("HOME") or Path.home())
    asked = {}
    if options.ifname:
        asked = {"GLOO_SOCKET_IFNAME": options.ifname, "NCCL_SOCKET_IFNAME": options.ifname}
    launcher = options.launcher
    if launcher == "auto" and _deepspeed_launch(st.job, options):
        launcher = "deepspeed"
    if launcher != "auto":
        st.rule = catalog.launcher(launcher)
        nproc = options.environ.get("PET_NPROC_PER_NODE", "")  # torchrun's --nproc-per-node
        several = any((n.slots or 1) > 1 for n in st.job.nodes) or (
            nproc.isdigit() and int(nproc) > 1)
        st.view = launcher_view(catalog, st.rule, options.environ, cwd=cwd, home=home,
                                listed=options.listed, several=several)
        exported = {**st.view.exports, **asked}
    else:
        st.view = deepspeed_view(catalog, options.environ, cwd=cwd, home=home)
        files = {k: v for k, v in st.view.exports.items()
                 if " line " in st.view.origins.get(k, "")}
        exported = {**options.forwarded, **files, **asked}
        st.view = replace(st.view, id=None, launcher="the launch (this shell's NCCL_/GLOO_/"
                          "TORCH_NCCL_ variables and the lines of .deepspeed_env)")
        for k in options.forwarded:
            st.view.origins.setdefault(k, "this shell")
    for k in asked:
        st.view.origins[k] = "--ifname"
    return exported


def _master(st: State, catalog, names: list[str], exported: dict[str, str],
            ) -> tuple[str, int, str | None, tuple[str, ...]]:
    """(the master address the ranks will use, its port, how the launcher picked it or None,
    the other addresses `hostname -I` offered); the launcher's findings when it cannot work."""
    job, rule, facts = st.job, st.rule, st.facts
    master_addr = job.master_addr or names[0]
    if rule is None or len(names) < 2:
        return master_addr, job.master_port, None, ()
    first = names[0]
    addr, port, said, why = master_choice(
        rule, first=first, first_facts=facts.get(first), master_addr=master_addr,
        master_from=job.master_from, port=job.master_port, port_from=st.options.port_from,
        environ=st.options.environ, exported=exported)
    st.view = with_master(st.view, addr, said, port)
    if why and rule.master == "option":
        st.findings.append(catalog.finding(
            "launcher-master-loopback",
            f"{rule.name}: every node's torchrun would rendezvous at {addr} ({why}): each node "
            "connects to itself and node 0's store waits for the others until it times out",
            {"master_addr": addr, "why": why, "launcher": rule.id},
            f"start torchrun on every node with `--master-addr {master_addr} --master-port "
            f"{port}` (and give --master-addr {master_addr} here)", None))
        return master_addr, port, None, ()
    if addr is None:
        if first in facts:
            st.findings.append(catalog.finding(
                "master-unreachable",
                f"{rule.name} cannot pick a master address: it takes the first word of "
                f"`hostname -I` on {first}, which gave: {why}",
                {"node": first, "hostname_i": facts[first].get("hostname_i"),
                 "launcher": rule.id},
                "pass the master's address to the launcher: `deepspeed --master_addr ADDR "
                "...` (and --master-addr ADDR here)" if rule.master == "hostname-i" else
                f"give {first} an address `hostname -I` prints (the ranks find their master "
                "there themselves: --master_addr does not reach them)",
                ssh(first, "hostname", "-I")))
        return master_addr, port, None, ()
    if rule.master == "rank0-hostname-i" or (rule.master == "hostname-i"
                                             and job.master_from == "first node"):
        words = (facts[first].get("hostname_i") or {}).get("stdout", "").split()
        return addr, port, said, tuple(words[1:])  # the launcher picked it: said so
    return addr, port, None, ()


def _preflight(st: State, catalog, facts_db, doctor_catalog, index_urls,
               progress: Callable[[str], None], mux: Multiplex | None) -> PreflightResult:
    from envgen.errors import UsageError

    job, options, findings = st.job, st.options, st.findings
    for summary, evidence in _launcher_problems(job):
        findings.append(catalog.finding(
            "launcher-vars-inconsistent", summary, evidence,
            "make the launcher variables agree (WORLD_SIZE = NNODES × NPROC_PER_NODE, each "
            "RANK below WORLD_SIZE) or unset them and let the launcher set them", None))
    exported = _exports(st, catalog)
    findings += env_file_findings(catalog, st.view)
    names = [n.name for n in job.nodes]
    master_addr = job.master_addr or names[0]
    lookups = list(dict.fromkeys([*names, master_addr]))
    here = socket.gethostname()
    status, problem = st.status, st.problem
    status.update({n: "ok" for n in names})
    if not options.local:
        st.step = "name lookups"
        progress(f"resolving {len(lookups)} name(s) on {here}")
        answers = checks_names.resolve_here(lookups, timeout=options.connect_timeout)
        st.resolved.update({n: a for n, (a, _e) in answers.items()})
        findings += checks_names.from_here(catalog, answers, here, set(names))
        for n in names:
            if answers[n][1] is not None:
                status[n], problem[n] = "unresolved", "host-unresolved"
        st.lap("names")
    live = [n for n in names if status[n] == "ok"]
    shared = mux.open(live) if mux is not None else {}
    runners = _runners(live, options, shared)
    caller = st.rule is not None and st.rule.session == "caller"
    if options.collective and not options.local and len(live) == len(names) > 1:
        # the ranks import torch while the nodes are asked about themselves
        st.warm = prewarm([runners[n] for n in names], env=exported)

    st.step = "asking the nodes about themselves"
    progress(f"asking {len(live)} node(s) about themselves and their environment"
             + ("" if options.local else " over SSH"))
    facts, snaps = st.facts, st.snaps
    port = job.master_port if st.rule is None or len(names) < 2 else launch_port(
        st.rule, port=job.master_port, port_from=options.port_from, environ=options.environ)[0]
    replies, snap_replies = ask_nodes(st, catalog, runners, live, lookups, master_addr, port,
                                      env=exported if caller else None)
    for n, reply in replies.items():
        st.seconds[n] = reply.outcome.seconds
        if reply.ok:
            facts[n] = reply.doc
        else:
            status[n], problem[n] = "unreachable", reply.problem or "ssh-failed"
            findings.append(reply_finding(catalog, reply, "facts", options))
    st.lap("ssh and snapshots" if not options.local else "facts and snapshot")

    if options.ifname and facts and checks_network.missing_everywhere(
            "GLOO_SOCKET_IFNAME", options.ifname, facts):
        have = sorted({i for d in facts.values() for i in checks_network.interfaces(d)})
        raise UsageError(f"--ifname {options.ifname}: no node has an interface of that name",
                         hint=f"the nodes have: {', '.join(have)}; give one of them",
                         source="--ifname")

    multi = len(names) > 1
    master_addr, port, picked, candidates = _master(st, catalog, names, exported)
    ifname_set = any(v in exported for v in checks_network.IFNAME_VARS) or any(
        v in (d.get("env") or {}) for d in facts.values() for v in checks_network.IFNAME_VARS)
    findings += checks_names.from_nodes(catalog, facts, lookups, multi_node=multi,
                                        ifname_set=ifname_set, master=master_addr)
    if not options.local and not caller:
        findings += checks_launcher.session_path(catalog, facts, options.python, exported)
    st.lap("names from every node")

    judge_snapshots(st, catalog, snap_replies, facts_db, doctor_catalog, index_urls)
    if st.rule is not None and multi:
        findings += needs_findings(catalog, st.rule, snaps)
        findings += interface_findings(catalog, st.rule, facts)
        st.view = replace(st.view, notes=st.view.notes + version_notes(st.rule, snaps))
    st.lap("same environment")

    st.step = "network settings"
    reachable = [n for n in names if status[n] in ("ok", "unknown env")]
    net, chosen = checks_network.settings(catalog, {n: facts[n] for n in reachable}, exported,
                                          mode=st.mode, origins=st.view.origins)
    findings += net
    dropped = {k: v for k, v in options.forwarded.items() if k not in exported}
    if multi and st.rule is not None and st.rule.forwards == "deepspeed":
        findings += checks_launcher.not_forwarded(
            catalog, dropped, options.environ, cwd=options.cwd or Path.cwd(),
            home=Path(options.environ.get("HOME") or Path.home()))
    elif multi and st.rule is not None:
        findings += checks_launcher.not_carried(catalog, st.rule, dropped)
    if st.rule is not None or st.view.files:
        findings.append(checks_launcher.view_finding(
            catalog, st.view, exported=exported, master=st.view.master_addr,
            master_said=st.view.master_from))
    st.lap("network settings")

    st.step = "the master address and port"
    master = checks_master.master_node(master_addr, {n: facts[n] for n in reachable},
                                       st.resolved) if reachable else None
    st.master = master
    port_ok = True
    if master is not None:
        taken = checks_master.port_taken(catalog, master, port, facts[master])
        if taken:
            findings.append(taken)
            port_ok = False
        early = checks_master.port_ephemeral(catalog, master, port, facts[master])
        if early:
            findings.append(early)
    if options.local:
        pass  # nothing listens on the master before the launch: only the name was checked
    elif master is None:
        findings.append(catalog.finding(
            "check-skipped", f"the master {master_addr} is not one of the nodes answering: its "
            "port could not be tested with a listener",
            {"master_addr": master_addr}, "run the preflight with the master among the nodes "
            "(the first hostfile line, or --master-addr naming one of them)", None))
    elif port_ok:
        progress(f"testing {master_addr}:{port} with a listener on {master}")
        sources = {n: next(iter(chosen.get(n, {}).values()), None) for n in reachable}
        check = checks_master.reach(
            catalog, runners[master], [runners[n] for n in reachable], master_addr=master_addr,
            port=port, sources=sources, timeout=options.connect_timeout + 10,
            listen_seconds=options.connect_timeout * 2 + 30, picked=picked,
            facts={n: facts[n] for n in reachable}, candidates=candidates)
        findings += [_own_discovery(f, st.rule) for f in check.findings]
        for n in check.lost:
            status[n], problem[n] = "lost", "node-lost"
        if any(f.kind == "master-port-blocked" for f in check.findings):
            st.step = "tracing the blocked port pairwise"
            progress(f"tracing port {port} pairwise between the nodes")
            traced = _trace(catalog, runners, [n for n in reachable if status[n] == "ok"],
                            port, f"MASTER_PORT {port}", options)
            if any(f.evidence.get("node") for f in traced):  # one node named: it replaces
                findings[:] = [f for f in findings if f.kind != "master-port-blocked"]
            findings += traced
    st.lap("master address and port")

    if options.collective:
        st.step = "the collective"
        # rank 0 hosts the rendezvous store at the master address, as the launchers start it
        # there (node rank 0 on the master): the master node's rank first
        ranked = [master, *[n for n in names if n != master]] if master in names else names
        st.collective = run_checked(catalog, job, options, runners, ranked, status, snaps,
                                    master_addr, st.mode, findings, exported, progress,
                                    port=port, warm=st.warm,
                                    no_master=master is None and not options.local)
        for running in st.warm.values():  # ended when used; those the collective skipped end
            running.stop()
        st.warm = {}
        st.lap("collective")
        if st.collective is not None and not st.collective.ok:
            st.step = "tracing the collective's ports pairwise"
            progress("tracing the ports gloo/NCCL listen on (each node's ephemeral range) "
                     "pairwise between the nodes")
            findings += _trace(catalog, runners, [n for n in names if status[n] == "ok"], 0,
                               "the ephemeral ports gloo and NCCL listen on", options)
            st.lap("pairwise ports")
    st.step = "the end"
    return st.result()


def _own_discovery(f: Finding, rule) -> Finding:
    """A master address the ranks find themselves (DeepSpeed's MPI and Slurm modes: rank 0's
    `hostname -I`) is not given with --master_addr: the fix says what moves it."""
    if rule is None or rule.master != "rank0-hostname-i" or f.kind != "master-unreachable" \
            or not f.evidence.get("picked"):
        return f
    shared = f.evidence.get("shared")
    return replace(f, fix=(
        "make the interface of the network the nodes share come first in `hostname -I` on the "
        "first host (rank 0's node), where the ranks' own discovery takes the first word — "
        f"--master_addr does not reach them under {rule.id}"
        + (f" ({shared} is the master's address on that network)" if shared else "")))


def _trace(catalog, runners: dict[str, Runner], nodes: list[str], port: int, what: str,
           options: Options) -> list[Finding]:
    """port-dropped findings from a pairwise check between ``nodes`` (at least 2)."""
    from envgen.preflight.checks_mesh import analyse, mesh

    if len(nodes) < 2:
        return []
    result = mesh({n: runners[n] for n in nodes}, port, timeout=min(10.0, options.connect_timeout))
    return analyse(catalog, result, what=what)


def _launcher_problems(job: Job) -> list[tuple[str, dict]]:
    from envgen.preflight.launcher_vars import launcher_problems

    return launcher_problems(job)


