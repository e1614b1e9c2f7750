"""``envgen`` entry point: parse, dispatch, and turn every failure into one message and one
exit code (the only place that exits).

Exit codes: 0 ok, 1 failure or problems found, 2 usage, 3 infeasible request, 4 environment
(index, daemon, registry, filesystem); 130 / 143 after SIGINT / SIGTERM (work rolled back).
With ``--json`` every error is also ``{"error": {"kind", "message", "fix", "source"}}`` on
stdout. No traceback reaches the user unless ``--debug``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence

from envgen import __version__
from envgen.cli import (
    build_cmd,
    evidence_cmd,
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
from envgen.errors import (
    EnvgenError,
    Interrupted,
    UsageError,
    filesystem_error,
    rollback_notes,
)

DESCRIPTION = """\
envgen resolves DeepSpeed / Megatron-Core / Colossal-AI environments that install on the
first try: OS, Python, CUDA, PyTorch, NCCL and framework versions that are known to fit,
from a compatibility matrix harvested from the real package indexes, and locks them (conda +
pip, every file hash-pinned, nvcc matching torch's CUDA exactly).
"""

EXIT_CODES = """\
exit codes: 0 ok, 1 failure or problems found, 2 usage error, 3 no feasible combination,
4 environment (index, Docker daemon, registry, filesystem), 130/143 interrupted (rolled back).
With --json, errors are {"error": {"kind", "message", "fix", "source"}} on stdout."""

EPILOG = f"""\
examples:
  envgen resolve --framework deepspeed --cuda 12.1
  envgen resolve --framework megatron-core --gpu-arch sm_90 --driver 535.104.05 --json
  envgen make --framework deepspeed --cuda 12.1            # locks in ./locks/<id>/
  envgen install locks/<id> --prefix ./env
  envgen make --framework deepspeed --cuda 13.2 --flavor venv --gpu-arch sm_90 --image
  envgen build locks/<id>         # the image, ops compiled, tagged by content
  envgen matrix show --kind torch --cuda 12.4
  envgen matrix update            # show what changed on the indexes
  envgen matrix update --write    # and write it into the data directory

{EXIT_CODES}
configuration: envgen.toml or [tool.envgen] in pyproject.toml; see README "Configuration".
"""

_ARG_SOURCE = re.compile(r"^argument (-[-\w]+)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # a usage error like any other (text or JSON)
        match = _ARG_SOURCE.match(message)
        err = UsageError(message, hint=f"run `{self.prog} --help` for the options",
                         source=match.group(1) if match else None)
        err.report = self.format_usage().rstrip()
        raise err


def common_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="machine-readable JSON on stdout (errors too)")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="no progress output on stderr")
    g.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="more detail on stderr")
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an unexpected error")
    g.add_argument("--matrix-dir", metavar="DIR", default=argparse.SUPPRESS,
                   help="the matrix data to read (default: config matrix-dir, "
                   "$ENVGEN_MATRIX_DIR, then the one shipped with envgen)")
    g.add_argument("--data", metavar="DIR", default=argparse.SUPPRESS,
                   help="where refreshed facts and result records are written (default: "
                   "config data-dir, $ENVGEN_DATA, the matrix of a checkout, else "
                   "~/.local/share/envgen); never the installed package")
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
    evidence_cmd.register(sub, common)
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
    matrix.set_defaults(func=lambda args, ctx: _missing(matrix, "matrix SUBCOMMAND"))
    return parser


def _missing(parser: argparse.ArgumentParser, what: str) -> int:
    raise UsageError(f"{parser.prog}: which {what.split()[-1].lower()}?",
                     hint=f"run `{parser.prog} --help` to list them")


def make_context(args: argparse.Namespace) -> Context:
    from envgen.facts.locate import check_data_dir, default_data_dir, find_matrix_dir

    config_path, config = find_config()
    ctx = Context(matrix_dir=None, json=getattr(args, "json", False),  # type: ignore[arg-type]
                  quiet=getattr(args, "quiet", False), verbose=getattr(args, "verbose", False),
                  config=config, config_path=config_path)
    explicit = ctx.setting(args, "matrix-dir")
    ctx.matrix_dir = find_matrix_dir(explicit, ctx.source("matrix-dir"))
    data = ctx.setting(args, "data-dir")
    ctx.data_dir = check_data_dir(data, ctx.source("data-dir")) if data else default_data_dir(
        ctx.matrix_dir)
    return ctx


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM (CI cancellation, `timeout`, `docker stop`) raises errors.Interrupted, so the
    same rollbacks run as for Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise Interrupted(signum)

    saved = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)


def _wants(argv: list[str], flag: str) -> bool:
    head = argv[:argv.index("--")] if "--" in argv else argv
    return flag in head


def _report(err: EnvgenError, as_json: bool) -> int:
    report = getattr(err, "report", None)
    if report:
        print(report, file=sys.stderr)
    print(f"envgen: error: {err.message}", file=sys.stderr)
    if err.source:
        print(f"  source: {err.source}", file=sys.stderr)
    if err.hint:
        print(f"  hint: {err.hint}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": err.to_dict()}, indent=2, ensure_ascii=False))
    return err.exit_code


def _interrupted(exc: KeyboardInterrupt, as_json: bool) -> int:
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    name = signal.Signals(signum).name
    notes = rollback_notes(exc)
    done = "; ".join(notes) if notes else "nothing was written"
    message = f"interrupted by {name}; {done}"
    print(f"envgen: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": {"kind": "interrupted", "message": message, "fix": None,
                                    "source": name}}, indent=2))
    return 128 + signum


def _tolerant_streams() -> None:
    """Never fail on output: a character the terminal's encoding lacks (PYTHONIOENCODING=ascii,
    a path that is not UTF-8) is written as an escape instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            with contextlib.suppress(ValueError, OSError):  # a detached or closed stream
                stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _tolerant_streams()
    as_json, debug = _wants(argv, "--json"), _wants(argv, "--debug")
    with _sigterm_raises():
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            if not getattr(args, "func", None):
                parser.print_help(sys.stderr)
                raise UsageError("which command?", hint="run `envgen --help` to list them")
            ctx = make_context(args)
            return int(args.func(args, ctx) or 0)
        except EnvgenError as exc:
            if debug:
                traceback.print_exc()
            return _report(exc, as_json)
        except KeyboardInterrupt as exc:
            return _interrupted(exc, as_json)
        except BrokenPipeError:
            raise  # the reader of stdout left: entrypoint() handles it
        except OSError as exc:  # a filesystem error no layer expected
            if debug:
                traceback.print_exc()
            return _report(filesystem_error(exc, "accessing", exc.filename), as_json)
        except Exception as exc:  # a bug: say so, keep the traceback for --debug
            if debug:
                traceback.print_exc()
            err = EnvgenError(f"internal error: {type(exc).__name__}: {exc}",
                              hint="this is a bug in envgen; rerun with --debug for the "
                              "traceback and report it")
            err.kind = "internal"
            return _report(err, as_json)


def entrypoint() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `envgen ... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    raise SystemExit(code)


__all__ = ["UsageError", "build_parser", "entrypoint", "main"]
