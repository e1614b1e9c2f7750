"""``envgen preflight``: check the nodes of a multi-node job before it launches and print a
per-node table and the findings, worst first, each with its fix."""

from __future__ import annotations

import argparse
import textwrap

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.render import dump_json

EPILOG = """\
where the nodes come from (the first that is given):
  --hostfile FILE        a DeepSpeed hostfile: one `HOST slots=N` per line, # comments
  --hosts LIST           host names or Slurm-style ranges: a,b,c  node[01-04,07]
  SLURM_JOB_NODELIST     inside a Slurm allocation (expanded as `scontrol show hostnames`
                         does; slots from SLURM_TASKS_PER_NODE)
  MASTER_ADDR            torchrun / launcher variables (MASTER_PORT, WORLD_SIZE, RANK,
                         LOCAL_RANK, NNODES, NPROC_PER_NODE are checked for consistency)
  --local                this node only, no SSH (e.g. `srun envgen preflight --local`)

examples:
  envgen preflight --hostfile hostfile                  # from the node that will launch
  envgen preflight --hosts node[01-04] --master-port 29600 --json
  GLOO_SOCKET_IFNAME=ib0 envgen preflight --hostfile hostfile --python /opt/env/bin/python
  srun --ntasks-per-node=1 envgen preflight --local     # every node of a Slurm step, no SSH
  envgen preflight --hosts node[01-04] --launcher torchrun --master-addr node01
  envgen preflight --hostfile hostfile --launcher mpirun --export NCCL_DEBUG

The checks, in order (a check is skipped only where an earlier failure makes it impossible,
and says so): every host resolves, from the launching node and from every node, to the same
address, and no node's own name resolves to 127.0.x.x (the /etc/hosts trap); passwordless SSH
to every node (BatchMode, a bounded connect time; key and known-hosts problems named); each
node's doctor snapshot compared field by field (Python, torch, its CUDA and NCCL, frameworks,
driver, GPU model and count, the envgen lock) and the doctor's errors on each; hostfile slots
against the GPUs (or CPUs) there; NCCL/GLOO/TP_SOCKET_IFNAME name an interface with an address
on every node; the NCCL settings in effect; /dev/shm and the memlock limit; MASTER_PORT free on
the master and reachable from every node (a real listener and real connections, from the
*_SOCKET_IFNAME address where one is set); then a real all_reduce across all nodes (gloo;
NCCL when every node has GPUs) with checked values, its time and bus bandwidth — a hang names
the rank that did not arrive. Nothing is installed on the nodes: only their Python runs (and
torch for the collective). For a hostfile (DeepSpeed's runner, pdsh) the checks and the
collective run with what the runner exports, names and values: this shell's NCCL_*, PYTHON*,
UCX*, MV2*, MLFLOW* variables and the lines of ~/.deepspeed_env and ./.deepspeed_env
(DS_ENV_FILE), at the master address it picks (the first word of `hostname -I` on the first
host, unless MASTER_ADDR / --master-addr is given), and the PATH a non-interactive SSH session
gets on each node is checked for the environment's bin folder. --launcher names another
launcher (deepspeed-openmpi, deepspeed-mvapich, deepspeed-slurm, torchrun, srun, mpirun): the
checks and the collective then run with what that one exports (torchrun: nothing from here;
srun: the caller's environment; mpirun: -x NAME, given with --export, and OMPI_*) at the master
and port it uses (torchrun: its --master-addr, 127.0.0.1 without one; DeepSpeed's MPI modes:
rank 0's `hostname -I`, port 29500). With neither, NCCL_*, GLOO_*, TORCH_NCCL_* and
TP_SOCKET_IFNAME of this shell and the lines of a .deepspeed_env are exported to every node.
The SSH steps of a node share one connection (ControlMaster, ended with the run).

time limits: the name lookups take at most --connect-timeout in all (16 to 256 at a time, more
for more nodes); each remote step at most its limit per node and twice that on all nodes
together (up to 128 at a time); SIGTERM or Ctrl-C ends the preflight within 2 s at any point
(exit 143 / 130) and prints the findings made until then, killing every ssh it started; the
programs on the nodes end with it.

Every command printed has each value quoted for the shell (for the node's shell too, over
ssh); every value from a file or a node is shown with its control characters escaped.

exit codes: 0 no error finding, 1 at least one error finding, 2 usage error (an unreadable
hostfile or a syntax error in it, with the line; a host that is not a host name; no nodes;
duplicate hosts; an interface no node has), 4 this machine cannot run the checks.
"""

