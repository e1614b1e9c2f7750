"""The preflight of a job, in order: launcher variables, names, SSH, the same environment on
every node, network settings, the master address and port, a real collective.

Input: a :class:`~envgen.preflight.nodes.Job`, :class:`Options`, the preflight catalog and
the resolver's facts (for the doctor's judgement of each node). Output: a :class:`PreflightResult`
— per node what was learnt, the comparison table, the findings (worst first) and the
collective's result. A check stops only where the later ones cannot run: a node that does not
resolve or answer is left out of the later steps and named; the others go on.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envgen.doctor.findings import Finding, ordered
from envgen.preflight import (
    checks_launcher,
    checks_master,
    checks_names,
    checks_network,
    checks_same,
)
from envgen.preflight.launcher_view import (
    LauncherView,
    deepspeed_view,
    env_file_findings,
    master_from,
)
from envgen.preflight.nodes import Job
from envgen.preflight.probe import Reply, ask_all
from envgen.preflight.remote import LocalRunner, Runner, SSHRunner, program
from envgen.shellcmd import ssh
from envgen.workers import run_all

__all__ = ["NodeReport", "Options", "PreflightResult", "preflight"]

COLLECT = ("collect_env.py", "collect_parse.py", "collect_children.py")


@dataclass(frozen=True)
class Options:
    python: str  # the interpreter of the job's environment, the same path on every node
    local: bool = False  # this node only (no SSH): `srun envgen preflight --local`
    ssh: str = "ssh"
    ssh_options: tuple[str, ...] = ()
    connect_timeout: float = 10  # ssh ConnectTimeout
    timeout: float = 120  # each remote step (the snapshot is the longest)
    collective: bool = True
    collective_timeout: float = 60
    backend: str = "auto"  # auto | gloo | nccl
    device: str = "auto"  # auto | gpu | cpu: what slots are counted against
    size_mb: float = 16  # the collective's bandwidth tensor
    forwarded: dict[str, str] = field(default_factory=dict)  # exported to every rank
    frameworks: tuple[str, ...] = ()
    ifname: str | None = None  # --ifname: GLOO/NCCL_SOCKET_IFNAME for the job
    # the launching shell's variables and directory: where DeepSpeed's runner looks for its
    # .deepspeed_env (DS_ENV_FILE; ~ and .)
    environ: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


@dataclass(frozen=True)
class NodeReport:
    name: str
    slots: int | None
    status: str  # ok | unresolved | unreachable (ssh) | lost | unknown env
    address: str | None = None  # as the launching node resolves it
    facts: dict | None = None
    snapshot: Any = None  # envgen.doctor.snapshot.Snapshot
    problem: str | None = None  # the kind that says why it was left out
    seconds: float | None = None  # how long its facts took

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "slots": self.slots, "status": self.status,
                "address": self.address, "problem": self.problem,
                "seconds": None if self.seconds is None else round(self.seconds, 2),
                "facts": self.facts,
                "snapshot": self.snapshot.to_dict() if self.snapshot is not None else None}


@dataclass(frozen=True)
class PreflightResult:
    job: Job
    nodes: tuple[NodeReport, ...]
    findings: tuple[Finding, ...]
    table: tuple[checks_same.Row, ...]
    collective: Any  # envgen.preflight.collective.CollectiveResult | None
    master: str | None  # the node that is the master, when it is one of them
    mode: str  # gpu | cpu
    steps: tuple[tuple[str, float], ...]  # (check, seconds)
    local: bool = False
    launcher: LauncherView | None = None  # what the launcher will export and pick
    interrupted: str | None = None  # the step an interrupt cut short

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "ok": self.ok, "job": self.job.to_dict(), "mode": self.mode,
                "master": self.master, "local": self.local,
                "findings": [f.to_dict() for f in self.findings],
                "nodes": [n.to_dict() for n in self.nodes],
                "table": [r.to_dict() for r in self.table],
                "collective": self.collective.to_dict() if self.collective else None,
                "steps": [{"check": name, "seconds": round(s, 2)} for name, s in self.steps],
                "launcher": self.launcher.to_dict() if self.launcher else None,
                "interrupted": self.interrupted}


def _runners(nodes: list[str], options: Options) -> dict[str, Runner]:
    if options.local:
        return {n: LocalRunner(n, options.python) for n in nodes}
    return {n: SSHRunner(n, options.python, connect_timeout=options.connect_timeout,
                         ssh=options.ssh, options=options.ssh_options) for n in nodes}


def _reply_finding(catalog, reply: Reply, step: str, options: Options) -> Finding:
    from envgen.shellcmd import command, ssh  # every word quoted for the shell

    node, kind, detail = reply.node, reply.problem or "ssh-failed", reply.detail
    check = ssh(node, "true", options=("-o", "BatchMode=yes"))
    how = f"`{check}`"
    fixes = {
        "ssh-auth-failed": f"install the launching node's public key on {node}: "
        f"`{command('ssh-copy-id', node)}` (passwordless SSH is what DeepSpeed's and MPI "
        "launchers use)",
        "ssh-host-key": f"verify {node}'s host key and add it to ~/.ssh/known_hosts "
        f"(`{command('ssh-keyscan', node)} >> ~/.ssh/known_hosts` once you trust it; a "
        f"changed key: `{command('ssh-keygen', '-R', node)}` first)",
        "ssh-unreachable": f"{node} is down or unreachable (check it is up, its network, and "
        "that sshd listens); it was left out of the later checks",
        "ssh-refused": f"start sshd on {node} (or give its port with --ssh-option -p PORT)",
        "host-unresolved": f"make {node} resolvable on the launching node",
        "python-missing": f"install the job's environment at the same path on {node} (the "
        f"launchers start {options.python} there), or give the path with --python",
        "node-lost": f"check {node} (`{ssh(node, 'true')}`) and run the preflight again; the "
        "other nodes were still checked",
    }
    if options.local:
        how = f"`{command(options.python, '-V')}`"
    verb = "did not answer" if step == "facts" else "stopped answering"
    return catalog.finding(
        kind, f"{node} {verb} ({step}): {detail}",
        {"node": node, "step": step, "detail": detail, "exit_code": reply.outcome.rc,
         "seconds": round(reply.outcome.seconds, 1)},
        fixes.get(kind, f"run {how} by hand on the launching node and fix what it says"),
        None if options.local else check)


def _snapshot(doc: dict, facts: dict | None, node: str) -> Any:
    from envgen.doctor.collect import parse_nvidia_smi
    from envgen.doctor.snapshot import Snapshot

    doc = dict(doc)
    smi = (facts or {}).get("nvidia_smi") or {}
    if smi.get("rc") == 0 and smi.get("stdout"):
        driver, gpus = parse_nvidia_smi(smi["stdout"])
        if driver:
            doc.update(driver=driver, gpus=gpus)
    elif facts is not None and not smi.get("path") and not facts.get("dev_nvidia"):
        doc.update(driver=None, gpus=[])
    return Snapshot.from_dict(doc, source=f"the snapshot {node} sent")


@dataclass
class _State:
    """What the preflight has learnt so far: the result when it ends, or when it is
    interrupted (the findings up to then)."""

    job: Job
    options: Options
    findings: list[Finding] = field(default_factory=list)
    steps: list[tuple[str, float]] = field(default_factory=list)
    status: dict[str, str] = field(default_factory=dict)
    problem: dict[str, str] = field(default_factory=dict)
    resolved: dict[str, list[str]] = field(default_factory=dict)
    facts: dict[str, dict] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    snaps: dict[str, Any] = field(default_factory=dict)
    rows: list = field(default_factory=list)
    collective: Any = None
    master: str | None = None
    mode: str = "cpu"
    step: str = "launcher variables"
    view: LauncherView | None = None
    clock: float = field(default_factory=time.monotonic)

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.steps.append((name, now - self.clock))
        self.clock = now

    def result(self, interrupted: str | None = None) -> PreflightResult:
        findings = list(self.findings)
        if interrupted:
            findings.append(Finding(
                kind="check-skipped", severity="info",
                summary=f"interrupted during {interrupted}: the checks after it did not run "
                "and the findings above are those made until then",
                evidence={"interrupted": interrupted}, fix="", command=None, source=None))
        reports = tuple(NodeReport(n.name, n.slots, self.status.get(n.name, "ok"),
                                   (self.resolved.get(n.name) or [None])[0],
                                   self.facts.get(n.name), self.snaps.get(n.name),
                                   self.problem.get(n.name), self.seconds.get(n.name))
                        for n in self.job.nodes)
        return PreflightResult(self.job, reports, ordered(findings), tuple(self.rows),
                               self.collective, self.master, self.mode, tuple(self.steps),
                               self.options.local, self.view, interrupted)


def preflight(job: Job, options: Options, catalog, facts_db=None, *, doctor_catalog=None,
              index_urls=None,
              progress: Callable[[str], None] = lambda _m: None) -> PreflightResult:
    """The checks of ``job``, in order. An interrupt (Ctrl-C, SIGTERM) propagates at once
    with the result so far on the exception's ``partial`` attribute (the CLI prints it)."""
    st = _State(job, options)
    try:
        return _preflight(st, catalog, facts_db, doctor_catalog, index_urls, progress)
    except KeyboardInterrupt as exc:
        from envgen.proc import kill_all

        kill_all()  # the steps' programs, whichever thread waits on them
        exc.partial = st.result(interrupted=st.step)  # type: ignore[attr-defined]
        raise


