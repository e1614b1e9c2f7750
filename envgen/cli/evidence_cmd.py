"""``envgen evidence``: lock (T1) and build (T2) combinations and record every attempt."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from envgen import validate
from envgen.cli.build_cmd import parse_build_args
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.make_cmd import options_from_args
from envgen.cli.options import add_source_options, check_ca_cert
from envgen.cli.render import dump_json
from envgen.errors import UsageError
from envgen.facts.model import Toolchain

EPILOG = """\
examples:
  envgen evidence --plan                                   # the cells, nothing run
  envgen evidence --flavor venv --flavor os-package        # T1: lock every framework × CUDA
  envgen evidence --tier T2 --framework deepspeed \\
      --build os-package:debian-13=local/debian:trixie --docker-cli /usr/bin/docker
  envgen evidence --tier T2 --combination ID --flavor os-package \\
      --build os-package:debian-13=local/debian:trixie     # re-run one record's cell

Tiers: T1 locked (the lock solves for the target), T2 built (the image builds with the
framework's ops compiled for --gpu-arch and each op loads in it; no GPU needed). T3/T4 come
from `envgen verify` on GPUs. T1 cells: the newest combination per framework × torch CUDA minor
that one of the --flavor lock flavors provides (os-package: on every OS shipping a toolkit).
T2 cells: the newest combination per framework × --build target. Every attempt, passed or
failed, is stored as a record (matrix/results/README.md) in --results-dir; a failed cell is
known-bad evidence and the run goes on with the next. Then `envgen table --write`.

exit codes: 0 every cell passed, 1 some cell failed (its record is stored), 2 usage,
4 environment: a cell was skipped, unrecorded, because an index or the Docker daemon could
not be reached (that says nothing about the combination).
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("evidence", parents=[common],
                       help=help_for("evidence"),
                       description="Lock (T1) and build (T2) the newest combinations and "
                       "store a record of every attempt.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", choices=("T1", "T2", "all"), default="all",
                   help="which cells to run (default all: T1 cells, then T2 cells)")
    p.add_argument("--framework", action="append", metavar="NAME",
                   help="only this framework (repeatable; default: every framework)")
    p.add_argument("--flavor", action="append", metavar="KIND",
                   help="T1 lock flavors, in preference order (repeatable; default: "
                   f"{' '.join(Toolchain.FLAVORS)}); conda needs reachable conda channels")
    p.add_argument("--build", action="append", metavar="FLAVOR:OS=BASE", default=[],
                   help="a T2 build target: lock flavor, OS, and the base image to build FROM "
                   "(repeatable), e.g. os-package:debian-13=local/debian:trixie")
    p.add_argument("--torch-index", action="append", metavar="NAME",
                   help="only torch builds from this index (a name in matrix/sources.toml; "
                   "repeatable), e.g. pypi where download.pytorch.org is unreachable")
    p.add_argument("--combination", metavar="ID",
                   help="run only this combination's cell (with --tier T1 or T2)")
    p.add_argument("--gpu-arch", action="append", metavar="ARCH",
                   help="T2: compile the ops for this GPU architecture (repeatable; default "
                   "sm_90)")
    p.add_argument("--plan", action="store_true", help="print the cells and stop")
    p.add_argument("--exclude-newer", metavar="DATE",
                   help="lock as of DATE: ignore packages published later (RFC 3339)")
    p.add_argument("--results-dir", metavar="DIR",
                   help="where records are stored (default: <data dir>/results)")
    p.add_argument("--log-dir", metavar="DIR",
                   help="also keep each attempt's full log here, named by its digest")
    g = p.add_argument_group("building")
    g.add_argument("--build-arg", action="append", metavar="KEY=VALUE", default=[],
                   help="passed to the build, e.g. MAX_JOBS=8")
    g.add_argument("--engine", choices=("sdk", "buildkit"), default="sdk",
                   help="sdk (Docker API) or buildkit (the docker CLI)")
    g.add_argument("--docker-cli", metavar="PATH", default="docker",
                   help="docker CLI for --engine buildkit and for loading the ops")
    g.add_argument("--network", metavar="NAME",
                   help="network for the build's RUN steps (e.g. host, to reach an index on "
                   "this machine's loopback)")
    add_source_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api._evidence import EvidenceRequest, evidence
    from envgen.evidence.run import RunOptions

    certs = tuple(Path(c) for c in (ctx.setting(args, "ca-cert") or ()))
    if not args.plan:
        for cert in certs:
            check_ca_cert(cert)
        if certs and args.tier != "T1" and args.engine != "buildkit":
            from envgen.image.engines import CA_NEEDS_BUILDKIT

            raise UsageError("--ca-cert needs --engine buildkit for the T2 builds",
                             hint=CA_NEEDS_BUILDKIT)
    results_dir = (validate.path(args.results_dir, "--results-dir", "--results-dir")
                   if args.results_dir else None)
    options = RunOptions(
        lock=options_from_args(args, ctx),
        gpu_archs=tuple(args.gpu_arch or ("sm_90",)),
        ca_certs=certs,
        build_args=parse_build_args(args.build_arg), engine=args.engine,
        docker_cli=args.docker_cli, network=args.network,
        log_dir=Path(args.log_dir) if args.log_dir else None,
        command="envgen evidence" + "".join(f" --build {shlex.quote(b)}" for b in args.build))
    req = EvidenceRequest(
        tier=args.tier, frameworks=tuple(args.framework or ()),
        flavors=tuple(args.flavor or ()), builds=tuple(args.build),
        torch_indexes=tuple(args.torch_index) if args.torch_index else None,
        combination=args.combination, plan_only=args.plan, run=options,
        results_dir=results_dir)
    result = evidence(req, matrix=ctx.matrix, progress=ctx.progress)
    if args.plan:
        if ctx.json:
            dump_json(result.plan_dict(), ctx.out)
        else:
            for c in result.cells:
                base = f"  FROM {c.base}" if c.base else ""
                print(f"{c.tier}  {c.flavor:<10} {c.id}{base}\n      {c.why}", file=ctx.out)
            print(f"{len(result.cells)} cells", file=ctx.out)
        return 0
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
    else:
        for o in result.outcomes:
            if o.status == "skipped":
                print(f"skipped {o.cell.tier} {o.cell.flavor:<10} {o.cell.id}  ({o.error})",
                      file=ctx.out)
            else:
                print(f"{o.status:<7} {o.cell.tier} {o.cell.flavor:<10} {o.cell.id}  {o.record}",
                      file=ctx.out)
        print(f"{result.passed} passed, {result.failed} failed, {result.skipped} "
              "skipped; regenerate the table with `envgen table --write`", file=ctx.out)
    return 1 if result.failed else 4 if result.skipped else 0
