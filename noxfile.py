"""Developer and CI sessions. `nox -l` lists them; `nox -s tests` is what CI runs."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit and integration tests (loopback index servers, subprocesses; no internet).

    Extra arguments go to pytest: `nox -s tests -- -m "not integration" -x`.
    """
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-m", "not network"]))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the package, tests, benchmarks and this file."""
    session.install("ruff==0.17.6")
    session.run("ruff", "check", "envgen", "tests", "benchmarks", "noxfile.py")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Resolver and lock benchmarks (medians; README "Benchmarks"). The lock benchmark
    resolves its pip part against PyPI, so it needs the network."""
    session.install("-e", ".[test]")  # the lock benchmark builds its channel with tests/support
    session.run("python", "benchmarks/bench_resolve.py")
    session.run("python", "benchmarks/bench_lock.py", *session.posargs)


@nox.session(python=PYTHON)
def update(session: nox.Session) -> None:
    """Refresh matrix/ from the package indexes: shows the diff; `nox -s update -- --write`."""
    session.install("-e", ".")
    session.run("envgen", "matrix", "update", *session.posargs)
