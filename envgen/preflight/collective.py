"""A real collective job across the nodes: does it meet, add up, and how fast — or who hangs.

Input: one runner per node (runner i is node-rank i, see envgen.preflight.remote), the
rendezvous address and port, the backend (gloo, or nccl with ``nproc`` GPUs a node), the
timeout of one stage. Output: a frozen :class:`CollectiveResult` — every rank's furthest stage,
its error, whether it timed out, the ranks that never reached the rendezvous while others got
further (the hang: named, not just "timed out"), rank 0's bandwidth.

:func:`run_collective` starts ``envgen/inside/collective.py`` on every node at once and waits
up to ``timeout + grace`` (each rank's own watchdog ends a stage that runs past ``timeout``;
the grace covers starting Python and importing torch on every node, and the stages after the
rendezvous), then kills what is left. :func:`summarise` is the pure part: the events each
node printed (JSON lines, see collective.py's docstring) → the result.

Who is missing, in order of evidence:

1. the ``missing`` list a rank reports when its wait for the others to sign in runs out — read
   from the rendezvous store itself, so it names the rank even when its process ran but never
   reached the store;
2. otherwise the ranks whose process got less far than the others' and never reached the
   rendezvous (no output at all, or torch imported but no rendezvous while others met).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envgen.preflight import remote
from envgen.workers import run_all

__all__ = ["DEFAULT_GRACE", "DEFAULT_ITERS", "DEFAULT_SIZE_MB", "STAGES", "CollectiveResult",
           "NodeRun", "RankResult", "prewarm", "run_collective", "summarise"]

# how far a rank got: the events of collective.py, in order ("none": it printed nothing)
STAGES = ("none", "start", "rendezvous", "check", "bandwidth")
DEFAULT_SIZE_MB = 64
DEFAULT_ITERS = 5
DEFAULT_GRACE = 60.0
STDERR_TAIL = 2000

# what a rank was doing when its stage ran out (collective.py's "step")
STEPS = {
    "store": "connecting to the rendezvous store at {master}, which rank 0 hosts",
    "join": "waiting for every rank to sign in at the rendezvous store",
    "init": "init_process_group: the backend connecting the ranks to each other",
    "check": "the checked all_reduce",
    "bandwidth": "the timed all_reduces",
    "finish": "waiting for the other ranks to finish",
}


@dataclass(frozen=True)
class NodeRun:
    """What one node's collective.py left behind: its JSON events, exit status, stderr."""

    node: str
    events: tuple[dict[str, Any], ...] = ()
    rc: int | None = None
    timed_out: bool = False  # killed at envgen's deadline
    stderr: str = ""

    @classmethod
    def from_outcome(cls, outcome: remote.Outcome) -> NodeRun:
        return cls(node=outcome.node, events=tuple(outcome.json_lines()), rc=outcome.rc,
                   timed_out=outcome.timed_out, stderr=outcome.stderr[-STDERR_TAIL:])


@dataclass(frozen=True)
class RankResult:
    rank: int
    node: str
    stage_reached: str  # one of STAGES
    ok: bool
    error: str | None
    timed_out: bool
    failed_stage: str | None = None  # "launch", "import", "rendezvous", "allreduce" or None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "node": self.node, "stage_reached": self.stage_reached,
                "ok": self.ok, "error": self.error, "timed_out": self.timed_out,
                "failed_stage": self.failed_stage}


@dataclass(frozen=True)
class CollectiveResult:
    backend: str
    world_size: int
    ok: bool  # every rank checked its all_reduce and measured its bandwidth
    seconds: float  # wall time of the whole job
    ranks: tuple[RankResult, ...]
    missing: tuple[tuple[int, str], ...]  # (rank, node) never at the rendezvous while others were
    bandwidth: dict[str, Any] | None  # rank 0's bandwidth event (without "event" and "rank")
    hang: bool = False  # some rank timed out (its own watchdog or wait, or envgen's deadline)
    stage: str | None = None  # the earliest failing stage of any rank (RankResult.failed_stage)
    summary: str = ""
    nproc: int = 1
    node_errors: dict[str, str] = field(default_factory=dict)  # node → stderr tail of a failure

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "world_size": self.world_size, "nproc": self.nproc,
                "ok": self.ok, "seconds": self.seconds, "hang": self.hang, "stage": self.stage,
                "summary": self.summary, "ranks": [r.to_dict() for r in self.ranks],
                "missing": [{"rank": r, "node": n} for r, n in self.missing],
                "bandwidth": dict(self.bandwidth) if self.bandwidth else None,
                "node_errors": dict(self.node_errors)}