def _deepspeed_launch(job: Job, options: Options) -> bool:
    """Whether DeepSpeed's multi-node runner launches this job: a hostfile of several nodes
    checked from the launching node (its default launcher, pdsh)."""
    return not options.local and len(job.nodes) > 1 and job.source.startswith("hostfile")


def _exports(st: _State, catalog) -> dict[str, str]:
    """The variables every rank will have from the launcher, as the checks and the collective
    use them: DeepSpeed's exports exactly for a DeepSpeed launch (plus --ifname's); else
    this shell's NCCL_/GLOO_/TORCH_NCCL_ variables and the lines of a .deepspeed_env."""
    options = st.options
    st.view = deepspeed_view(catalog, options.environ, cwd=options.cwd or Path.cwd(),
                             home=Path(options.environ.get("HOME") or Path.home()))
    asked = {}
    if options.ifname:
        asked = {"GLOO_SOCKET_IFNAME": options.ifname, "NCCL_SOCKET_IFNAME": options.ifname}
    if _deepspeed_launch(st.job, options):
        exported = {**st.view.exports, **asked}
    else:
        files = {k: v for k, v in st.view.exports.items()
                 if " line " in st.view.origins.get(k, "")}
        exported = {**options.forwarded, **files, **asked}
        st.view = replace(st.view, launcher="the launch (this shell's NCCL_/GLOO_/TORCH_NCCL_ "
                          "variables and the lines of .deepspeed_env)")
        for k in options.forwarded:
            st.view.origins.setdefault(k, "this shell")
    for k in asked:
        st.view.origins[k] = "--ifname"
    return exported


