"""The fault-injection suite: every test is one class of bad input or fault, run through the
real CLI (in-process for speed, or as a subprocess where signals and exit statuses matter),
against real local services. Each asserts the exit code, the message (what, why, the fix, and
where a bad value came from), that no partial or hidden file was left, and that the data that
was there before is intact.

Mark a test ``@pytest.mark.fault("ID", "what goes wrong", exit=N)``; `pytest -m fault` runs
the suite and ends with a table of the classes and their exit codes.
"""

from __future__ import annotations

import os

import pytest
from support.faultkit import Result

from envgen.cli.main import main

_RESULTS: list[tuple[str, str, int, str]] = []


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run envgen in-process in an empty working directory (no envgen.toml from the
    checkout); returns a Result. ``env`` sets environment variables for that run only."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for key in [k for k in os.environ if k.startswith("ENVGEN_")]:
        monkeypatch.delenv(key)

    def run(*argv: str, env: dict[str, str] | None = None) -> Result:
        with monkeypatch.context() as m:
            for key, value in (env or {}).items():
                m.setenv(key, value)
            code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        assert "Traceback" not in err, err
        return Result(code, out, err)

    return run


def pytest_runtest_logreport(report):
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    marker = dict(report.keywords).get("fault")
    if marker is None:
        return
    info = getattr(report, "fault_info", None)
    if info:
        _RESULTS.append((*info, report.outcome))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("fault")
    if marker is not None:
        fid, title = marker.args[:2]
        report.fault_info = (fid, title, marker.kwargs.get("exit"))


def pytest_terminal_summary(terminalreporter):
    if not _RESULTS:
        return
    seen: dict[str, tuple] = {}
    for fid, title, code, outcome in _RESULTS:
        if fid not in seen or outcome != "passed":
            seen[fid] = (title, code, outcome)
    ok = sum(1 for _, _, o in seen.values() if o == "passed")
    tr = terminalreporter
    tr.section(f"fault-injection suite: {len(seen)} classes, {ok} handled")
    if tr.config.getoption("markexpr", "") == "fault" or os.environ.get("ENVGEN_FAULT_TABLE"):
        for fid in sorted(seen, key=lambda f: (f[0], int(f[1:]) if f[1:].isdigit() else 0)):
            title, code, outcome = seen[fid]
            tr.write_line(f"{fid:<5} exit {code!s:<4} {outcome:<8} {title}")
