"""``python -m envgen.harvest [--matrix-dir DIR] [update options]`` — the update without the
full CLI (used by tests and handy while envgen.cli.main is unavailable)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envgen.cli.context import Context
from envgen.cli.matrix_update import add_arguments, run
from envgen.errors import EnvgenError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envgen.harvest")
    parser.add_argument("--matrix-dir", type=Path, default=Path("matrix"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(argv)
    ctx = Context(matrix_dir=args.matrix_dir, json=args.json, quiet=args.quiet)
    try:
        return run(args, ctx)
    except EnvgenError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
