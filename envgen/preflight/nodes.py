"""Where the nodes of a job come from: a DeepSpeed hostfile, ``--hosts``, Slurm's variables, the
launcher's variables, or this node alone.

Input: what the command line gives (``--hostfile``, ``--hosts``, ``--master-addr``,
``--master-port``, ``--local``) and the environment (an ``os.environ``-like mapping). Output: a
frozen :class:`Job` — the nodes in launch order, where they came from, the rendezvous address
and port and where each came from, and the launcher's and Slurm's variables as found, which
:func:`~envgen.preflight.launcher_vars.launcher_problems` cross-checks. A node list that cannot
be read raises :class:`~envgen.errors.UsageError` (exit 2) naming the file and line, the
variable or the option, with the fix.

Where the nodes come from (the first that applies; ``--hostfile``, ``--hosts`` and ``--local``
exclude each other):

1. ``--hostfile FILE``: DeepSpeed's hostfile, one ``HOST slots=N`` per line (read as
   ``deepspeed/launcher/runner.py`` ``fetch_hostfile``/``_parse_hostfile`` reads it; DeepSpeed
   v0.19.5, commit cf44300453eb, unchanged through edaa7221 of August 2026 — see
   :func:`parse_hostfile` for where this module is stricter, and why).
2. ``--hosts LIST``: Slurm-style host lists, ``a,b,c`` or ``node[01-04,07]``
   (:func:`~envgen.preflight.hostlist.expand_nodelist`).
3. ``--local``: this node (``socket.gethostname()``), no SSH; the launcher's and Slurm's
   variables are still read.
4. ``SLURM_JOB_NODELIST`` (or the older ``SLURM_NODELIST``): the nodes of the Slurm allocation,
   expanded as ``scontrol show hostnames`` does, in Slurm's order; slots from
   ``SLURM_TASKS_PER_NODE`` ("2(x3),1"), else ``SLURM_NTASKS_PER_NODE``. The variables are
   documented in sbatch(1), OUTPUT ENVIRONMENT VARIABLES,
   https://slurm.schedmd.com/sbatch.html ("SLURM_JOB_NODELIST: List of nodes allocated to the
   job."; "SLURM_TASKS_PER_NODE: Number of tasks to be initiated on each node. Values are comma
   separated and in the same order as SLURM_JOB_NODELIST. If two or more consecutive nodes are
   to have the same task count, that count is followed by "(x#)" where "#" is the repetition
   count.").
5. ``MASTER_ADDR``: torchrun-style launcher variables; the job's only known node is the master
   (the others cannot be known from them).

The master: ``--master-addr``, else ``MASTER_ADDR``, else the first node — DeepSpeed's runner
takes the first host of the hostfile (its first ``hostname -I`` address, runner.py ``main``:
"IP address of node 0, will be inferred via 'hostname -I' if not specified"), and Slurm runs
the batch script "on the first node in the set of allocated nodes" (sbatch(1), DESCRIPTION).
The port: ``--master-port``, else ``MASTER_PORT``, else 29500 — torchrun's default
(``torch/distributed/run.py``: ``--master-port`` ``default=29500``) and DeepSpeed's
(``deepspeed/constants.py``: ``TORCH_DISTRIBUTED_DEFAULT_PORT = 29500``).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgen.errors import UsageError
from envgen.preflight.hostlist import (
    MAX_NODES,
    expand_nodelist,
    host_name,
    slurm_tasks_per_node,
)
from envgen.userfile import read_text

__all__ = ["DEFAULT_MASTER_PORT", "LAUNCHER_VARS", "MAX_NODES", "SLURM_VARS", "Job", "Node",
           "expand_nodelist", "job_from", "parse_hostfile", "parse_hosts", "read_hostfile",
           "slurm_tasks_per_node"]

# torchrun's --master-port default and DeepSpeed's TORCH_DISTRIBUTED_DEFAULT_PORT
DEFAULT_MASTER_PORT = 29500

# torchrun's worker variables (torch/distributed/run.py, "Environment Variables"), the
# NNODES / NPROC_PER_NODE / NODE_RANK that launch scripts and job platforms pass to
# `torchrun --nnodes --nproc-per-node --node-rank`, and torchrun's own PET_<OPTION> spellings of
# them (torch/distributed/argparse_util.py: an option's default is read from PET_<DEST>).
LAUNCHER_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                 "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "NNODES", "NPROC_PER_NODE",
                 "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                 "PET_MASTER_PORT")

# sbatch(1) / srun(1) OUTPUT ENVIRONMENT VARIABLES. SLURM_STEP_NODELIST is set only inside an
# srun step, where Slurm overwrites SLURM_NNODES, SLURM_NTASKS and SLURM_TASKS_PER_NODE with
# the step's values (src/common/env.c env_array_for_step) while SLURM_JOB_NODELIST stays the
# allocation's.
SLURM_VARS = ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_STEP_NODELIST",
              "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE",
              "SLURM_TASKS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE",
              "SLURM_PROCID", "SLURM_NODEID", "SLURM_LOCALID", "SLURM_STEP_ID")

_NODE_SOURCES = ("hostfile", "--hosts", "slurm")


@dataclass(frozen=True)
class Node:
    name: str
    slots: int | None = None  # None: not given (--hosts, launcher variables, --local)
    line: int | None = None  # the hostfile line it came from

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "slots": self.slots, "line": self.line}


@dataclass(frozen=True)
class Job:
    nodes: tuple[Node, ...]
    source: str  # "hostfile PATH", "--hosts", "slurm (SLURM_JOB_NODELIST)", "launcher
    #              variables", "this node"
    master_addr: str | None
    master_port: int
    master_from: str  # "--master-addr", "MASTER_ADDR" or "first node"
    launcher_vars: dict[str, str] = field(default_factory=dict, hash=False)
    slurm: dict[str, str] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [n.to_dict() for n in self.nodes], "source": self.source,
                "master_addr": self.master_addr, "master_port": self.master_port,
                "master_from": self.master_from, "launcher_vars": dict(self.launcher_vars),
                "slurm": dict(self.slurm)}


# ---------------------------------------------------------------- DeepSpeed hostfile

_HOSTFILE_HINT = ("write one `HOST slots=N` per line (N: the ranks to start there, usually its "
                  "GPUs), e.g. `worker-1 slots=8`; `#` starts a comment")
_EXTRA = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S+")  # e.g. OpenMPI's max_slots=N
_LINES = re.compile(r"\r\n|\r|\n")  # Python's universal newlines, as DeepSpeed's readlines()


def parse_hostfile(text: str, where: str) -> tuple[Node, ...]:
    """The nodes of a DeepSpeed hostfile's ``text`` (``where``: its path, for messages).

    DeepSpeed (``deepspeed/launcher/runner.py`` ``_parse_hostfile``, v0.19.5) strips each line,
    skips empty lines and lines that start with ``#``, matches the rest with
    ``re.search(r'^(\\S+)\\s+slots=(\\d+)', line)`` and raises ValueError for a line that does
    not match, for a host named twice and for a file with no host. This parser takes the same
    lines, with the line number in every error, and is stricter where DeepSpeed's prefix match
    silently misreads a line:

    - ``slots=`` must be a whole number ending at a space, a ``#`` or the end of the line:
      DeepSpeed reads ``slots=1O`` (a letter O) as 1 and ``slots=4,`` as 4.
    - ``slots=0`` is refused: a node that runs no rank is a node the job does not use.
    - after ``slots=N`` only a ``# comment`` or ``key=value`` words (OpenMPI's ``max_slots=N``,
      which DeepSpeed ignores) may follow: DeepSpeed ignores the rest of the line, so
      ``a slots=4 b slots=4`` silently loses host b.
    """
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(_LINES.split(text), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):  # DeepSpeed: "hostfile comment or empty line"
            continue
        where_line = f"{where}:{number}"
        m = re.match(r"(\S+)\s+slots=(\S*)(.*)$", line)
        if m is None:
            raise UsageError(f"{where} line {number}: {line!r} is not `HOST slots=N`",
                             hint=_hostfile_hint(line), source=where_line)
        host, value, rest = m.group(1), m.group(2), m.group(3)
        # the name goes to ssh and into the commands the findings print: a name as --hosts
        # takes it (DeepSpeed takes any \S+, `$(touch x)` and escape sequences included)
        host_name(host, f"{where} line {number}", where_line)
        value, hash_, after = value.partition("#")
        rest = f"{hash_}{after}{rest}".strip()
        if not re.fullmatch(r"\d+", value):
            raise UsageError(f"{where} line {number}: slots={value!r} is not a whole number "
                             f"(in {line!r})",
                             hint=f"give the ranks to start on {host}, e.g. `{host} slots=8`",
                             source=where_line)
        slots = int(value)
        if slots == 0:
            raise UsageError(f"{where} line {number}: {host} has slots=0, so no rank would run "
                             "there",
                             hint=f"give {host} at least one slot, or remove the line (or "
                             "comment it out with #) to leave the node out",
                             source=where_line)
        words = rest.partition("#")[0].split()
        odd = [w for w in words if not _EXTRA.fullmatch(w) or w.startswith("slots=")]
        if odd:
            raise UsageError(f"{where} line {number}: unexpected {' '.join(odd)!r} after "
                             f"slots={value} (in {line!r}); DeepSpeed ignores the rest of a "
                             "line, so a second host there would be dropped",
                             hint="one host per line: `HOST slots=N`, then at most a `# comment`",
                             source=where_line)
        if host in seen:
            # DeepSpeed raises too: "Hostfile contains multiple entries for {host}, unable to
            # proceed with launching"
            raise UsageError(f"{where}: {host} is named twice, on lines {seen[host]} and "
                             f"{number}",
                             hint=f"keep one line for {host} (with its total slots) and delete "
                             "the other", source=where_line)
        seen[host] = number
        nodes.append(Node(host, slots, number))
    if not nodes:
        # DeepSpeed: "Hostfile is empty or not formatted correctly, unable to proceed with
        # launching."
        raise UsageError(f"{where}: names no hosts (only blank lines and comments)",
                         hint=_HOSTFILE_HINT, source=where)
    return tuple(nodes)


def _hostfile_hint(line: str) -> str:
    from envgen.validate import shown

    words = [shown(w) for w in line.split()]  # the line as the user wrote it, escaped
    if len(words) == 1 and "slots=" in words[0]:
        return "put a space between the host and slots=: `HOST slots=N`"
    if len(words) == 1:
        return f"add the number of ranks to start there: `{words[0]} slots=8`"
    if re.search(r"slots\s*[=:]\s*|slots\s+\d", line) and "slots=" not in line:
        return f"write slots=N with no space around `=`: `{words[0]} slots=8`"
    return _HOSTFILE_HINT


def read_hostfile(path: Path) -> tuple[Node, ...]:
    """:func:`parse_hostfile` of the file at ``path``. A file that cannot be read is a
    UsageError here, where DeepSpeed warns "Unable to find hostfile, will proceed with training
    with local resources only." and runs on one node: the preflight was asked about this
    file's nodes, and checking this node alone would pass a job that then runs alone."""
    path = Path(path)
    try:
        text = read_text(path, "hostfile", encoding="utf-8-sig", shown=f"--hostfile {path}")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(f"--hostfile {path}: cannot read it: {reason}",
                         hint="give the path of the DeepSpeed hostfile (`HOST slots=N` "
                         "lines), e.g. --hostfile /job/hostfile", source="--hostfile") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--hostfile {path}: not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start})",
                         hint="a hostfile is plain text: `HOST slots=N` lines",
                         source="--hostfile") from None
    return parse_hostfile(text, str(path))


