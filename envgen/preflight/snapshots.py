"""Each node's facts and doctor snapshot: asked over SSH (both steps on every node at once) and
judged — the environments compared field by field, the software the job needs, the slots, the
doctor's errors on each node — and the finding that says why a node did not answer.

Input: the run's :class:`~envgen.preflight.result.State`, the catalog, one runner per node.
Output: replies per node (:func:`ask_nodes`), findings and the comparison table written into the
state (:func:`judge_snapshots`), a finding for a node that did not answer (:func:`reply_finding`).
"""

from __future__ import annotations

from typing import Any

from envgen.doctor.findings import Finding
from envgen.preflight import checks_same
from envgen.preflight.probe import Reply, ask_all
from envgen.preflight.remote import Runner, program
from envgen.preflight.result import Options, State
from envgen.workers import run_all

__all__ = ["COLLECT", "ask_nodes", "judge_snapshots", "reply_finding"]

COLLECT = ("collect_env.py", "collect_parse.py", "collect_children.py")


def reply_finding(catalog, reply: Reply, step: str, options: Options) -> Finding:
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



def ask_nodes(st: State, catalog, runners: dict[str, Runner], live: list[str],
              lookups: list[str], master_addr: str, port: int, *,
              env: dict[str, str] | None = None) -> tuple[dict, dict]:
    """Each node's facts and its doctor snapshot, both steps on every node at once (the
    snapshot of a node does not wait for the facts of the others); ``port``: the master port
    whose owner the master's facts name; ``env``: the variables both steps run with (a launcher
    that gives the ranks the caller's environment: its PATH decides what they find)."""
    options = st.options
    probe_text = program("node_probe.py")
    csv = ",".join(lookups)

    def facts_args(r: Runner) -> tuple[str, list[str]]:
        argv = ["facts", "--names", csv]
        if options.local or r.node == master_addr or r.node == live[0]:
            argv += ["--port", str(port)]
        return probe_text, argv

    collect_text = program(*COLLECT)
    budget = max(10.0, options.timeout - 15)
    facts_limit = options.connect_timeout + 30
    out: dict[str, dict] = {}

    def facts_step() -> None:
        out["facts"] = ask_all(list(runners.values()), facts_args, timeout=facts_limit,
                               ssh_errors=catalog.ssh_errors, over_ssh=not options.local,
                               env=env)

    def snap_step() -> None:
        out["snaps"] = ask_all(list(runners.values()),
                               lambda _r: (collect_text, ["--budget", f"{budget:.0f}"]),
                               timeout=options.timeout, ssh_errors=catalog.ssh_errors,
                               over_ssh=not options.local, env=env)

    run_all(lambda step: step(), [facts_step, snap_step], workers=2, name="envgen-steps")
    return out["facts"], out["snaps"]


def judge_snapshots(st: State, catalog, snap_replies: dict, facts_db, doctor_catalog,
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
        findings.append(reply_finding(catalog, Reply(n, None, reply.outcome, kind,
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

