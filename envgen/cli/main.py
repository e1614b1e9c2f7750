"""``envgen`` entry point: parse, dispatch, turn library errors into messages and exit codes.

Exit codes: 0 ok, 1 failure (network, data, build), 2 usage error or infeasible request.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from envgen import __version__
from envgen.cli import (
    build_cmd,
    install_cmd,
    make_cmd,
    matrix_github,
    matrix_show,
    matrix_update,
    resolve_cmd,
    results_cmd,
    table_cmd,
    verify_cmd,
)
from envgen.cli.context import Context
from envgen.config import find_config
from envgen.errors import EnvgenError, UsageError

DESCRIPTION = """\
envgen resolves DeepSpeed / Megatron-Core / Colossal-AI environments that install on the
first try: OS, Python, CUDA, PyTorch, NCCL and framework versions that are known to fit,
from a compatibility matrix harvested from the real package indexes, and locks them (conda +
pip, every file hash-pinned, nvcc matching torch's CUDA exactly).
"""

EPILOG = """\
examples:
  envgen resolve --framework deepspeed --cuda 12.1
  envgen resolve --framework megatron-core --gpu-arch sm_90 --driver 535.104.05 --json
  envgen make --framework deepspeed --cuda 12.1            # locks in ./locks/<id>/
  envgen install locks/<id> --prefix ./env
  envgen make --framework deepspeed --cuda 13.2 --flavor venv --gpu-arch sm_90 --image
  envgen build locks/<id>         # the image, ops compiled, tagged by content
  envgen matrix show --kind torch --cuda 12.4
  envgen matrix update            # show what changed on the indexes
  envgen matrix update --write    # and write it into matrix/

exit codes: 0 ok, 1 failure, 2 usage error or no feasible combination.
configuration: envgen.toml or [tool.envgen] in pyproject.toml; see README "Configuration".
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 already; add the hint line
        self.print_usage(sys.stderr)
        print(f"envgen: error: {message}\n  hint: run `{self.prog} --help` for the options",
              file=sys.stderr)
        raise SystemExit(2)


def common_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="machine-readable JSON on stdout")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="no progress output on stderr")
    g.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="more detail on stderr")
    g.add_argument("--matrix-dir", metavar="DIR", default=argparse.SUPPRESS,
                   help="the matrix data directory (default: $ENVGEN_MATRIX_DIR, config "
                   "matrix-dir, then the one shipped with envgen)")
    return p


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = _Parser(prog="envgen", description=DESCRIPTION, epilog=EPILOG, parents=[common],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"envgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    resolve_cmd.register(sub, common)
    make_cmd.register(sub, common)
    install_cmd.register(sub, common)
    build_cmd.register(sub, common)
    results_cmd.register(sub, common)
    table_cmd.register(sub, common)
    verify_cmd.register(sub, common)
    matrix = sub.add_parser(
        "matrix", help="show or refresh the compatibility matrix", parents=[common],
        description="The compatibility matrix: facts harvested from package indexes plus "
        "curated rules, each with its source.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    msub = matrix.add_subparsers(dest="matrix_command", metavar="SUBCOMMAND",
                                 parser_class=_Parser)
    matrix_show.register(msub, common)
    matrix_update.register(msub, common)
    matrix_github.register(msub, common)
    matrix.set_defaults(func=lambda args, ctx: _missing(matrix))
    return parser


def _missing(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def make_context(args: argparse.Namespace) -> Context:
    from envgen.facts.locate import find_matrix_dir

    _, config = find_config()
    matrix_dir = getattr(args, "matrix_dir", None) or config.get("matrix-dir")
    return Context(
        matrix_dir=find_matrix_dir(matrix_dir),
        json=getattr(args, "json", False),
        quiet=getattr(args, "quiet", False),
        verbose=getattr(args, "verbose", False),
        config=config,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        ctx = make_context(args)
        return int(args.func(args, ctx) or 0)
    except EnvgenError as exc:
        report = getattr(exc, "report", None)
        if report:
            print(report, file=sys.stderr)
        print(f"envgen: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("envgen: interrupted; nothing was written", file=sys.stderr)
        return 130


def entrypoint() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `envgen ... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    raise SystemExit(code)


__all__ = ["UsageError", "build_parser", "entrypoint", "main"]