# ---------------------------------------------------------------- pure: events → result

_FAIL_ORDER = ("launch", "import", "rendezvous", "allreduce")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _step_text(event: dict[str, Any], master: str) -> str:
    step = event.get("step")
    if not isinstance(step, str) or step not in STEPS:  # one envgen does not know: as is
        return str(step or "")
    return STEPS[step].format(master=master or "the master address")


def _ranks_text(ranks: Sequence[tuple[int, str]]) -> str:
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} " + ", ".join(f"{r} ({node})" for r, node in ranks)


def _rank_result(rank: int, run: NodeRun, master: str) -> RankResult:
    events = [e for e in run.events if e.get("rank") == rank]
    kinds = {e.get("event"): e for e in events}  # the last of each kind
    reached = max((STAGES.index(k) for k in kinds if k in STAGES), default=0)
    stage_reached = STAGES[reached]
    check, error, timeout = kinds.get("check"), kinds.get("error"), kinds.get("timeout")
    ok = bool(check and check.get("ok")) and "bandwidth" in kinds and not error and not timeout
    message, timed_out, failed = None, False, None
    if timeout:
        timed_out, failed = True, timeout.get("stage") or "rendezvous"
        message = (f"{failed}: no progress in {timeout.get('seconds')} s "
                   f"({_step_text(timeout, master)})")
        if timeout.get("missing"):
            message += "; never signed in: ranks " + ", ".join(map(str, timeout["missing"]))
    elif error:
        failed = error.get("stage") or "rendezvous"
        step = f" ({_step_text(error, master)})" if error.get("step") else ""
        message = f"{failed}{step}: {error.get('error')}"
    elif check and not check.get("ok"):
        failed = "allreduce"
        message = (f"allreduce: the sum over all ranks was {check.get('got')!r}, expected "
                   f"{check.get('expected')!r}")
    elif not ok:
        failed = "launch" if not events else ("rendezvous" if reached < 2 else "allreduce")
        if run.timed_out:
            timed_out = True
            message = ("no output before envgen's deadline; the process was killed"
                       if not events else
                       f"still running after '{stage_reached}' at envgen's deadline; killed")
        elif run.rc is None:
            message = "its program could not be started or waited for"
        else:
            message = (f"the process exited (rc {run.rc}) "
                       + ("before printing anything" if not events
                          else f"after '{stage_reached}' without a result"))
        tail = _last_line(run.stderr)
        if tail:
            message += f": {tail}"
    return RankResult(rank=rank, node=run.node, stage_reached=stage_reached, ok=ok,
                      error=message, timed_out=timed_out, failed_stage=failed)