def _preflight(st: _State, catalog, facts_db, doctor_catalog, index_urls,
               progress: Callable[[str], None]) -> PreflightResult:
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
    runners = _runners(live, options)

    st.step = "asking the nodes about themselves"
    progress(f"asking {len(live)} node(s) about themselves and their environment"
             + ("" if options.local else " over SSH"))
    facts, snaps = st.facts, st.snaps
    replies, snap_replies = _ask_nodes(st, catalog, runners, live, lookups, master_addr)
    for n, reply in replies.items():
        st.seconds[n] = reply.outcome.seconds
        if reply.ok:
            facts[n] = reply.doc
        else:
            status[n], problem[n] = "unreachable", reply.problem or "ssh-failed"
            findings.append(_reply_finding(catalog, reply, "facts", options))
    st.lap("ssh and snapshots" if not options.local else "facts and snapshot")

    if options.ifname and facts and checks_network.missing_everywhere(
            "GLOO_SOCKET_IFNAME", options.ifname, facts):
        have = sorted({i for d in facts.values() for i in checks_network.interfaces(d)})
        raise UsageError(f"--ifname {options.ifname}: no node has an interface of that name",
                         hint=f"the nodes have: {', '.join(have)}; give one of them",
                         source="--ifname")

    multi = len(names) > 1
    # DeepSpeed's runner: with no --master_addr, the first word of `hostname -I` on the
    # first host (runner.py L495-L515, matrix/curated/preflight.toml [[kind]] launcher-view)
    picked, candidates = None, ()
    if _deepspeed_launch(job, options) and job.master_from == "first node":
        first = names[0]
        if first in facts:
            addr, said = master_from(facts[first].get("hostname_i"))
            if addr:
                picked = (f"the first word of `hostname -I` on {first}, as DeepSpeed's runner "
                          f"picks it: {said}")
                master_addr = addr
                candidates = tuple(said.split()[1:])
            else:
                findings.append(catalog.finding(
                    "master-unreachable",
                    f"DeepSpeed's runner cannot pick a master address: it takes the first word "
                    f"of `hostname -I` on {first}, which gave: {said}",
                    {"node": first, "hostname_i": facts[first].get("hostname_i")},
                    "pass the master's address to the launcher: `deepspeed --master_addr ADDR "
                    "...` (and --master-addr ADDR here)", ssh(first, "hostname", "-I")))
    ifname_set = any(v in exported for v in checks_network.IFNAME_VARS) or any(
        v in (d.get("env") or {}) for d in facts.values() for v in checks_network.IFNAME_VARS)
    findings += checks_names.from_nodes(catalog, facts, lookups, multi_node=multi,
                                        ifname_set=ifname_set, master=master_addr)
    if not options.local:
        findings += checks_launcher.session_path(catalog, facts, options.python, exported)
    st.lap("names from every node")

    _judge_snapshots(st, catalog, snap_replies, facts_db, doctor_catalog, index_urls)
    st.lap("same environment")

    st.step = "network settings"
    reachable = [n for n in names if status[n] in ("ok", "unknown env")]
    net, chosen = checks_network.settings(catalog, {n: facts[n] for n in reachable}, exported,
                                          mode=st.mode, origins=st.view.origins)
    findings += net
    if multi and job.source.startswith("hostfile"):  # DeepSpeed's runner will launch it
        findings += checks_launcher.not_forwarded(
            catalog, {k: v for k, v in options.forwarded.items() if k not in exported},
            options.environ, cwd=options.cwd or Path.cwd(),
            home=Path(options.environ.get("HOME") or Path.home()))
    if _deepspeed_launch(job, options) or st.view.files:
        findings.append(checks_launcher.view_finding(
            catalog, st.view, exported=exported, master=master_addr if picked else None,
            master_said=picked))
    st.lap("network settings")

    st.step = "the master address and port"
    master = checks_master.master_node(master_addr, {n: facts[n] for n in reachable},
                                       st.resolved) if reachable else None
    st.master = master
    port_ok = True
    if master is not None:
        taken = checks_master.port_taken(catalog, master, job.master_port, facts[master])
        if taken:
            findings.append(taken)
            port_ok = False
        early = checks_master.port_ephemeral(catalog, master, job.master_port, facts[master])
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
        progress(f"testing {master_addr}:{job.master_port} with a listener on {master}")
        sources = {n: next(iter(chosen.get(n, {}).values()), None) for n in reachable}
        check = checks_master.reach(
            catalog, runners[master], [runners[n] for n in reachable], master_addr=master_addr,
            port=job.master_port, sources=sources, timeout=options.connect_timeout + 10,
            listen_seconds=options.connect_timeout * 2 + 30, picked=picked,
            facts={n: facts[n] for n in reachable}, candidates=candidates)
        findings += check.findings
        for n in check.lost:
            status[n], problem[n] = "lost", "node-lost"
        if any(f.kind == "master-port-blocked" for f in check.findings):
            st.step = "tracing the blocked port pairwise"
            progress(f"tracing port {job.master_port} pairwise between the nodes")
            traced = _trace(catalog, runners, [n for n in reachable if status[n] == "ok"],
                            job.master_port, f"MASTER_PORT {job.master_port}", options)
            if any(f.evidence.get("node") for f in traced):  # one node named: it replaces
                findings[:] = [f for f in findings if f.kind != "master-port-blocked"]
            findings += traced
    st.lap("master address and port")

    if options.collective:
        st.step = "the collective"
        st.collective = _collective(catalog, job, options, runners, names, status, snaps,
                                    master_addr, st.mode, findings, exported, progress)
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


