"""What a preflight is asked and what it answers: :class:`Options` (how to reach the nodes, what
to run), :class:`NodeReport` (per node what was learnt), :class:`PreflightResult` (the
comparison table, the findings worst first, the collective, the launcher's view) and the state a
run keeps while it goes (``State``), which becomes the result when it ends or is interrupted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgen.doctor.findings import Finding, ordered
from envgen.preflight import checks_same
from envgen.preflight.launcher_view import LauncherView
from envgen.preflight.nodes import Job

__all__ = ["NodeReport", "Options", "PreflightResult", "State"]


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
    launcher: str = "auto"  # a [[launcher]] id of the catalog, or auto (DeepSpeed's for a hostfile)
    listed: dict[str, str | None] = field(default_factory=dict)  # --export NAME[=VALUE]
    port_from: str = "default"  # where the job's port came from: --master-port, MASTER_PORT


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



@dataclass
class State:
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
    rule: Any = None  # the launcher's [[launcher]] record (catalog.LauncherRule) or None
    warm: dict[str, Any] = field(default_factory=dict)  # node → the rank started ahead
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
