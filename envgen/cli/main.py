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
import functools
import importlib
import os
import re
import signal
import sys
from collections.abc import Iterator, Sequence

from envgen import __version__  # noqa: F401 (the CLI's version, for tools)
from envgen.cli.commands import COMMANDS, MATRIX_COMMANDS
from envgen.cli.context import Context
from envgen.cli.progress import wants_bars
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
  envgen make --framework deepspeed --cuda 13.2 --flavor venv --os debian-12 --python 3.11 \\
      --gpu-arch sm_90 --image
  envgen build locks/<id>         # the image, ops compiled, tagged by content
  envgen matrix show --kind torch --cuda 12.4
  envgen matrix update            # show what changed on the indexes
  envgen matrix update --write    # and write it into the data directory

{EXIT_CODES}
configuration: envgen.toml or [tool.envgen] in pyproject.toml; see docs/errors.md, "Configuration".
"""

_ARG_SOURCE = r"^argument (-[-\w]+)"  # (compiled, and cached by re, on a usage error only)


def _columns() -> int:
    """The terminal's width, as ``shutil.get_terminal_size`` gives it ($COLUMNS, then stdout's
    terminal, else 80). Hand-written (reason: argparse imports shutil, and with it bz2, lzma
    and zlib, ~3 ms, for each parser it makes when not given a width)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    @functools.cached_property
    def _width(self) -> int:  # (found once per parser: argparse asks for each argument added)
        return _columns() - 2  # as argparse: -2

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=self._width)

    def error(self, message: str):  # a usage error like any other (text or JSON)
        match = re.match(_ARG_SOURCE, message)
        err = UsageError(message, hint=f"run `{self.prog} --help` for the options",
                         source=match.group(1) if match else None)
        err.report = self.format_usage().rstrip()
        raise err


def common_options() -> argparse.ArgumentParser:
    p = _Parser(add_help=False)
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


_VALUED = ("--matrix-dir", "--data")  # global options that take a value


def _selected(argv: Sequence[str] | None) -> tuple[str | None, str | None]:
    """(command, matrix subcommand) named in ``argv``; (None, None) for all (``argv`` None)."""
    if argv is None:
        return None, None
    words, skip = [], False
    for word in argv:
        if word == "--":
            break
        if skip:
            skip = False
        elif word in _VALUED:
            skip = True
        elif not word.startswith("-"):
            words.append(word)
    command = words[0] if words and words[0] in COMMANDS else ""
    sub = words[1] if command == "matrix" and len(words) > 1 else ""
    return command, sub if sub in MATRIX_COMMANDS else ""


def _add(sub, name: str, module: str | None, help_text: str, selected: str | None,
         common: argparse.ArgumentParser) -> None:
    """The command's full parser when it is the one run (or all are wanted); else, when no
    known command is named (``selected`` ""), a stub that only lists it in the help and the
    error; else nothing: the modules of the other commands are never imported."""
    if selected is None or selected == name:
        importlib.import_module(module).register(sub, common)
    elif not selected:
        sub.add_parser(name, help=help_text, add_help=False)