def _ask_nodes(st: _State, catalog, runners: dict[str, Runner], live: list[str],
               lookups: list[str], master_addr: str) -> tuple[dict, dict]:
    """Each node's facts and its doctor snapshot, both steps on every node at once (the
    snapshot of a node does not wait for the facts of the others)."""
    options = st.options
    probe_text = program("node_probe.py")
    csv = ",".join(lookups)

    def facts_args(r: Runner) -> tuple[str, list[str]]:
        argv = ["facts", "--names", csv]
        if options.local or r.node == master_addr or r.node == live[0]:
            argv += ["--port", str(st.job.master_port)]
        return probe_text, argv

    collect_text = program(*COLLECT)
    budget = max(10.0, options.timeout - 15)
    facts_limit = options.connect_timeout + 30
    out: dict[str, dict] = {}

    def facts_step() -> None:
        out["facts"] = ask_all(list(runners.values()), facts_args, timeout=facts_limit,
                               ssh_errors=catalog.ssh_errors, over_ssh=not options.local)

    def snap_step() -> None:
        out["snaps"] = ask_all(list(runners.values()),
                               lambda _r: (collect_text, ["--budget", f"{budget:.0f}"]),
                               timeout=options.timeout, ssh_errors=catalog.ssh_errors,
                               over_ssh=not options.local)

    run_all(lambda step: step(), [facts_step, snap_step], workers=2, name="envgen-steps")
    return out["facts"], out["snaps"]


