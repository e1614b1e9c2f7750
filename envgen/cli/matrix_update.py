"""``envgen matrix update``: refresh matrix/harvested/ from the package indexes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from envgen.cli.context import Context
from envgen.errors import UsageError

DESCRIPTION = """\
Harvest torch builds, framework releases and CUDA toolkits from the package indexes listed in
matrix/sources.toml, and show how they differ from the committed matrix/harvested/*.json.
Nothing is written unless --write is given; writing is atomic (an interrupted run leaves the
old snapshot intact)."""

EPILOG = """\
examples:
  envgen matrix update                         # show what changed on PyPI
  envgen matrix update --write                 # ... and write matrix/harvested/
  envgen matrix update --index pytorch-cu121   # also harvest PyTorch's cu121 index
  envgen matrix update --all-indexes --write   # every index in sources.toml
  envgen matrix update --index pypi=https://mirror.example/simple/   # use a PyPI mirror
  envgen matrix update --offline               # only what the cache already holds
  envgen --json matrix update                  # the diff as JSON

environment: ENVGEN_CACHE_DIR (cache location), REQUESTS_CA_BUNDLE (CA bundle)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--write",
        action="store_true",
        help="write the new snapshot to matrix/harvested/ (default: only show the diff)",
    )
    parser.add_argument(
        "--index",
        action="append",
        default=[],
        metavar="NAME[=URL]",
        help="also harvest the index NAME from sources.toml; NAME=URL points NAME "
        "at a mirror (or adds an ad-hoc index); repeatable",
    )
    parser.add_argument(
        "--all-indexes",
        action="store_true",
        help="harvest every index in sources.toml, including opt-in ones",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="cache directory; pages go in its http/ folder (default: $ENVGEN_CACHE_DIR or "
        "~/.cache/envgen, shared with `envgen make`)",
    )
    parser.add_argument(
        "--offline", action="store_true", help="use only the cache; fail on anything not cached"
    )
    parser.add_argument(
        "--jobs", type=int, default=8, metavar="N", help="parallel downloads (default: 8)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="per-request timeout (default: 30)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=4,
        metavar="N",
        help="retries per request on connection errors, timeouts, 429 and 5xx (default: 4)",
    )
    parser.add_argument("--backoff", type=float, default=0.5, help=argparse.SUPPRESS)
    parser.add_argument(
        "--ca-cert",
        metavar="FILE",
        help="CA bundle for TLS (e.g. a corporate proxy's); default: $REQUESTS_CA_BUNDLE",
    )


def register(
    matrix_subparsers: Any, common: argparse.ArgumentParser | None = None
) -> argparse.ArgumentParser:
    """Add ``update`` to ``envgen matrix``; ``common`` is the CLI's shared-options parent."""
    parser = matrix_subparsers.add_parser(
        "update",
        parents=[common] if common is not None else [],
        help="refresh matrix/harvested/ from package indexes (shows a diff)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.harvest.diff import render_text
    from envgen.harvest.update import UpdateOptions, update_matrix

    if args.jobs < 1 or args.retries < 0 or args.timeout <= 0:
        raise UsageError("--jobs must be >= 1, --retries >= 0, --timeout > 0")
    options = UpdateOptions(
        write=args.write,
        indexes=list(args.index),
        all_indexes=args.all_indexes,
        cache_dir=(Path(cache) / "http" if (cache := args.cache_dir or ctx.config.get("cache-dir"))
                   else None),
        offline=args.offline,
        jobs=args.jobs,
        timeout=args.timeout,
        retries=args.retries,
        backoff=args.backoff,
        ca_cert=args.ca_cert or ctx.config.get("ca-cert"),
    )
    result = update_matrix(ctx.matrix_dir, options, progress=ctx.progress)
    if ctx.json:
        payload = {**result.diff, "written": result.written, "indexes": result.indexes}
        print(json.dumps(payload, indent=2, sort_keys=True), file=ctx.out)
        return 0
    print(render_text(result.diff), file=ctx.out)
    if result.changes and not result.written:
        print(f"{result.changes} changes; run with --write to apply", file=ctx.out)
    elif result.written:
        print(f"wrote {ctx.matrix_dir / 'harvested'}", file=ctx.out)
    return 0