# ---------------------------------------------------------------- Slurm-style host lists

def parse_hosts(value: str) -> tuple[Node, ...]:
    """The nodes ``--hosts`` names: host names and Slurm-style ranges separated by commas
    (``a,b,c``, ``node[01-04,07]``, ``gpu-[001-003],cpu1``), in the order written."""
    if value is None or not value.strip():
        raise UsageError("--hosts is empty",
                         hint="name the nodes: --hosts node1,node2 or --hosts node[01-04]",
                         source="--hosts")
    return tuple(Node(name) for name in expand_nodelist(value, "--hosts"))


def _slurm_list_var(slurm: Mapping[str, str]) -> str | None:
    for var in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if slurm.get(var, "").strip():
            return var
    return None


def _slurm_nodes(slurm: Mapping[str, str], var: str) -> tuple[Node, ...]:
    names = expand_nodelist(slurm[var], var)
    slots: list[int | None] = [None] * len(names)
    # inside an srun step the task variables describe that step (this preflight's own
    # srun, as a rule), not the job's ranks: no slots from them there
    if "SLURM_STEP_NODELIST" not in slurm:
        per_node = slurm.get("SLURM_NTASKS_PER_NODE", "").strip()
        if slurm.get("SLURM_TASKS_PER_NODE", "").strip():
            with contextlib.suppress(UsageError):  # launcher_problems says why
                slots = list(slurm_tasks_per_node(slurm["SLURM_TASKS_PER_NODE"], len(names)))
        elif re.fullmatch(r"\d+", per_node) and int(per_node) > 0:
            slots = [int(per_node)] * len(names)
    return tuple(Node(n, s if s else None) for n, s in zip(names, slots, strict=True))


