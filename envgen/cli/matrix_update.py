"""``envgen matrix update``: refresh matrix/harvested/ from the package indexes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from envgen import validate
from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.errors import UsageError

DESCRIPTION = """\
Harvest torch builds, framework releases and CUDA toolkits from the package indexes listed in
matrix/sources.toml, and the CUDA toolkit each OS release ships as an OS package from its
Debian / Ubuntu package index ([[os_packages]]: harvested/os_toolkits.json), and show how they
differ from the harvested facts envgen uses now.
Nothing is written unless --write is given; then the new snapshot goes to the data directory
(--data; in a checkout its matrix/, else ~/.local/share/envgen — never the installed package),
atomically: an interrupted run leaves the old snapshot intact.

Before anything replaces the facts, the refresh is checked: a page that is not an index page
(a proxy login page, a captive portal, a page of the wrong shape), a project page with no
files, bytes that do not match the index's sha256 (for an OS package index: the SHA256 its
Release file lists), or a refresh that would remove more than
[refresh] max_removed_share of the known records (a truncated page, a partial mirror) is
refused with exit 4, the URL and the reason, and the diff on stderr."""

EPILOG = """\
examples:
  envgen matrix update                         # show what changed on PyPI
  envgen matrix update --write                 # ... and write matrix/harvested/
  envgen matrix update --index pytorch-cu121   # also harvest PyTorch's cu121 index
  envgen matrix update --all-indexes --write   # every index in sources.toml
  envgen matrix update --index pypi=https://mirror.example/simple/   # use a PyPI mirror
  envgen matrix update --offline               # only what the cache already holds
  envgen --json matrix update                  # the diff as JSON
  envgen matrix update --write --allow-removals   # a deliberate prune (shows what goes)
  envgen matrix update --only os-toolkits --write  # only harvested/os_toolkits.json

environment: ENVGEN_CACHE_DIR (cache location), ENVGEN_CA_CERT / REQUESTS_CA_BUNDLE (CA
bundle), ENVGEN_DATA (where --write writes).
exit codes: 0 ok, 2 usage error, 4 an index failed or answered with something refused, or
another envgen run is writing the data directory (nothing written; the refusal names it),
130/143 interrupted (nothing written, or the write had completed)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--write",
        action="store_true",
        help="write the new snapshot to <data dir>/harvested/ (default: only show the diff)",
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
    parser.add_argument(
        "--allow-removals",
        action="store_true",
        help="accept a refresh that removes many known records (a deliberate prune); "
        "without it, removing more than [refresh] max_removed_share of a file's records "
        "(sources.toml), or all of them, is refused with exit code 4",
    )
    parser.add_argument(
        "--only",
        choices=("indexes", "os-toolkits", "cell-digests"),
        help="refresh only these files and carry the others over unchanged: 'os-toolkits' "
        "reads only the OS package indexes ([[os_packages]] in sources.toml → "
        "harvested/os_toolkits.json); 'indexes' only the [[index]] ones (torch.json, "
        "frameworks.json, cuda.json); 'cell-digests' reads no index and only recomputes "
        "cell-digests.json from the facts as they are (after a hand edit of curated/)",
    )
    parser.add_argument("--backoff", type=float, default=0.5, help=argparse.SUPPRESS)
    parser.add_argument(
        "--ca-cert",
        metavar="FILE",
        help="CA bundle for TLS (e.g. a corporate proxy's); config ca-cert, env ENVGEN_CA_CERT, "
        "else $REQUESTS_CA_BUNDLE",
    )