def summarise(runs: Sequence[NodeRun], *, backend: str, nproc: int = 1, seconds: float = 0.0,
              master: str = "") -> CollectiveResult:
    """The result of a job from what each node printed (``runs[i]`` is node-rank ``i``; its
    ranks are ``i*nproc .. i*nproc+nproc-1``). ``master`` ("addr:port") only words messages."""
    world = len(runs) * nproc
    ranks = tuple(_rank_result(r, runs[r // nproc], master) for r in range(world))
    node_of = {r.rank: r.node for r in ranks}

    reported: list[int] = []
    for run in runs:
        for e in run.events:
            if e.get("event") == "timeout" and isinstance(e.get("missing"), list):
                reported += [m for m in e["missing"] if m in node_of and m not in reported]
    if reported:
        missing_ranks = sorted(reported)
    else:
        top = max((STAGES.index(r.stage_reached) for r in ranks), default=0)
        rendezvous = STAGES.index("rendezvous")
        missing_ranks = [r.rank for r in ranks
                         if STAGES.index(r.stage_reached) < min(top, rendezvous)
                         and not r.ok]
    missing = tuple((r, node_of[r]) for r in missing_ranks)

    ok = bool(ranks) and all(r.ok for r in ranks)
    hang = any(r.timed_out for r in ranks)
    failed = [r for r in ranks if not r.ok]
    stage = None
    if not ok:
        stages = [r.failed_stage for r in failed if r.failed_stage]
        stage = min(stages, key=_FAIL_ORDER.index) if stages else None
    bandwidth = None
    for run in runs[:1]:
        for e in run.events:
            if e.get("event") == "bandwidth" and e.get("rank") == 0:
                bandwidth = {k: v for k, v in e.items() if k not in ("event", "rank")}

    if ok:
        bw = (f"; bus bandwidth {bandwidth.get('busbw_gbps')} GB/s (rank 0, "
              f"{bandwidth.get('bytes')} bytes, median of {bandwidth.get('iters')})"
              if bandwidth else "")
        summary = (f"{backend}: {world} ranks on {len(runs)} nodes met and all_reduce added "
                   f"up{bw}")
    elif missing:
        waited = [r for r in ranks if r.rank not in missing_ranks]
        summary = (f"{backend}: {_ranks_text(missing)} never reached the rendezvous"
                   + (f"; {_ranks_text([(r.rank, r.node) for r in waited])} waited"
                      if waited else ""))
    elif failed:
        first = min(failed, key=lambda r: (_FAIL_ORDER.index(r.failed_stage)
                                           if r.failed_stage in _FAIL_ORDER else 9, r.rank))
        more = f" (and {len(failed) - 1} more ranks failed)" if len(failed) > 1 else ""
        summary = f"{backend}: rank {first.rank} ({first.node}): {first.error}{more}"
    else:
        summary = f"{backend}: no ranks"
    node_errors = {run.node: run.stderr[-STDERR_TAIL:] for run in runs
                   if run.stderr.strip() and (run.rc not in (0, None) or run.timed_out)}
    return CollectiveResult(backend=backend, world_size=world, ok=ok, seconds=round(seconds, 3),
                            ranks=ranks, missing=missing, bandwidth=bandwidth, hang=hang,
                            stage=stage, summary=summary, nproc=nproc, node_errors=node_errors)


# ---------------------------------------------------------------- process control


def prewarm(runners: Sequence[remote.Runner], *,
            env: Mapping[str, str] | None = None) -> dict[str, remote.Running]:
    """Start collective.py ``--hold`` on every runner (node → its program): each imports torch
    with the launch's variables ``env`` and waits for :func:`run_collective` to give it its
    arguments, so that importing torch overlaps the preflight's other steps. A program that is
    not used must be ended (:meth:`~envgen.preflight.remote.Running.stop`)."""
    text = remote.program("collective.py")
    return {r.node: r.start(text, ["--hold"], env=env, hold=True) for r in runners}


def run_collective(runners: Sequence[remote.Runner], *, master_addr: str, master_port: int,
                   backend: str, timeout: float, nproc: int = 1,
                   size_mb: int = DEFAULT_SIZE_MB, iters: int = DEFAULT_ITERS,
                   env: Mapping[str, str] | None = None,
                   grace: float = DEFAULT_GRACE,
                   warm: Mapping[str, remote.Running] | None = None) -> CollectiveResult:
    """Start collective.py on every runner at once (runner i is node-rank i) — or give the
    programs :func:`prewarm` started (``warm``, node → program; ``env`` was theirs) their
    arguments — wait up to ``timeout + grace`` seconds, kill what is left, and
    :func:`summarise` what they printed."""
    import json

    text = remote.program("collective.py")
    nnodes = len(runners)
    t0 = time.monotonic()
    deadline = t0 + timeout + grace
    started: list[tuple[remote.Runner, Any]] = []
    runs: list[NodeRun | None] = [None] * nnodes
    for i, runner in enumerate(runners):
        argv = ["--master-addr", master_addr, "--master-port", str(master_port),
                "--node-rank", str(i), "--nnodes", str(nnodes), "--nproc", str(nproc),
                "--backend", backend, "--timeout", f"{timeout:g}", "--size-mb", str(size_mb),
                "--iters", str(iters)]
        held = (warm or {}).get(runner.node)
        if held is not None:
            held.send(json.dumps(argv))  # one that ended already says why in its output
            started.append((runner, held))
            continue
        try:
            started.append((runner, runner.start(text, argv, env=env)))
        except Exception as exc:  # the runner could not even start its program
            runs[i] = NodeRun(node=runner.node, rc=None, stderr=f"could not start: {exc}")
            started.append((runner, None))

    def finish(item: tuple[remote.Runner, Any]) -> NodeRun | None:
        runner, running = item
        if running is None:
            return None
        try:
            outcome = running.wait(max(0.0, deadline - time.monotonic()))
        except Exception as exc:
            return NodeRun(node=runner.node, stderr=f"lost: {exc}")
        return NodeRun.from_outcome(outcome)

    try:  # every node's wait ends at the deadline: one thread each, no total beyond it
        finished = run_all(finish, started, workers=max(1, nnodes), name="envgen-collective")
    finally:  # an interrupt: no rank goes on running
        for _, running in started:
            if running is not None:
                running.stop()
    for i, run in enumerate(finished):
        if run is not None:
            runs[i] = run
    done = [run or NodeRun(node=runners[i].node) for i, run in enumerate(runs)]
    return summarise(done, backend=backend, nproc=nproc, seconds=time.monotonic() - t0,
                     master=f"{master_addr}:{master_port}")
