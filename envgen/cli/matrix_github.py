"""``envgen matrix github``: the GitHub Actions matrix of GPU cells that still need a run."""

from __future__ import annotations

import argparse

from envgen.cli.context import Context

EPILOG = """\
examples:
  envgen matrix github                       # {"include": [...]} for the cells still due
  envgen matrix github --force               # every cell
  echo "matrix=$(envgen matrix github)" >> "$GITHUB_OUTPUT"
  envgen matrix github --changed-since origin/main --force   # cells whose facts moved

Cells come from <matrix dir>/cells.toml; each cell's lock from <locks>/<id>/envgen.lock.json
(nox -s lock -- <id>); results from <matrix dir>/results. A cell is due when no record has
its lock hash, or when it is not locked yet. Each entry: combination, lock_hash (null when
unlocked), make_options, aliases (the moving image tag of the newest cell per framework and
CUDA). --changed-since REF keeps only the cells whose fact digest (the resolver's combination
built from today's facts) differs from cell-digests.json as committed at REF: none when no
fact moved. A one-line summary goes to stderr.

exit codes: 0 ok (also when nothing is due), 1 bad data, 2 usage error.
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("github", parents=[common], help="GPU CI matrix JSON of cells due",
                       description="Print the GitHub Actions matrix of the GPU cells whose "
                       "lock hash has no result yet.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", metavar="FILE", help="default: <matrix dir>/cells.toml")
    p.add_argument("--locks", metavar="DIR", default="locks",
                   help="where the cells' lock directories are (default: locks)")
    p.add_argument("--results-dir", metavar="DIR", help="default: <matrix dir>/results")
    p.add_argument("--force", action="store_true", help="every cell, verified or not")
    p.add_argument("--changed-since", metavar="REF",
                   help="only the cells whose facts changed since git revision REF (their "
                   "digest differs from cell-digests.json there)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen import validate
    from envgen.ci.github import matrix_github

    matrix = matrix_github(
        ctx.matrix,
        cells=validate.path(args.cells, "--cells", "--cells") if args.cells else None,
        results_dirs=([validate.path(args.results_dir, "--results-dir", "--results-dir")]
                      if args.results_dir else None),
        locks=validate.path(args.locks, "--locks", "--locks"), force=args.force,
        changed_since=(validate.text(args.changed_since, "--changed-since", "--changed-since")
                       if args.changed_since is not None else None))
    if args.changed_since is not None:
        ctx.progress(f"cells whose facts changed since {args.changed_since}: "
                     f"{matrix.cells}")
    ctx.progress(matrix.summary)
    print(matrix.to_json(), file=ctx.out)
    return 0