def _judge_snapshots(st: _State, catalog, snap_replies: dict, facts_db, doctor_catalog,
                     index_urls) -> None:
    from envgen.errors import UsageError

    options, findings, facts = st.options, st.findings, st.facts
    status, problem, snaps = st.status, st.problem, st.snaps
    st.step = "comparing the environments"
    for n, reply in snap_replies.items():
        if n not in facts:
            continue  # the node did not answer at all: said once, by the facts step
        if reply.ok:
            try:
                snaps[n] = _snapshot(reply.doc, facts.get(n), n)
                continue
            except UsageError as exc:  # an answer that breaks the collector's schema
                from envgen.shellcmd import command

                status[n], problem[n] = "invalid env", "node-snapshot-invalid"
                findings.append(catalog.finding(
                    "node-snapshot-invalid",
                    exc.message, {"node": n, "detail": exc.message},
                    f"run `{command(options.python, '-c', 'import sys; print(sys.version)')}` "
                    f"on {n} and check that it is the job's Python (a wrapper or a site "
                    "hook that prints to stdout corrupts the answer); the node was not "
                    "compared", None))
                continue
        lost = reply.problem in ("ssh-unreachable", "node-lost", "ssh-failed") and \
            (reply.outcome.timed_out or reply.outcome.rc == 255)
        kind = "node-lost" if lost else "node-env-unknown"
        status[n] = "lost" if lost else "unknown env"
        problem[n] = kind
        findings.append(_reply_finding(catalog, Reply(n, None, reply.outcome, kind,
                                                      reply.detail), "environment", options))
    rows, differ = checks_same.compare(catalog, snaps, facts) if snaps else ([], [])
    st.rows = rows
    findings += differ
    findings += checks_same.missing_software(catalog, snaps, options.frameworks)
    st.mode = checks_same.device_mode(options.device, snaps)
    findings += checks_same.slots(catalog, st.job.nodes, snaps, facts, st.mode)
    if facts_db is not None and doctor_catalog is not None and snaps:
        from envgen.doctor.judge import judge

        diagnoses = {n: judge(s, facts_db, doctor_catalog, frameworks=options.frameworks,
                              python=options.python, origin=f"node {n}",
                              index_urls=index_urls)
                     for n, s in snaps.items()}
        # a tool the launcher's PATH misses is launcher-path's finding, with its cause
        path_lost = {n for f in findings if f.kind == "launcher-path"
                     for n in [f.evidence.get("node")]}
        findings += checks_same.doctor_errors(catalog, diagnoses, explained={
            n: ("ninja_missing",) for n in path_lost})


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


# error findings after which the all_reduce cannot succeed: it is not run, and the finding
# that says why is named (the variable a backend reads is checked against the backend)
_DOOMING = ("ifname-missing", "ifname-unreaching", "hostname-loopback", "name-loopback",
            "master-unreachable", "master-port-blocked", "master-port-taken",
            "deepspeed-env-line", "host-unresolved", "port-dropped")
_BACKEND_VARS = {"gloo": ("GLOO_SOCKET_IFNAME",), "nccl": ("NCCL_SOCKET_IFNAME",)}


def _doomed(findings: list[Finding], backend: str) -> Finding | None:
    for f in findings:
        if f.severity != "error" or f.kind not in _DOOMING:
            continue
        var = f.evidence.get("variable") if f.kind == "ifname-missing" else None
        if var and var not in _BACKEND_VARS.get(backend, ()):
            continue
        return f
    return None


def _collective(catalog, job: Job, options: Options, runners: dict[str, Runner],
                names: list[str], status: dict[str, str], snaps: dict, master_addr: str,
                mode: str, findings: list[Finding], exported: dict[str, str],
                progress: Callable[[str], None]) -> Any:
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
    if left_out:
        why = f"{', '.join(left_out)} could not be checked"
    elif no_torch:
        why = f"torch does not import on {', '.join(no_torch)}"
    elif (because := _doomed(findings, backend)) is not None:
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
                            master_port=job.master_port, backend=backend,
                            timeout=options.collective_timeout, nproc=nproc,
                            size_mb=options.size_mb, env=exported)
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
