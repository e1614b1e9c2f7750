"""``preflight()``: check the nodes of a multi-node job before it launches — names, SSH, the same
environment on every node, network settings, the master address and port, a real collective.

Input: PreflightRequest (where the nodes come from: a DeepSpeed hostfile, a host list, Slurm's
variables or the launcher's; how to reach them; what to run; the launcher that will start the
job — a [[launcher]] id of matrix/curated/preflight.toml — and the variables it is told to
pass). Output: PreflightResult (envgen.preflight.result.PreflightResult). Raises UsageError
(exit 2) for a node list that cannot be read (a hostfile's syntax error names the line), no
nodes, duplicates, an interface name no node has, an interpreter that is not there, a launcher
the catalog does not know or an --export that is not a variable name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envgen.api.progress import Progress, quiet
from envgen.errors import UsageError
from envgen.facts.matrix import Matrix

# What the launch exports to every rank, as DeepSpeed's runner does for NCCL_* (its
# EXPORT_ENVS, matrix/curated/preflight.toml [deepspeed_runner]); gloo's and TensorPipe's
# interface variables are added because the collective must see what the job will.
_FORWARD = re.compile(r"^(NCCL_|GLOO_|TORCH_NCCL_|TP_SOCKET_IFNAME$)")


@dataclass(frozen=True)
class PreflightRequest:
    hostfile: Path | None = None  # a DeepSpeed hostfile (`host slots=N` lines)
    hosts: str | None = None  # "a,b,c" or "node[01-04]"
    master_addr: str | None = None  # default: MASTER_ADDR, else the first node
    master_port: int | str | None = None  # default: MASTER_PORT, else 29500
    local: bool = False  # this node only (no SSH)
    python: str | None = None  # the job's interpreter on every node (default: this one's path)
    ssh: str = "ssh"
    ssh_options: tuple[str, ...] = ()
    connect_timeout: float = 10
    timeout: float = 120
    collective: bool = True
    collective_timeout: float = 60
    backend: str = "auto"
    device: str = "auto"
    size_mb: float = 16
    ifname: str | None = None
    frameworks: tuple[str, ...] = ()
    launcher: str = "auto"  # a [[launcher]] id (matrix/curated/preflight.toml) or auto
    exports: tuple[str, ...] = ()  # NAME or NAME=VALUE the launcher is told to pass (-x, --export)
    environ: Mapping[str, str] | None = field(default=None, compare=False)


def preflight(request: PreflightRequest, *, matrix: Matrix | None = None,
              progress: Progress = quiet):
    """Check the job ``request`` names; returns envgen.preflight.result.PreflightResult."""
    from envgen.doctor.catalog import load_catalog as load_doctor_catalog
    from envgen.preflight.catalog import load_catalog
    from envgen.preflight.nodes import job_from
    from envgen.preflight.run import Options
    from envgen.preflight.run import preflight as run

    environ = dict(os.environ if request.environ is None else request.environ)
    _check(request)
    job = job_from(hostfile=request.hostfile, hosts=request.hosts,
                   master_addr=request.master_addr, master_port=request.master_port,
                   environ=environ, local=request.local)
    matrix = matrix or Matrix.locate()
    catalog = load_catalog(matrix.matrix_dir)
    if request.launcher != "auto" and request.launcher not in catalog.launchers:
        raise UsageError(f"--launcher {request.launcher}: not a launcher the preflight knows",
                         hint=f"use auto or one of {', '.join(catalog.launchers)}",
                         source="--launcher")
    forwarded = {k: v for k, v in environ.items() if _FORWARD.match(k)}
    if request.ifname:
        forwarded.update(GLOO_SOCKET_IFNAME=request.ifname, NCCL_SOCKET_IFNAME=request.ifname)
    options = Options(
        python=_python(request, environ), local=request.local, ssh=request.ssh,
        ssh_options=request.ssh_options, connect_timeout=request.connect_timeout,
        timeout=request.timeout, collective=request.collective,
        collective_timeout=request.collective_timeout, backend=request.backend,
        device=request.device, size_mb=request.size_mb, forwarded=forwarded,
        frameworks=request.frameworks, ifname=request.ifname, environ=environ,
        launcher=request.launcher, listed=_listed(request.exports),
        port_from="--master-port" if request.master_port is not None
        else "MASTER_PORT" if environ.get("MASTER_PORT") else "default")
    return run(job, options, catalog, matrix.facts,
               doctor_catalog=load_doctor_catalog(matrix.matrix_dir),
               index_urls=matrix.index_urls(), progress=progress)


def _check(request: PreflightRequest) -> None:
    for name, value, low in (("--connect-timeout", request.connect_timeout, 1),
                             ("--timeout", request.timeout, 10),
                             ("--collective-timeout", request.collective_timeout, 5)):
        if not low <= value <= 86400:
            raise UsageError(f"{name} {value}: out of range",
                             hint=f"give a number of seconds from {low} to 86400", source=name)
    if not 0 < request.size_mb <= 4096:
        raise UsageError(f"--size-mb {request.size_mb}: out of range",
                         hint="give the bandwidth tensor's size in MB, above 0 and at most "
                         "4096", source="--size-mb")
    if request.backend not in ("auto", "gloo", "nccl"):
        raise UsageError(f"--backend {request.backend}: not a backend the preflight runs",
                         hint="use auto, gloo or nccl", source="--backend")
    if request.device not in ("auto", "gpu", "cpu"):
        raise UsageError(f"--device {request.device}: unknown", hint="use auto, gpu or cpu",
                         source="--device")
    if request.ifname is not None and not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}",
                                                       request.ifname):
        raise UsageError(f"--ifname {request.ifname!r}: not an interface name",
                         hint="give one interface name as `ip -br addr` lists it, e.g. eth0",
                         source="--ifname")


def _listed(exports: tuple[str, ...]) -> dict[str, str | None]:
    """--export NAME or NAME=VALUE, as mpirun -x and srun --export take them."""
    out: dict[str, str | None] = {}
    for item in exports:
        name, eq, value = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"--export {item!r}: {name!r} is not a variable name",
                             hint="give NAME or NAME=VALUE, as `mpirun -x` takes it",
                             source="--export")
        out[name] = value if eq else None
    return out


def _python(request: PreflightRequest, environ: dict[str, str]) -> str:
    """The job's interpreter: --python as given (a path on the nodes, which need not exist
    here), else this machine's active one — the launchers start the same path everywhere."""
    if request.python:
        return request.python
    from envgen.doctor.collect import target_interpreter

    return target_interpreter(None, environ)[0]
