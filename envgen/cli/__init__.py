"""The ``envgen`` command line: parse argv into a typed request, call one ``envgen.api``
function, render its result (text or ``--json``). Only this package prints or exits.

``entrypoint`` answers ``envgen --version`` (envgen's version and its data snapshot's date)
before importing anything else (argparse alone costs more than Python's start-up); every
other command goes through ``envgen.cli.main``,
which imports only the module of the command being run.
"""

import sys


def _standard_streams() -> None:
    """A standard stream the caller closed (``envgen ... >&-``, a daemon's closed stdin) is
    opened on /dev/null: no file envgen opens later can land on fd 0-2 (where a child process
    or a print would write into it). Python leaves ``sys.stdin`` None for a closed stdin, so
    ``--report -`` still says it is closed; closed output streams read as /dev/null and the
    command exits with its own code."""
    import os

    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if name != "stdin":
                setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 (for the process)


def entrypoint() -> None:
    """The console script ``envgen``."""
    import os

    _standard_streams()
    if "_ARGCOMPLETE" in os.environ:  # a TAB in a shell with `envgen completion`'s script
        from envgen.cli.main import complete

        complete()
    if sys.argv[1:] in (["--version"], ["-V"]):
        from envgen.cli.version import version_text

        sys.stdout.write(version_text() + "\n")
        raise SystemExit(0)
    from envgen.cli.main import entrypoint as run

    run()