# ---------------------------------------------------------------- the job


def job_from(*, hostfile: Path | str | None = None, hosts: str | None = None,
             master_addr: str | None = None, master_port: int | str | None = None,
             environ: Mapping[str, str] | None = None, local: bool = False) -> Job:
    """The job the options and ``environ`` (default: ``os.environ``) describe; see the module
    docstring for where the nodes, the master address and the port come from."""
    env = os.environ if environ is None else environ
    launcher = {k: env[k] for k in LAUNCHER_VARS if k in env}
    slurm = {k: env[k] for k in SLURM_VARS if k in env}
    given = [name for name, on in (("--hostfile", hostfile is not None),
                                   ("--hosts", hosts is not None), ("--local", local)) if on]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} given together: they are different ways to "
                         "name the nodes",
                         hint="give one: --hostfile FILE, --hosts LIST, or --local for this "
                         "node alone", source=given[1])
    if hostfile is not None:
        nodes = read_hostfile(Path(hostfile))
        source = f"hostfile {hostfile}"
    elif hosts is not None:
        nodes, source = parse_hosts(hosts), "--hosts"
    elif local:
        nodes, source = (Node(socket.gethostname()),), "this node"
    elif (var := _slurm_list_var(slurm)) is not None:
        nodes, source = _slurm_nodes(slurm, var), f"slurm ({var})"
    elif "MASTER_ADDR" in env:
        # the job's only known node, which ssh connects to: a host name, as --hosts takes it
        nodes = (Node(host_name(_checked_addr(env["MASTER_ADDR"], "MASTER_ADDR"),
                                "MASTER_ADDR")),)
        source = "launcher variables"
    else:
        raise UsageError("no nodes given",
                         hint="name them with --hostfile FILE (a DeepSpeed hostfile) or "
                         "--hosts node[01-04], run inside a Slurm allocation "
                         "(SLURM_JOB_NODELIST), or check this node alone with --local")
    if master_addr is not None:
        addr, master_from = _checked_addr(master_addr, "--master-addr"), "--master-addr"
    elif "MASTER_ADDR" in env:
        addr, master_from = _checked_addr(env["MASTER_ADDR"], "MASTER_ADDR"), "MASTER_ADDR"
    else:
        addr, master_from = nodes[0].name, "first node"
    return Job(nodes=nodes, source=source, master_addr=addr,
               master_port=_master_port(master_port, env), master_from=master_from,
               launcher_vars=launcher, slurm=slurm)


