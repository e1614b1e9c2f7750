"""The launcher's and Slurm's variables of a job checked against each other and against its
nodes (torchrun's RANK / WORLD_SIZE / LOCAL_RANK / NNODES …, sbatch(1)'s SLURM_*): see
:func:`launcher_problems`.

Input: a :class:`~envgen.preflight.nodes.Job`. Output: (summary, evidence) per inconsistency.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from envgen.errors import UsageError
from envgen.preflight.hostlist import expand_nodelist, slurm_tasks_per_node
from envgen.preflight.nodes import _NODE_SOURCES, Job, _port, _slurm_list_var

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
