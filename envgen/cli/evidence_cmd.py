"""``envgen evidence``: lock (T1) and build (T2) combinations and record every attempt."""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
from pathlib import Path

from envgen import validate
from envgen.cli.build_cmd import parse_build_args
from envgen.cli.context import Context
from envgen.cli.make_cmd import add_source_options, check_ca_cert, options_from_args
from envgen.cli.render import dump_json
from envgen.errors import EnvironmentProblem, UsageError
from envgen.evidence.cells import BuildTarget, Cell, build_cells, lock_cells
from envgen.facts import load_facts
from envgen.facts.model import Toolchain
from envgen.harvest.sources import load_sources
from envgen.resolve.combination import parse_combination_id

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
                       help="lock and build combinations, recording T1/T2 evidence",
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


def _cells(args: argparse.Namespace, ctx: Context, facts, recipes) -> list[Cell]:
    frameworks = tuple(args.framework or facts.framework_names)
    unknown = [f for f in frameworks if f not in facts.framework_names]
    if unknown:
        raise UsageError(f"unknown framework {unknown[0]!r}",
                         hint=f"known: {', '.join(facts.framework_names)}", source="--framework")
    flavors = tuple(args.flavor or Toolchain.FLAVORS)
    targets = tuple(BuildTarget.parse(b) for b in args.build)
    for t in targets:
        if t.os not in facts.oses:
            raise UsageError(f"--build {t.flavor}:{t.os}: unknown OS {t.os!r}",
                             hint=f"known: {', '.join(sorted(facts.oses))}", source="--build")
        validate.image_ref(t.base, "--build's base image")
    indexes = tuple(args.torch_index) if args.torch_index else None
    cells: list[Cell] = []
    if args.tier in ("T1", "all"):
        cells += lock_cells(facts, frameworks, flavors, indexes)
    if args.tier in ("T2", "all"):
        if args.tier == "T2" and not targets:
            raise UsageError("--tier T2 needs a --build target",
                             hint="e.g. --build os-package:debian-13=local/debian:trixie")
        pythons = {os_id: b.python for os_id, b in recipes.bases.items()}
        cells += build_cells(facts, frameworks, targets, pythons, indexes)
    if args.combination:
        if parse_combination_id(args.combination) is None:
            raise UsageError(f"--combination {args.combination!r} is not a combination id",
                             hint="copy it from a record or `envgen evidence --plan`",
                             source="--combination")
        cells = [c for c in cells if c.id == args.combination
                 and (not args.flavor or c.flavor in args.flavor)]
        if not cells:
            cells = _exact(args, facts, targets)
        if not cells:
            raise UsageError(f"no {args.tier} cell is {args.combination}",
                             hint="list the cells with `envgen evidence --plan` (with the same "
                             "--flavor / --build options)", source="--combination")
    return cells


def _exact(args: argparse.Namespace, facts, targets: tuple[BuildTarget, ...]) -> list[Cell]:
    """--combination ID that is not the newest of its cell (e.g. an older torch): resolve it
    as given, in the flavor of --flavor (T1) or of the --build target for its OS (T2)."""
    from envgen.errors import InfeasibleError
    from envgen.resolve import Request, resolve

    fields = parse_combination_id(args.combination)
    if args.tier == "T2":
        target = next((t for t in targets if t.os == fields["os"]), None)
        if target is None:
            return []
        flavor, base = target.flavor, target.base
    else:
        flavor, base = (args.flavor or ["conda"])[0], None
    request = Request(**{k: v for k, v in fields.items()}, flavor=flavor)
    try:
        found = resolve(request, facts, limit=None)
    except InfeasibleError:
        return []
    combo = next((c for c in found if c.id == args.combination), None)
    if combo is None:
        return []
    return [Cell(combo, flavor, "T2" if args.tier == "T2" else "T1", base=base,
                 why=f"{args.combination} as asked (--combination)")]


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.evidence.run import RunOptions, run_cell
    from envgen.image import load_recipes
    from envgen.results.store import add

    facts = load_facts(ctx.matrix_dir, ctx.data_dir)
    recipes = load_recipes(ctx.matrix_dir)
    cells = _cells(args, ctx, facts, recipes)
    if args.plan:
        if ctx.json:
            dump_json({"cells": [{"tier": c.tier, "combination": c.id, "flavor": c.flavor,
                                  "base": c.base, "why": c.why} for c in cells]}, ctx.out)
        else:
            for c in cells:
                base = f"  FROM {c.base}" if c.base else ""
                print(f"{c.tier}  {c.flavor:<10} {c.id}{base}\n      {c.why}", file=ctx.out)
            print(f"{len(cells)} cells", file=ctx.out)
        return 0
    certs = tuple(Path(c) for c in (ctx.setting(args, "ca-cert") or ()))
    for cert in certs:
        check_ca_cert(cert)
    build_args = parse_build_args(args.build_arg)
    results_dir = (validate.path(args.results_dir, "--results-dir", "--results-dir")
                   if args.results_dir else ctx.results_dir)
    options = RunOptions(
        lock=options_from_args(args, ctx),
        gpu_archs=tuple(args.gpu_arch or ("sm_90",)),
        ca_certs=certs,
        build_args=build_args, engine=args.engine, docker_cli=args.docker_cli,
        network=args.network,
        log_dir=Path(args.log_dir) if args.log_dir else None,
        command="envgen evidence" + "".join(f" --build {shlex.quote(b)}" for b in args.build))
    has_sources = (Path(ctx.matrix_dir) / "sources.toml").exists()
    sources = ({i.name: i.url for i in load_sources(ctx.matrix_dir).indexes}
               if has_sources else {})
    outcomes, skipped = [], []
    for i, cell in enumerate(cells, 1):
        ctx.progress(f"[{i}/{len(cells)}] {cell.tier} {cell.id} ({cell.flavor}): {cell.why}")
        try:
            record = run_cell(cell, facts, sources, options, recipes=recipes,
                              progress=ctx.progress)
        except EnvironmentProblem as exc:  # says nothing about the combination: no record
            ctx.progress(f"      skipped, not recorded: {exc}")
            skipped.append((cell, str(exc).splitlines()[0]))
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(record, fh)
        try:
            stored = add(results_dir, [Path(fh.name)])[0]
        finally:
            Path(fh.name).unlink(missing_ok=True)
        outcomes.append((cell, record, stored.path))
        ctx.progress(f"      {record['status']}"
                     + (f": {record['error']}" if record["error"] else "")
                     + f"  → {stored.path}")
    failed = [o for o in outcomes if o[1]["status"] != "pass"]
    if ctx.json:
        dump_json({"cells": [{"tier": c.tier, "combination": c.id, "flavor": c.flavor,
                              "status": r["status"], "error": r["error"],
                              "record": str(p)} for c, r, p in outcomes]
                   + [{"tier": c.tier, "combination": c.id, "flavor": c.flavor,
                       "status": "skipped", "error": why, "record": None}
                      for c, why in skipped],
                   "passed": len(outcomes) - len(failed), "failed": len(failed),
                   "skipped": len(skipped)}, ctx.out)
    else:
        for c, r, p in outcomes:
            print(f"{r['status']:<7} {c.tier} {c.flavor:<10} {c.id}  {p}", file=ctx.out)
        for c, why in skipped:
            print(f"skipped {c.tier} {c.flavor:<10} {c.id}  ({why})", file=ctx.out)
        print(f"{len(outcomes) - len(failed)} passed, {len(failed)} failed, {len(skipped)} "
              "skipped; regenerate the table with `envgen table --write`", file=ctx.out)
    return 1 if failed else 4 if skipped else 0
