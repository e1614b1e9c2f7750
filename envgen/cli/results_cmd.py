"""``envgen results add | show``: store result records (verify and attempt records), and the
evidence tier and status they give each combination."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.render import dump_json, table
from envgen.errors import UsageError
from envgen.facts.locate import check_data_dir
from envgen.ids import parse_combination_id
from envgen.results.status import CombinationStatus, status_of, statuses
from envgen.results.store import add, load_many
from envgen.results.tiers import tier_label

EPILOG = """\
examples:
  envgen results add result.json                    # into <data dir>/results/
  envgen results add runs/*.json --results-dir matrix/results
  envgen results show
  envgen results show --combination deepspeed-0.19.8-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64
  envgen results show --json | jq '.[] | select(.status == "known-bad")'
  envgen results show --json | jq '.[] | select(.tier == "T2") | .combination'

Two kinds of record: verify records ("schema": 1, written by `envgen verify`) and attempt
records ("schema": "attempt/1", a lock (T1) or build (T2) attempt, written by the evidence
runner); matrix/results/README.md describes both. Records live one file per record at
<results>/<combination id>/<finished>-<record id>.json (the name follows from the content), so
additions from different branches merge without conflicts and the same record is never stored
twice. Tier: the highest a passing record proves (T0 resolves, T1 locked, T2 built, T3 GPU,
T4 multi-GPU). Status: known-bad if the newest record failed; known-good if the tier is T3 or
T4 and the newest record passed; otherwise untested (no GPU evidence yet; "CPU only" when
records passed without a GPU).
Records are read from the shipped matrix's results/ and the data directory's (--data; the
checkout's matrix/ when run inside one, else ~/.local/share/envgen); new ones are written to
the data directory's. Exit codes: 0 ok, 1 invalid record or stored data (nothing written),
2 usage, 4 filesystem (nothing written).
"""

ADD_EPILOG = """\
examples:
  envgen results add result.json
  envgen results add a.json b.json --results-dir matrix/results --json

Every file is validated first; if any is invalid, nothing is written and every problem of
every file is listed (with its JSON path). A record already stored is reported as "already
recorded" and left alone. All new files are written together or none is (an interrupt or a full
disk leaves the results as they were); while one `results add` writes a results directory, a
second refuses, naming it. Exit codes: 0 ok, 1 invalid file or a conflicting stored file,
2 usage, 4 filesystem, or another run writing there (nothing written).
"""

SHOW_EPILOG = """\
examples:
  envgen results show
  envgen results show --combination deepspeed-0.19.8-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64
  envgen results show --json

Exit codes: 0 ok, 1 a stored record is invalid, 2 usage (e.g. a malformed combination id).
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("results", parents=[common], help=help_for("results"),
                       description="Result records (verify runs, lock and build attempts) under "
                       "matrix/results/, and the evidence tier (T0..T4) and status (known-good / "
                       "known-bad / untested) they give each combination.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    rsub = p.add_subparsers(dest="results_command", metavar="SUBCOMMAND",
                            parser_class=type(p))
    a = rsub.add_parser("add", parents=[common], help="validate and store result records",
                        description="Validate result records (verify or attempt records) and "
                        "store them under the results directory, one file per record.",
                        epilog=ADD_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("files", nargs="+", metavar="FILE",
                   help="record JSON files: verify records or attempt records")
    _results_dir_option(a)
    a.set_defaults(func=run_add)
    s = rsub.add_parser("show", parents=[common], help="tier and status per combination",
                        description="The evidence tier and status of each combination that "
                        "has records.",
                        epilog=SHOW_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--combination", metavar="ID", help="only this combination (any id; one "
                   "without records is T0, untested)")
    _results_dir_option(s)
    s.set_defaults(func=run_show)

    def missing(args: argparse.Namespace, ctx: Context) -> int:
        p.print_help(ctx.err)
        return 2

    p.set_defaults(func=missing)


def _results_dir_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir", metavar="DIR",
                   help="where records are stored (default: <matrix dir>/results)")


def results_dir(args: argparse.Namespace, ctx: Context) -> Path:
    """Where new records go: --results-dir, else <data dir>/results."""
    if args.results_dir:
        return validate.path(args.results_dir, "--results-dir", "--results-dir")
    return ctx.results_dir


def results_dirs(args: argparse.Namespace, ctx: Context) -> list[Path]:
    """Where records are read from: --results-dir, else the matrix's and the data dir's."""
    if args.results_dir:
        return [validate.path(args.results_dir, "--results-dir", "--results-dir")]
    return ctx.results_dirs()


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else str(path)


def run_add(args: argparse.Namespace, ctx: Context) -> int:
    target = results_dir(args, ctx)
    if not args.results_dir:
        check_data_dir(target.parent, ctx.source("data-dir"))
    outcomes = add(target, [validate.path(f, "FILE", "FILE") for f in args.files],
                   source="--results-dir" if args.results_dir else ctx.source("data-dir"))
    if ctx.json:
        dump_json([{"combination": o.record.combination, "record_id": o.record.id,
                    "kind": o.record.kind, "tier": o.record.tier, "status": o.record.status,
                    "path": _shown(o.path), "added": o.added} for o in outcomes], ctx.out)
        return 0
    for o in outcomes:
        print(f"{'added' if o.added else 'already recorded':<17} {_shown(o.path)}", file=ctx.out)
    new = sum(o.added for o in outcomes)
    ctx.progress(f"{new} added, {len(outcomes) - new} already recorded")
    return 0


def run_show(args: argparse.Namespace, ctx: Context) -> int:
    stored = load_many(results_dirs(args, ctx))
    if args.combination:
        if not parse_combination_id(args.combination):
            raise UsageError(f"{args.combination!r} is not a combination id",
                             hint="ids look like deepspeed-0.19.8-torch2.5.1-cu121-py3.12-"
                             "ubuntu22.04-x86_64; `envgen resolve` prints them")
        found = [status_of(args.combination, stored)]
    else:
        found = list(statuses(stored).values())
    if ctx.json:
        dump_json([_as_json(s) for s in found], ctx.out)
        return 0
    if not found:
        print("No result records yet: every combination is T0 (resolves); `envgen results add "
              "FILE` stores records.", file=ctx.out)
        return 0
    print(table(("combination", "tier", "status", "records", "newest", "evidence"),
                ((s.combination, _tier(s), s.label, s.records, s.date,
                  _evidence(s)) for s in found)), file=ctx.out)
    return 0


def _evidence(s: CombinationStatus) -> str | None:
    """The record that proves the tier, else the newest (failed) one."""
    shown = s.proof or s.failed or s.newest
    return _shown(shown.path) if shown else None


def _tier(s: CombinationStatus) -> str:
    """``T1 locked``, ``T1 locked · T2 failed``."""
    text = tier_label(s.tier)
    return text + (f" · {s.failed.summary.tier} failed" if s.failed else "")


def _record(stored) -> dict | None:
    if stored is None:
        return None
    r = stored.summary
    return {"path": _shown(stored.path), "record_id": r.id, "kind": r.kind, "tier": r.tier,
            "flavor": r.flavor, "finished": r.finished, "status": r.status,
            "machine": r.machine_summary, "envgen": r.envgen_version, "error": r.error}


def _as_json(s: CombinationStatus) -> dict:
    return {"combination": s.combination, "tier": s.tier, "tier_label": s.tier_label,
            "flavor": s.flavor, "status": s.status, "note": s.note, "records": s.records,
            "date": s.date, "proof": _record(s.proof), "failed": _record(s.failed),
            "newest": _record(s.newest)}
