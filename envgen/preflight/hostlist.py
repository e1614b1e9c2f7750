"""Slurm's host lists and task counts, read as Slurm reads them: ``node[01-04,07],login1``
expanded in the order written (``scontrol show hostnames``), and ``SLURM_TASKS_PER_NODE``'s
``2(x3),1`` as one count per node.

Input: the text and where it came from (an option or a variable, named in errors). Output: the
host names, or the counts; a UsageError (exit 2) naming the problem and the fix otherwise.
"""

from __future__ import annotations

import itertools
import math
import re

from envgen.errors import UsageError

# Slurm refuses a range of more than MAX_RANGE = MAX_SLURM_NODES (64K) hosts (src/common/
# hostlist.h); a job list longer than that is a typo, and expanding it would take minutes.
MAX_NODES = 65536

_HOSTLIST_SEPARATORS = "\t, \n\r"  # Slurm's hostlist_create(): "\t, \n" (src/common/hostlist.c)
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._:\-\[\],]")
_PART = re.compile(r"([^\[\]]+)|\[([^\[\]]*)\]")
_HOST = re.compile(r"[A-Za-z0-9_:][A-Za-z0-9._:\-]{0,254}")  # one name, as a range expands
_HOST_HINT = ("a host name has letters, digits and . - _ (an IPv6 address :); it does not start "
              "with - or .")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


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
            host_name(name, where)
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


def host_name(name: str, where: str, source: str | None = None) -> str:
    """``name`` when it is one host name as ``--hosts`` accepts it (letters, digits, ``. - _
    :``, not starting with ``-`` or ``.``), else a UsageError naming ``where`` (an option, a
    variable, ``FILE line N``) and the name with its control characters escaped. A name that
    passes is never an option to ssh and never shell code."""
    if _HOST.fullmatch(name):
        return name
    from envgen.validate import describe

    raise UsageError(f"{where}: {describe(name)} is not a host name", hint=_HOST_HINT,
                     source=source or where)


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