_MARK = {"error": "✗", "warning": "!", "info": "·"}


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("preflight", parents=[common], help=help_for("preflight"),
                       description="Check every node of a multi-node job before it launches.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("the nodes (default: Slurm's or the launcher's variables)")
    one = src.add_mutually_exclusive_group()
    one.add_argument("--hostfile", metavar="FILE", help="a DeepSpeed hostfile")
    one.add_argument("--hosts", metavar="LIST", help="a,b,c or node[01-04,07]")
    one.add_argument("--local", action="store_true",
                     help="check this node only, without SSH")
    src.add_argument("--master-addr", metavar="HOST",
                     help="the rendezvous host (default: $MASTER_ADDR, else the first node)")
    src.add_argument("--master-port", metavar="PORT",
                     help="the rendezvous port (default: $MASTER_PORT, else 29500)")
    how = p.add_argument_group("how to reach them")
    how.add_argument("--python", metavar="PY",
                     help="the job's Python on every node (default: the active environment's "
                     "path here, as the launchers assume)")
    how.add_argument("--ssh", metavar="CMD", default="ssh", help="the ssh client (default: ssh)")
    how.add_argument("--ssh-option", metavar="ARG", action="append", default=[],
                     help="one more ssh argument, e.g. --ssh-option=-p2222 or "
                     "--ssh-option=-oUser=me; repeatable")
    how.add_argument("--connect-timeout", metavar="S", type=float, default=10,
                     help="seconds to wait for a node's SSH, and for all the name lookups "
                     "together whatever the node count (default: 10)")
    how.add_argument("--timeout", metavar="S", type=float, default=120,
                     help="seconds for each remote step on one node; all nodes together "
                     "get twice a step's limit (default: 120)")
    what = p.add_argument_group("what to run")
    what.add_argument("--no-collective", action="store_true",
                      help="skip the all_reduce (a quicker check)")
    what.add_argument("--collective-timeout", metavar="S", type=float, default=60,
                      help="seconds the rendezvous and all_reduce may take (default: 60)")
    what.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                      help="the collective's backend (auto: NCCL when every node has GPUs)")
    what.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto",
                      help="what hostfile slots count (auto: GPUs when any node has one)")
    what.add_argument("--size-mb", metavar="MB", type=float, default=16,
                      help="the bandwidth test's tensor size (default: 16)")
    what.add_argument("--ifname", metavar="NAME",
                      help="run the job over this interface: sets GLOO_SOCKET_IFNAME and "
                      "NCCL_SOCKET_IFNAME for every rank")
    what.add_argument("--framework", metavar="NAME", action="append", default=[],
                      help="judge each node's environment for this framework too")
    launch = p.add_argument_group("the launcher (what it exports, the master it picks)")
    launch.add_argument("--launcher", metavar="NAME", default="auto",
                        help="the launcher the job will use: deepspeed (pdsh), "
                        "deepspeed-openmpi, deepspeed-mvapich, deepspeed-slurm, torchrun, srun, "
                        "mpirun; the checks and the collective run with what it exports and "
                        "the master it picks (default auto: deepspeed for a hostfile)")
    launch.add_argument("--export", metavar="NAME[=VALUE]", action="append", default=[],
                        help="a variable the launcher is told to pass (mpirun -x NAME, srun "
                        "--export=NAME); repeatable")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import PreflightRequest, preflight

    req = PreflightRequest(
        hostfile=validate.path(args.hostfile, "--hostfile", "--hostfile") if args.hostfile
        else None,
        hosts=validate.text(args.hosts, "--hosts", "--hosts") if args.hosts is not None
        else None,
        master_addr=validate.text(args.master_addr, "--master-addr", "--master-addr")
        if args.master_addr else None,
        master_port=args.master_port, local=args.local, python=args.python, ssh=args.ssh,
        ssh_options=tuple(args.ssh_option), connect_timeout=args.connect_timeout,
        timeout=args.timeout, collective=not args.no_collective,
        collective_timeout=args.collective_timeout, backend=args.backend, device=args.device,
        size_mb=args.size_mb, ifname=args.ifname,
        frameworks=tuple(f.strip() for f in args.framework),
        launcher=validate.text(args.launcher, "--launcher", "--launcher"),
        exports=tuple(validate.text(e, "--export", "--export") for e in args.export))
    try:
        result = preflight(req, matrix=ctx.matrix, progress=ctx.progress)
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM: what was found so far, then 130/143
        partial = getattr(exc, "partial", None)
        if partial is None:
            raise
        return _interrupted(exc, partial, ctx)
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
    else:
        print(render(result), file=ctx.out)
    return 0 if result.ok else 1


