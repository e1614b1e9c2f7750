"""``envgen drift``: how far a lock has drifted from today's indexes, facts and evidence."""

from __future__ import annotations

import argparse

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.options import cache_dir, one_ca_cert
from envgen.cli.render import dump_json

EPILOG = """\
examples:
  envgen drift --lock locks/deepspeed-0.19.8-torch2.11.0-cu130-py3.12-ubuntu24.04-x86_64
  envgen drift --lock DIR --json | jq '.findings[] | select(.kind == "yanked")'
  envgen drift --lock DIR --offline          # the cached index pages only

What it checks, nothing installed: every pinned package on the lock's own indexes (a locked
file yanked or gone; a newer release in the same major.minor series), the lock's combination
re-resolved against today's facts (gone, or a fact that decides it changed: NCCL, the driver
floors, glibc, the arch lists, ...), and the result records (a newer combination of the same
framework that is known-good on GPUs, with the `envgen whatif` line to explore it).

exit codes: 0 the lock is as it was made (newer releases and known-good combinations are
news, not drift), 1 it drifted (yanked, gone, no longer resolves, a fact changed), 2 usage
error (a lock file edited after envgen wrote it: checked first, as install does), 4
environment (an index unreachable: --offline reads the cache).
"""


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("drift", parents=[common], help=help_for("drift"),
                       description="Check an existing lock against today's indexes, the "
                       "matrix's facts and the result records.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lock", metavar="DIR", required=True, help="a directory `envgen make` wrote")
    p.add_argument("--ca-cert", metavar="FILE", help="CA bundle for a TLS-intercepting proxy")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="index page cache (default $ENVGEN_CACHE_DIR or ~/.cache/envgen)")
    p.add_argument("--offline", action="store_true", help="read only the cached index pages")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import DriftRequest, drift

    req = DriftRequest(lock_dir=validate.path(args.lock, "--lock", "--lock"),
                       cache_dir=cache_dir(ctx, args), offline=args.offline,
                       ca_cert=one_ca_cert(ctx, args))
    result = drift(req, matrix=ctx.matrix, progress=ctx.progress)
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
    else:
        print(render(result), file=ctx.out)
    return 1 if result.drifted else 0


def render(result) -> str:
    """The screen, each value (an index's yank reason, a path) with its control characters
    escaped (validate.shown)."""
    shown = validate.shown
    state = "DRIFTED" if result.drifted else "as made"
    lines = [shown(f"{result.lock}: {state} ({result.packages} pinned packages checked, "
                   f"{len(result.findings)} finding{'' if len(result.findings) == 1 else 's'})")]
    if result.standing is not None:
        lines.append(f"  evidence            {shown(result.standing.line())}")
    for f in result.findings:
        lines.append(f"  {f.kind:<19} {shown(f.subject)}: {shown(f.detail)}")
        if f.fix:
            lines.append(f"  {'':<19} fix: {shown(f.fix)}")
    return "\n".join(lines)
