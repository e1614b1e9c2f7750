"""Where the nodes of a job come from: a DeepSpeed hostfile, ``--hosts``, Slurm's variables, the
launcher's variables, or this node alone.

Input: what the command line gives (``--hostfile``, ``--hosts``, ``--master-addr``,
``--master-port``, ``--local``) and the environment (an ``os.environ``-like mapping). Output: a
frozen :class:`Job` — the nodes in launch order, where they came from, the rendezvous address
and port and where each came from, and the launcher's and Slurm's variables as found, which
:func:`launcher_problems` cross-checks. A node list that cannot be read raises
:class:`~envgen.errors.UsageError` (exit 2) naming the file and line, the variable or the
option, with the fix.

Where the nodes come from (the first that applies; ``--hostfile``, ``--hosts`` and ``--local``
exclude each other):

1. ``--hostfile FILE``: DeepSpeed's hostfile, one ``HOST slots=N`` per line (read as
   ``deepspeed/launcher/runner.py`` ``fetch_hostfile``/``_parse_hostfile`` reads it; DeepSpeed
   v0.19.5, commit cf44300453eb, unchanged through edaa7221 of August 2026 — see
   :func:`parse_hostfile` for where this module is stricter, and why).
2. ``--hosts LIST``: Slurm-style host lists, ``a,b,c`` or ``node[01-04,07]``
   (:func:`expand_nodelist`).
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
import itertools
import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgen.errors import UsageError

__all__ = ["DEFAULT_MASTER_PORT", "LAUNCHER_VARS", "MAX_NODES", "SLURM_VARS", "Job", "Node",
           "expand_nodelist", "job_from", "launcher_problems", "parse_hostfile", "parse_hosts",
           "read_hostfile", "slurm_tasks_per_node"]

# torchrun's --master-port default and DeepSpeed's TORCH_DISTRIBUTED_DEFAULT_PORT
DEFAULT_MASTER_PORT = 29500

# Slurm refuses a range of more than MAX_RANGE = MAX_SLURM_NODES (64K) hosts (src/common/
# hostlist.h); a job list longer than that is a typo, and expanding it would take minutes.
MAX_NODES = 65536

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
    words = line.split()
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
        text = path.read_text(encoding="utf-8-sig")
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

_HOSTLIST_SEPARATORS = "\t, \n\r"  # Slurm's hostlist_create(): "\t, \n" (src/common/hostlist.c)
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._:\-\[\],]")
_PART = re.compile(r"([^\[\]]+)|\[([^\[\]]*)\]")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def parse_hosts(value: str) -> tuple[Node, ...]:
    """The nodes ``--hosts`` names: host names and Slurm-style ranges separated by commas
    (``a,b,c``, ``node[01-04,07]``, ``gpu-[001-003],cpu1``), in the order written."""
    if value is None or not value.strip():
        raise UsageError("--hosts is empty",
                         hint="name the nodes: --hosts node1,node2 or --hosts node[01-04]",
                         source="--hosts")
    return tuple(Node(name) for name in expand_nodelist(value, "--hosts"))


def expand_nodelist(expr: str, where: str) -> list[str]:
    """Every host ``expr`` names, as Slurm's ``scontrol show hostnames`` lists them.

    Slurm splits a host list at commas, spaces, tabs and newlines outside brackets
    (``hostlist_create``, src/common/hostlist.c) and keeps the order written: "By default
    hostlist does not sort the node list or make it unique (e.g. tux2,tux1,tux2 =
    tux[2,1-2])" (scontrol(1), ``hostlist``). Each item is parsed with ClusterShell's NodeSet
    (its error messages are quoted); as NodeSet sorts and silently merges duplicates, the
    names are listed here in Slurm's order and a host named twice is a UsageError (``where``:
    the option or variable the text came from). Only Slurm's syntax is accepted: ClusterShell's
    set operators (``! & ^``), ``@groups`` and range steps (``/2``), and Slurm's ``{...}``
    hostlist functions, are refused."""
    items = _split_hostlist(expr)
    if not items:
        raise UsageError(f"{where}: names no hosts ({expr!r})",
                         hint="name the nodes: node1,node2 or node[01-04]", source=where)
    names: list[str] = []
    first_in: dict[str, int] = {}
    for index, item in enumerate(items):
        for name in _expand_item(item, where):
            if name in first_in:
                first = first_in[name]
                said = (f"in {item!r}" if first == index
                        else f"items {first + 1} and {index + 1}" if items[first] == item
                        else f"in {items[first]!r} and again in {item!r}")
                raise UsageError(f"{where}: {name} is named twice ({said})",
                                 hint=f"name each node once; remove the second {name}",
                                 source=where)
            first_in[name] = index
            names.append(name)
        if len(names) > MAX_NODES:
            raise _too_many(expr, len(names), where)
    return names


def _split_hostlist(expr: str) -> list[str]:
    """The items of a host list: split at separators outside brackets, as Slurm's
    ``_next_tok`` does ("xxx[xx,xx,xx] is a single token"); runs of separators are one."""
    items, current, depth = [], [], 0
    for char in expr:
        if char == "[":
            depth += 1
        elif char == "]" and depth:
            depth -= 1
        if char in _HOSTLIST_SEPARATORS and depth == 0:
            if current:
                items.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        items.append("".join(current))
    return items


def _too_many(expr: str, count: int, where: str) -> UsageError:
    return UsageError(f"{where}: {expr!r} names {count} hosts, more than {MAX_NODES}",
                      hint="check the ranges in brackets (e.g. node[0001-0128]); Slurm refuses "
                      "a range of more than 64K hosts too", source=where)


def _parts(item: str) -> list[str | list[tuple[int, int, int]]] | None:
    """An item as literal text and bracket ranges ``(lo, hi, width)``, or None when it is not
    well formed (ClusterShell then says why)."""
    parts: list[str | list[tuple[int, int, int]]] = []
    pos = 0
    while pos < len(item):
        m = _PART.match(item, pos)
        if m is None:
            return None
        if m.group(1) is not None:
            parts.append(m.group(1))
        else:
            ranges = []
            for text in m.group(2).split(","):
                r = _RANGE.fullmatch(text)
                if r is None:
                    return None
                lo, hi = int(r.group(1)), int(r.group(2) or r.group(1))
                if lo > hi:
                    return None
                # Slurm pads to the width of the range's first number (_parse_single_range:
                # range->width = strlen(lo))
                ranges.append((lo, hi, len(r.group(1))))
            parts.append(ranges)
        pos = m.end()
    return parts


def _expand_item(item: str, where: str) -> list[str]:
    bad = _NAME_CHARS.search(item)
    if bad:
        raise UsageError(f"{where}: {bad.group()!r} in {item!r} is not part of a host name or "
                         "a Slurm host range",
                         hint="use host names (letters, digits, . - _) and ranges in brackets, "
                         "e.g. node[01-04,07],login1", source=where)
    parts = _parts(item)
    if parts is not None:
        count = math.prod(sum(hi - lo + 1 for lo, hi, _ in p) for p in parts
                          if isinstance(p, list))
        if count > MAX_NODES:
            raise _too_many(item, count, where)
    else:  # malformed: keep ClusterShell from expanding a huge range before it says why
        for lo, hi in re.findall(r"(\d+)-(\d+)", item):
            if int(hi) - int(lo) + 1 > MAX_NODES:
                raise _too_many(item, int(hi) - int(lo) + 1, where)
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

    try:
        nodeset = NodeSet(item, resolver=RESOLVER_NOGROUP)
    except NodeSetException as exc:
        raise UsageError(f"{where}: {item!r} is not a host list: {exc}",
                         hint="write host names and ranges as Slurm does: node[01-04,07] "
                         "(brackets closed, each range LOW-HIGH with LOW <= HIGH and both "
                         "padded alike)", source=where) from None
    expected = list(nodeset)
    if parts is None:
        return expected
    choices = [[p] if isinstance(p, str) else
               [str(i).zfill(width) for lo, hi, width in p for i in range(lo, hi + 1)]
               for p in parts]
    names = ["".join(combo) for combo in itertools.product(*choices)]
    # ClusterShell is the judge of what the item means; this only restores Slurm's order
    return names if set(names) == set(expected) else expected


# ---------------------------------------------------------------- Slurm tasks per node

_TASKS = re.compile(r"(\d+)(?:\(x(\d+)\))?")


def slurm_tasks_per_node(value: str, nnodes: int) -> list[int]:
    """The task count of each of ``nnodes`` nodes from ``SLURM_TASKS_PER_NODE``: ``2(x3),1``
    → [2, 2, 2, 1] (sbatch(1): "If two or more consecutive nodes are to have the same task
    count, that count is followed by "(x#)" where "#" is the repetition count"). A UsageError
    when the value is malformed or counts another number of nodes."""
    counts: list[int] = []
    for part in value.strip().split(","):
        m = _TASKS.fullmatch(part.strip())
        if m is None or (m.group(2) is not None and int(m.group(2)) == 0):
            raise UsageError(f"SLURM_TASKS_PER_NODE={value!r}: {part!r} is not N or N(xR)",
                             hint="let Slurm set SLURM_TASKS_PER_NODE (e.g. 2(x3),1), or unset "
                             "it", source="SLURM_TASKS_PER_NODE")
        repeat = int(m.group(2) or 1)
        if len(counts) + repeat > MAX_NODES:
            raise UsageError(f"SLURM_TASKS_PER_NODE={value!r} counts more than {MAX_NODES} "
                             "nodes", hint="let Slurm set SLURM_TASKS_PER_NODE, or unset it",
                             source="SLURM_TASKS_PER_NODE")
        counts.extend([int(m.group(1))] * repeat)
    if len(counts) != nnodes:
        raise UsageError(f"SLURM_TASKS_PER_NODE={value!r} gives task counts for {len(counts)} "
                         f"node{'s' if len(counts) != 1 else ''}, but the node list has "
                         f"{nnodes}",
                         hint="the variables come from different jobs or steps: run inside "
                         "one allocation, or unset the stale ones", source="SLURM_TASKS_PER_NODE")
    return counts


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
        nodes = (Node(_checked_addr(env["MASTER_ADDR"], "MASTER_ADDR")),)
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
    text = value.strip()
    if not text or any(c.isspace() for c in text):
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


# ---------------------------------------------------------------- launcher_problems

# the least value each whole-number variable may have
_WHOLE = {"WORLD_SIZE": 1, "RANK": 0, "LOCAL_RANK": 0, "LOCAL_WORLD_SIZE": 1, "GROUP_RANK": 0,
          "NODE_RANK": 0, "PET_NODE_RANK": 0}
_SLURM_WHOLE = {"SLURM_JOB_NUM_NODES": 1, "SLURM_NNODES": 1, "SLURM_NTASKS": 1,
                "SLURM_NTASKS_PER_NODE": 1, "SLURM_PROCID": 0, "SLURM_NODEID": 0,
                "SLURM_LOCALID": 0, "SLURM_GPUS_ON_NODE": 0}


def _whole(value: str) -> int | None:
    text = value.strip()
    return int(text) if re.fullmatch(r"\d+", text) else None


def launcher_problems(job: Job) -> list[tuple[str, dict]]:
    """(summary, evidence) for each inconsistency among the launcher's and Slurm's variables
    of ``job``: values that are not whole numbers (or below their least value), WORLD_SIZE !=
    NNODES × NPROC_PER_NODE, RANK >= WORLD_SIZE, LOCAL_RANK >= LOCAL_WORLD_SIZE (or
    NPROC_PER_NODE), LOCAL_WORLD_SIZE != NPROC_PER_NODE, NODE_RANK/GROUP_RANK >= NNODES, NNODES
    != the job's node count (nodes from a hostfile, --hosts or Slurm), a --master-addr /
    --master-port that differs from MASTER_ADDR / MASTER_PORT in this shell, and Slurm's counts
    against its node list (SLURM_JOB_NUM_NODES, SLURM_NNODES, SLURM_TASKS_PER_NODE,
    SLURM_NTASKS, SLURM_PROCID, SLURM_NODEID).

    The variables' meaning is torchrun's (https://docs.pytorch.org/docs/stable/elastic/run.html,
    "Environment Variables": RANK "The global rank", LOCAL_RANK "The local rank",
    LOCAL_WORLD_SIZE "The local world size (e.g. number of workers running locally); equals to
    --nproc-per-node", WORLD_SIZE "The world size (total number of workers in the job)",
    GROUP_RANK "The rank of the worker group ... When running a single worker group per node,
    this is the rank of the node"); NNODES may be torchrun's ``MIN:MAX`` and NPROC_PER_NODE one
    of its words (auto, cpu, gpu, xpu) (``parse_min_max_nnodes``,
    ``determine_local_world_size``). Slurm's are sbatch(1)'s."""
    v = job.launcher_vars
    problems: list[tuple[str, dict]] = []
    ints: dict[str, int] = {}

    def bad(name: str, value: str, want: str) -> None:
        problems.append((f"{name}={value!r} is not {want}", {name: value}))

    for name, least in _WHOLE.items():
        if name in v:
            number = _whole(v[name])
            if number is None or number < least:
                bad(name, v[name], "a whole number" if least == 0 else "a whole number >= 1")
            else:
                ints[name] = number
    for name in ("MASTER_PORT", "PET_MASTER_PORT"):
        if name in v and _port(v[name]) is None:
            bad(name, v[name], "a TCP port (1-65535)")
    nnodes_name = "NNODES" if "NNODES" in v else "PET_NNODES" if "PET_NNODES" in v else None
    nnodes: tuple[int, int] | None = None
    if nnodes_name:
        m = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*)?", v[nnodes_name])
        if m and 0 < int(m.group(1)) <= int(m.group(2) or m.group(1)):
            nnodes = (int(m.group(1)), int(m.group(2) or m.group(1)))
        else:
            bad(nnodes_name, v[nnodes_name], "a node count N or a range MIN:MAX")
    nproc_name = ("NPROC_PER_NODE" if "NPROC_PER_NODE" in v
                  else "PET_NPROC_PER_NODE" if "PET_NPROC_PER_NODE" in v else None)
    nproc: int | None = None
    if nproc_name:
        text = v[nproc_name].strip()
        if (n := _whole(text)) is not None and n >= 1:
            nproc = n
        elif not re.fullmatch(r"[a-z][a-z0-9_]*", text):  # auto, cpu, gpu, xpu, a backend
            bad(nproc_name, v[nproc_name], "a process count or auto/cpu/gpu/xpu")

    world = ints.get("WORLD_SIZE")
    fixed_nnodes = nnodes[0] if nnodes and nnodes[0] == nnodes[1] else None
    if world is not None and fixed_nnodes is not None and nproc is not None \
            and world != fixed_nnodes * nproc:
        problems.append((f"WORLD_SIZE={world} but {nnodes_name} × {nproc_name} = "
                         f"{fixed_nnodes} × {nproc} = {fixed_nnodes * nproc}",
                         {"WORLD_SIZE": v["WORLD_SIZE"], nnodes_name: v[nnodes_name],
                          nproc_name: v[nproc_name], "expected": fixed_nnodes * nproc}))
    if world is not None and ints.get("RANK", -1) >= world:
        problems.append((f"RANK={ints['RANK']} is not below WORLD_SIZE={world} (ranks run "
                         f"from 0 to {world - 1})",
                         {"RANK": v["RANK"], "WORLD_SIZE": v["WORLD_SIZE"]}))
    local_size, local_size_name = ((ints["LOCAL_WORLD_SIZE"], "LOCAL_WORLD_SIZE")
                                   if "LOCAL_WORLD_SIZE" in ints else (nproc, nproc_name))
    if local_size is not None and ints.get("LOCAL_RANK", -1) >= local_size:
        problems.append((f"LOCAL_RANK={ints['LOCAL_RANK']} is not below "
                         f"{local_size_name}={local_size}",
                         {"LOCAL_RANK": v["LOCAL_RANK"], local_size_name: str(local_size)}))
    if "LOCAL_WORLD_SIZE" in ints and nproc is not None and ints["LOCAL_WORLD_SIZE"] != nproc:
        problems.append((f"LOCAL_WORLD_SIZE={ints['LOCAL_WORLD_SIZE']} but "
                         f"{nproc_name}={nproc} (torchrun sets LOCAL_WORLD_SIZE to "
                         "--nproc-per-node)",
                         {"LOCAL_WORLD_SIZE": v["LOCAL_WORLD_SIZE"], nproc_name: v[nproc_name]}))
    if nnodes is not None:
        for name in ("NODE_RANK", "PET_NODE_RANK", "GROUP_RANK"):
            if ints.get(name, -1) >= nnodes[1]:
                problems.append((f"{name}={ints[name]} is not below {nnodes_name}="
                                 f"{v[nnodes_name].strip()} (node ranks run from 0 to "
                                 f"{nnodes[1] - 1})",
                                 {name: v[name], nnodes_name: v[nnodes_name]}))
        count = len(job.nodes)
        if job.source.startswith(_NODE_SOURCES) and not nnodes[0] <= count <= nnodes[1]:
            problems.append((f"{nnodes_name}={v[nnodes_name].strip()} but the job has {count} "
                             f"node{'s' if count != 1 else ''} (from {job.source})",
                             {nnodes_name: v[nnodes_name], "nodes": count,
                              "source": job.source}))
    if job.master_from == "--master-addr" and "MASTER_ADDR" in v \
            and v["MASTER_ADDR"].strip() != job.master_addr:
        problems.append((f"--master-addr {job.master_addr} but MASTER_ADDR="
                         f"{v['MASTER_ADDR'].strip()} in this shell: ranks that read "
                         "MASTER_ADDR (env:// rendezvous) would go elsewhere",
                         {"--master-addr": job.master_addr, "MASTER_ADDR": v["MASTER_ADDR"]}))
    env_port = _port(v["MASTER_PORT"]) if "MASTER_PORT" in v else None
    if env_port is not None and env_port != job.master_port:
        problems.append((f"--master-port {job.master_port} but MASTER_PORT={env_port} in this "
                         "shell: ranks that read MASTER_PORT (env:// rendezvous) would use "
                         "another port", {"--master-port": job.master_port,
                                          "MASTER_PORT": v["MASTER_PORT"]}))
    problems += _slurm_problems(job.slurm)
    return problems


def _slurm_problems(slurm: Mapping[str, str]) -> list[tuple[str, dict]]:
    problems: list[tuple[str, dict]] = []
    ints: dict[str, int] = {}
    for name, least in _SLURM_WHOLE.items():
        if name in slurm:
            number = _whole(slurm[name])
            if number is None or number < least:
                problems.append((f"{name}={slurm[name]!r} is not a whole number"
                                 f"{' >= 1' if least else ''}", {name: slurm[name]}))
            else:
                ints[name] = number

    def names_of(var: str) -> list[str] | None:
        if not slurm.get(var, "").strip():
            return None
        try:
            return expand_nodelist(slurm[var], var)
        except UsageError as exc:
            problems.append((f"{var}={slurm[var]!r} cannot be expanded: {exc.message}",
                             {var: slurm[var]}))
            return None

    job_var = _slurm_list_var(slurm)
    job_names = names_of(job_var) if job_var else None
    in_step = "SLURM_STEP_NODELIST" in slurm
    # the task variables describe the step inside srun, the allocation outside it
    task_var = "SLURM_STEP_NODELIST" if in_step else job_var
    task_names = names_of("SLURM_STEP_NODELIST") if in_step else job_names

    def count_mismatch(count_var: str, list_var: str | None, names: list[str] | None) -> None:
        if count_var in ints and names is not None and ints[count_var] != len(names):
            problems.append((f"{count_var}={ints[count_var]} but {list_var}="
                             f"{slurm[list_var]} names {len(names)} node"
                             f"{'s' if len(names) != 1 else ''}",
                             {count_var: slurm[count_var], list_var: slurm[list_var],
                              "nodes": len(names)}))

    count_mismatch("SLURM_JOB_NUM_NODES", job_var, job_names)
    count_mismatch("SLURM_NNODES", task_var, task_names)
    tasks: list[int] | None = None
    if slurm.get("SLURM_TASKS_PER_NODE", "").strip() and task_names is not None:
        try:
            tasks = slurm_tasks_per_node(slurm["SLURM_TASKS_PER_NODE"], len(task_names))
        except UsageError as exc:
            problems.append((exc.message, {"SLURM_TASKS_PER_NODE": slurm["SLURM_TASKS_PER_NODE"],
                                           task_var: slurm[task_var]}))
    if tasks is not None and "SLURM_NTASKS" in ints and ints["SLURM_NTASKS"] != sum(tasks):
        problems.append((f"SLURM_NTASKS={ints['SLURM_NTASKS']} but SLURM_TASKS_PER_NODE="
                         f"{slurm['SLURM_TASKS_PER_NODE']} adds up to {sum(tasks)}",
                         {"SLURM_NTASKS": slurm["SLURM_NTASKS"],
                          "SLURM_TASKS_PER_NODE": slurm["SLURM_TASKS_PER_NODE"],
                          "sum": sum(tasks)}))
    for rank, size in (("SLURM_PROCID", "SLURM_NTASKS"), ("SLURM_NODEID", "SLURM_NNODES")):
        if rank in ints and size in ints and ints[rank] >= ints[size]:
            problems.append((f"{rank}={ints[rank]} is not below {size}={ints[size]}",
                             {rank: slurm[rank], size: slurm[size]}))
    return problems