def _interrupted(exc: KeyboardInterrupt, partial, ctx: Context) -> int:
    """Print the findings made before the interrupt and return 128 + the signal (130 for
    Ctrl-C, 143 for SIGTERM); the steps' programs were killed by the preflight already."""
    import signal
    import sys

    signum = getattr(exc, "signum", signal.SIGINT)
    name = signal.Signals(signum).name
    message = f"interrupted by {name} during {partial.interrupted}; nothing was written"
    if ctx.json:
        doc = partial.to_dict()
        doc["error"] = {"kind": "interrupted", "message": message, "fix": None, "source": name}
        dump_json(doc, ctx.out)
    else:
        print(render(partial), file=ctx.out)
    print(f"envgen: {message}", file=sys.stderr)
    return 128 + signum


def _table(result) -> list[str]:
    shown = validate.shown  # what the nodes reported, escaped for the terminal
    nodes = [shown(n.name) for n in result.nodes]
    rows = [("status", {shown(n.name): n.status for n in result.nodes}, False)]
    rows.append(("slots", {shown(n.name): "-" if n.slots is None else str(n.slots)
                           for n in result.nodes}, False))
    rows += [(shown(r.field), {shown(k): shown(str(v)) if v is not None else "?"
                               for k, v in r.values.items()}, r.differs)
             for r in result.table]
    width0 = max(len(r[0]) for r in rows) + 2
    widths = {n: min(28, max([len(n)] + [len(str(r[1].get(n, ""))) for r in rows]))
              for n in nodes}

    def cell(text: str, n: str) -> str:
        text = str(text)
        return (text if len(text) <= widths[n] else text[:widths[n] - 1] + "…").ljust(widths[n])

    out = ["  " + " " * width0 + "  ".join(cell(n, n) for n in nodes)]
    for label, values, differs in rows:
        mark = "≠ " if differs else "  "
        out.append(mark + label.ljust(width0)
                   + "  ".join(cell(values.get(n, ""), n) for n in nodes).rstrip())
    return out


def render(result) -> str:
    """The screen: every value from a file, a node or a report with its control characters
    escaped (validate.shown); the commands were quoted for the shell where they were built."""
    shown = validate.shown
    job = result.job
    head = shown(f"envgen preflight — {len(job.nodes)} node{'s' if len(job.nodes) != 1 else ''}"
                 f" from {job.source}; master {job.master_addr or job.nodes[0].name}:"
                 f"{job.master_port} ({job.master_from}); {result.mode} job")
    out = [head, "", *_table(result)]
    counts = {s: sum(1 for f in result.findings if f.severity == s)
              for s in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n)
    if result.interrupted:
        verdict = f"interrupted during {result.interrupted}: the findings so far"
    elif result.ok:
        verdict = "no problems found: the job can launch as far as these checks go"
    else:
        verdict = summary
    out += ["", verdict + (f" ({summary})" if summary and verdict != summary else "")]
    wrap = textwrap.TextWrapper(width=100, subsequent_indent=" " * 11, break_long_words=False,
                                break_on_hyphens=False)
    for f in result.findings:
        out += ["", f"{_MARK[f.severity]} {f.severity:<8} {f.kind}",
                wrap.fill(f"  {'what':<8} {shown(f.summary)}")]
        if f.fix:
            out.append(wrap.fill(f"  {'fix':<8} {shown(f.fix)}"))
        if f.command:
            out.append(f"  {'run':<8} {shown(f.command)}")
        if f.source:
            out.append(wrap.fill(f"  {'rule':<8} {shown(f.source)}"))
    steps = ", ".join(f"{name} {s:.1f} s" for name, s in result.steps)
    out += ["", f"checks: {steps}"]
    return "\n".join(out)