def _checked_addr(value: str, where: str) -> str:
    """The rendezvous address as given; it may still be a name nothing resolves (the checks
    say so, and the commands they print quote it), but never spaces, control characters or a
    leading ``-`` (an option to the programs it is passed to)."""
    from envgen.validate import text as one_line

    text = one_line(value, where, where, allow_empty=True).strip()
    if not text or any(c.isspace() for c in text) or text.startswith("-"):
        raise UsageError(f"{where}={value!r}: not a host name or address",
                         hint="give the host name or IP address of the node that runs rank 0 "
                         f"(or unset {where} to use the first node)", source=where)
    return text


def _master_port(explicit: int | str | None, env: Mapping[str, str]) -> int:
    if explicit is not None:
        value, where = explicit, "--master-port"
    elif "MASTER_PORT" in env:
        value, where = env["MASTER_PORT"], "MASTER_PORT"
    else:
        return DEFAULT_MASTER_PORT
    port = _port(value)
    if port is None:
        raise UsageError(f"{where} {value!r}: not a TCP port",
                         hint=f"give a port from 1 to 65535 that is free on the master, e.g. "
                         f"{DEFAULT_MASTER_PORT} (torchrun's and DeepSpeed's default)",
                         source=where)
    return port


def _port(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    if not re.fullmatch(r"\d{1,5}", text) or not 1 <= int(text) <= 65535:
        return None
    return int(text)
