"""The ``envgen`` command line: parse argv into a typed request, call one ``envgen.api``
function, render its result (text or ``--json``). Only this package prints or exits.

``entrypoint`` answers ``envgen --version`` before importing anything else (argparse alone
costs more than Python's start-up); every other command goes through ``envgen.cli.main``,
which imports only the module of the command being run.
"""

import sys


def entrypoint() -> None:
    """The console script ``envgen``."""
    if sys.argv[1:] in (["--version"], ["-V"]):
        from envgen import __version__

        sys.stdout.write(f"envgen {__version__}\n")
        raise SystemExit(0)
    from envgen.cli.main import entrypoint as run

    run()