class VersionAction(argparse.Action):
    """argparse's ``version`` action, with the text made when it is asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print envgen's version and its data snapshot's date, then exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from envgen.cli.version import version_text

        sys.stdout.write(version_text() + "\n")
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv`` only the command it names is set up in full."""
    command, subcommand = _selected(argv)
    common = common_options()
    parser = _Parser(prog="envgen", description=DESCRIPTION, epilog=EPILOG, parents=[common],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-V", "--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        if module is not None:
            _add(sub, name, module, help_text, command, common)
            continue
        if command not in (None, name):
            if not command:
                sub.add_parser(name, help=help_text, add_help=False)
            continue
        matrix = sub.add_parser(
            "matrix", help=help_text, parents=[common],
            description="The compatibility matrix: facts harvested from package indexes plus "
            "curated rules, each with its source.",
            formatter_class=argparse.RawDescriptionHelpFormatter)
        msub = matrix.add_subparsers(dest="matrix_command", metavar="SUBCOMMAND",
                                     parser_class=_Parser)
        for mname, (mmodule, mhelp) in MATRIX_COMMANDS.items():
            _add(msub, mname, mmodule, mhelp, subcommand or None, common)
        matrix.set_defaults(func=lambda args, ctx, m=matrix: _missing(m, "matrix SUBCOMMAND"))
    return parser


def _missing(parser: argparse.ArgumentParser, what: str) -> int:
    raise UsageError(f"{parser.prog}: which {what.split()[-1].lower()}?",
                     hint=f"run `{parser.prog} --help` to list them")


def make_context(args: argparse.Namespace) -> Context:
    from envgen.config import find_config
    from envgen.facts.matrix import Matrix

    config_path, config = find_config()
    ctx = Context(matrix_dir=None, json=getattr(args, "json", False),  # type: ignore[arg-type]
                  quiet=getattr(args, "quiet", False), verbose=getattr(args, "verbose", False),
                  config=config, config_path=config_path)
    explicit = ctx.setting(args, "matrix-dir")
    data = ctx.setting(args, "data-dir")
    matrix = Matrix.locate(explicit, data, matrix_source=ctx.source("matrix-dir"),
                           data_source=ctx.source("data-dir"))
    ctx.__dict__["matrix"] = matrix  # the cached Context.matrix (and matrix_dir, data_dir)
    if wants_bars(ctx.err, ctx.quiet, ctx.json):  # (cli.progress: only where bars may be)
        from envgen.cli.progress import EndsProgress

        ctx.out = EndsProgress(ctx.out, ctx)  # type: ignore[assignment]
    return ctx


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM (CI cancellation, `timeout`, `docker stop`) raises errors.Interrupted, so the
    same rollbacks run as for Ctrl-C."""

    def handler(signum, _frame):
        raise Interrupted(signum)

    try:
        saved = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: only it may handle signals
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)


def _wants(argv: list[str], flag: str) -> bool:
    head = argv[:argv.index("--")] if "--" in argv else argv
    return flag in head


def _report(err: EnvgenError, as_json: bool) -> int:
    from envgen.lock.secrets import shown_text as secret_free  # no URL's credentials
    from envgen.validate import shown_lines  # no control character reaches the terminal

    def shown_text(text: str) -> str:
        return shown_lines(secret_free(text))

    report = getattr(err, "report", None)
    if report:
        print(shown_text(report), file=sys.stderr)
    print(f"envgen: error: {shown_text(err.message)}", file=sys.stderr)
    if err.source:
        print(f"  source: {shown_text(err.source)}", file=sys.stderr)
    if err.hint:
        print(f"  hint: {shown_text(err.hint)}", file=sys.stderr)
    if as_json:
        import json

        doc = err.to_dict()
        doc.update({k: shown_text(v) for k, v in doc.items()
                    if k in ("message", "fix") and isinstance(v, str)})
        print(json.dumps({"error": doc}, indent=2, ensure_ascii=False))
    return err.exit_code


def _stop_children() -> None:
    """Kill every program still running that envgen started (an ssh, a compiler, a check),
    with its process group, so the exit is not held up and nothing is left behind."""
    proc = sys.modules.get("envgen.proc")  # (imported only by commands that start programs)
    if proc is not None:
        proc.kill_all()


def _interrupted(exc: KeyboardInterrupt, as_json: bool) -> int:
    import signal

    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    name = signal.Signals(signum).name
    notes = rollback_notes(exc)
    done = "; ".join(notes) if notes else "nothing was written"
    message = f"interrupted by {name}; {done}"
    print(f"envgen: {message}", file=sys.stderr)
    if as_json:
        import json

        print(json.dumps({"error": {"kind": "interrupted", "message": message, "fix": None,
                                    "source": name}}, indent=2))
    return 128 + signum


def _traceback() -> None:
    import traceback

    traceback.print_exc()


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
    if "envgen.proc" in sys.modules:  # an earlier main() in this process was interrupted
        sys.modules["envgen.proc"].resume()
    with _sigterm_raises():
        try:
            parser = build_parser(argv)
            args = parser.parse_args(argv)
            if not getattr(args, "func", None):
                parser.print_help(sys.stderr)
                raise UsageError("which command?", hint="run `envgen --help` to list them")
            ctx = make_context(args)
            try:
                return int(args.func(args, ctx) or 0)
            finally:
                ctx.close()
        except EnvgenError as exc:
            if debug:
                _traceback()
            return _report(exc, as_json)
        except KeyboardInterrupt as exc:
            _stop_children()
            return _interrupted(exc, as_json)
        except BrokenPipeError:
            raise  # the reader of stdout left: entrypoint() handles it
        except OSError as exc:  # a filesystem error no layer expected
            if debug:
                _traceback()
            return _report(filesystem_error(exc, "accessing", exc.filename), as_json)
        except Exception as exc:  # a bug: say so, keep the traceback for --debug
            if debug:
                _traceback()
            err = EnvgenError(f"internal error: {type(exc).__name__}: {exc}",
                              hint="this is a bug in envgen; rerun with --debug for the "
                              "traceback and report it")
            err.kind = "internal"
            return _report(err, as_json)


def complete() -> None:
    """Answer a shell's completion request (argcomplete's protocol: the words in the
    environment, the candidates on fd 8), then exit. The parser is built for the words
    before the one being completed, as for a run: a named command's module alone."""
    import argcomplete

    line = os.environ.get("COMP_LINE", "")
    with contextlib.suppress(ValueError):
        line = line[:int(os.environ.get("COMP_POINT", len(line)))]
    words = line.split()[1:]  # without the program's name
    if words and not line[-1:].isspace():
        words.pop()  # the word being completed
    argcomplete.autocomplete(build_parser(words), always_complete_options=False)
    raise SystemExit(0)  # not reached: autocomplete exits when it answers


def entrypoint() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `envgen ... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    raise SystemExit(code)


__all__ = ["UsageError", "build_parser", "entrypoint", "main"]