def register(
    matrix_subparsers: Any, common: argparse.ArgumentParser | None = None
) -> argparse.ArgumentParser:
    """Add ``update`` to ``envgen matrix``; ``common`` is the CLI's shared-options parent."""
    parser = matrix_subparsers.add_parser(
        "update",
        parents=[common] if common is not None else [],
        help=help_for("update", "matrix"),
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.cli.options import cache_dir, one_ca_cert
    from envgen.facts.locate import check_data_dir
    from envgen.harvest.update import COMMAND
    from envgen.writelock import holding

    for flag, bad in (("--jobs", args.jobs < 1), ("--retries", args.retries < 0),
                      ("--timeout", not args.timeout > 0)):
        if bad:
            raise UsageError(f"{flag} {getattr(args, flag[2:])} is out of range",
                             hint="--jobs >= 1, --retries >= 0, --timeout > 0", source=flag)
    for item in args.index:
        validate.text(item, "--index", "--index")
    if args.only == "os-toolkits" and (args.index or args.all_indexes):
        raise UsageError("--only os-toolkits reads no [[index]]; --index / --all-indexes "
                         "would be ignored", hint="drop --index / --all-indexes, or --only",
                         source="--only")
    ca_cert = one_ca_cert(ctx, args)
    cache = cache_dir(ctx, args)
    data_dir = ctx.data_dir or ctx.matrix_dir
    if not args.write:
        return _refresh(args, ctx, data_dir, cache, ca_cert)
    check_data_dir(data_dir, ctx.source("data-dir"))
    # from reading the snapshot to the last rename: a second run refuses, naming this one
    with holding(data_dir, COMMAND, source=ctx.source("data-dir")):
        return _refresh(args, ctx, data_dir, cache, ca_cert)


def _refresh(args: argparse.Namespace, ctx: Context, data_dir, cache, ca_cert) -> int:
    from envgen.harvest.diff import render_text
    from envgen.harvest.update import UpdateOptions, update_matrix

    if args.only == "cell-digests":
        return _digests_only(args, ctx, data_dir)
    options = UpdateOptions(
        write=args.write,
        indexes=list(args.index),
        all_indexes=args.all_indexes,
        cache_dir=cache / "http",
        offline=args.offline,
        jobs=args.jobs,
        timeout=args.timeout,
        retries=args.retries,
        backoff=args.backoff,
        ca_cert=str(ca_cert) if ca_cert else None,
        allow_removals=args.allow_removals,
        only=args.only,
    )
    result = update_matrix(ctx.matrix_dir, options, progress=ctx.progress, data_dir=data_dir)
    for item in result.unread_builds:  # never fatal, never silent (--quiet included)
        print(f"warning: {item['release']}: could not read its build files ({item['error']}); "
              f"kept: {item['kept']}", file=ctx.err)
    for item in result.unread_os:
        print(f"warning: {item['os']}: could not read its CUDA toolkit package ({item['reason']}); "
              f"kept: {item['kept']}", file=ctx.err)
    digests = _write_digests(ctx, data_dir) if result.written and ctx.json else None
    if ctx.json:
        payload = {**result.diff, "written": result.written, "indexes": result.indexes,
                   "cell_digests": str(digests) if digests else None,
                   "target": str(result.target), "files_to_rewrite": result.stale,
                   "unread_builds": result.unread_builds, "unread_os": result.unread_os}
        print(json.dumps(payload, indent=2, sort_keys=True), file=ctx.out)
        return 0
    print(render_text(result.diff), file=ctx.out)
    if result.written:
        print(f"wrote {result.target}", file=ctx.out)
        digests = _write_digests(ctx, data_dir)
        if digests:
            print(f"wrote {digests}", file=ctx.out)
    elif result.changes:
        print(f"{result.changes} changes; run with --write to write them to {result.target}",
              file=ctx.out)
    elif result.stale:
        print(f"no fact changed, but {result.stale} file(s) gain provenance (how each file was "
              f"verified); --write writes them to {result.target}", file=ctx.out)
    return 0


def _write_digests(ctx: Context, data_dir):
    """After a written update: each GPU cell's digest of the facts that decide it, from the
    new snapshot (envgen.ci.digests), next to harvested/; None for a matrix without GPU
    cells (no cells.toml)."""
    from pathlib import Path

    from envgen.ci.digests import cell_digests, write
    from envgen.facts.matrix import Matrix

    if not (Path(ctx.matrix_dir) / "cells.toml").is_file():
        return None
    fresh = Matrix(matrix_dir=ctx.matrix_dir, data_dir=ctx.data_dir)
    return write(data_dir, cell_digests(fresh.cells, fresh.facts))


def _digests_only(args: argparse.Namespace, ctx: Context, data_dir) -> int:
    """--only cell-digests: the digests of the facts as they are; written with --write, else
    the cells whose digest differs from the file are listed."""
    from pathlib import Path

    from envgen.ci.digests import FILE, cell_digests, parse, write

    now = cell_digests(ctx.matrix.cells, ctx.matrix.facts)
    path = Path(data_dir) / FILE
    before = parse(path.read_text(encoding="utf-8"), str(path)) if path.is_file() else {}
    changed = sorted(c for c in now if before.get(c) != now[c])
    if args.write:
        write(data_dir, now)
    if ctx.json:
        print(json.dumps({"cell_digests": str(path), "changed": changed,
                          "written": bool(args.write)}, indent=2), file=ctx.out)
        return 0
    for cid in changed:
        print(f"changed  {cid}", file=ctx.out)
    verb = "wrote" if args.write else "would write (--write)"
    print(f"{len(changed)} of {len(now)} cells changed; {verb} {path}", file=ctx.out)
    return 0
