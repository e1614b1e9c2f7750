"""``python -m envgen.harvest [--matrix-dir DIR] [update options]`` — the update without the
full CLI (used by tests and handy while envgen.cli.main is unavailable).

Like the CLI: SIGTERM raises :class:`envgen.errors.Interrupted` so the same rollbacks run as
for Ctrl-C; an interrupt exits 130 (SIGINT) / 143 (SIGTERM) after saying what was rolled back;
an error prints its report (e.g. the refused diff), message and hint and exits with its code.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from envgen.cli.context import Context
from envgen.cli.matrix_update import add_arguments, run
from envgen.errors import EnvgenError, Interrupted, rollback_notes


def _raise_interrupted(signum, _frame):
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envgen.harvest")
    parser.add_argument("--matrix-dir", type=Path, default=Path("matrix"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(argv)
    ctx = Context(matrix_dir=args.matrix_dir, json=args.json, quiet=args.quiet)
    main_thread = threading.current_thread() is threading.main_thread()
    saved = signal.signal(signal.SIGTERM, _raise_interrupted) if main_thread else None
    try:
        return run(args, ctx)
    except EnvgenError as err:
        report = getattr(err, "report", None)
        if report:
            print(report, file=sys.stderr)
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        done = "; ".join(rollback_notes(exc)) or "nothing was written"
        print(f"interrupted by {signal.Signals(signum).name}; {done}", file=sys.stderr)
        return 128 + signum
    finally:
        if saved is not None:
            signal.signal(signal.SIGTERM, saved)


if __name__ == "__main__":
    sys.exit(main())
