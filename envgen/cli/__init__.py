"""The ``envgen`` command line: parse argv into a typed request, call one ``envgen.api``
function, render its result (text or ``--json``). Only this package prints or exits.

``entrypoint`` answers ``envgen --version`` (envgen's version and its data snapshot's date)
before importing anything else (argparse alone costs more than Python's start-up); every
other command goes through ``envgen.cli.main``,
which imports only the module of the command being run.
"""

import sys


def entrypoint() -> None:
    """The console script ``envgen``. It starts without garbage collection and ends without
    the interpreter's teardown once every exit function has run (envgen/cli/lifecycle.py)."""
    from envgen.cli import lifecycle

    lifecycle.begin()
    try:
        _run()
    except SystemExit as exc:
        lifecycle.leaving(exc.code)
        raise


def _run() -> None:
    import os

    if "_ARGCOMPLETE" in os.environ:  # a TAB in a shell with `envgen completion`'s script
        from envgen.cli.main import complete

        complete()
    if sys.argv[1:] in (["--version"], ["-V"]):
        from envgen.cli.version import version_text

        sys.stdout.write(version_text() + "\n")
        raise SystemExit(0)
    from envgen.cli.main import entrypoint as run

    run()
