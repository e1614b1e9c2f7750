"""Which Python the venv flavors build on: found on PATH, in pyenv's versions, uv's managed
Pythons and conda (a shim that would run another version skipped, a broken interpreter left
out), --python checked against the lock, and a missing one named with the Pythons found and
the command that gets it. Interpreters are small executables that answer like python does."""

from __future__ import annotations

import pytest

from envgen.errors import EnvironmentProblem, UsageError
from envgen.lock import envs, pythons
from envgen.resolve import Request, resolve
from envgen.resolve.request import validate


def _python(folder, name: str, answer: str | None, code: int = 0):
    """An executable ``folder/name`` that answers the version probe with ``answer``."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text(f"#!/bin/sh\n{'echo ' + answer if answer else 'echo broken >&2'}\n"
                   f"exit {code}\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A machine whose only Pythons are the ones a test makes (PATH, HOME, managers)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("PYENV_ROOT", "UV_PYTHON_INSTALL_DIR", "XDG_DATA_HOME", "CONDA_PREFIX",
                "CONDA_ROOT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(pythons, "SYSTEM_DIRS", ())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return home, bin_dir


def test_path_first_then_the_managers_and_never_a_shim(machine, tmp_path, monkeypatch):
    home, bin_dir = machine
    _python(bin_dir, "python3.11", "3.11")
    shims = home / ".pyenv" / "shims"
    _python(shims, "python3.12", None, code=127)  # pyenv: "version `3.12' is not installed"
    monkeypatch.setenv("PATH", f"{bin_dir}:{shims}")
    real = _python(home / ".pyenv" / "versions" / "3.12.1" / "bin", "python3.12", "3.12")
    uv = _python(home / ".local" / "share" / "uv" / "python" / "cpython-3.13.1" / "bin",
                 "python3.13", "3.13")
    conda = _python(home / "miniforge3" / "envs" / "py310" / "bin", "python3.10", "3.10")
    found = pythons.installed()
    assert [(f.version, f.path, f.source) for f in found] == [
        ("3.11", str(bin_dir / "python3.11"), "PATH"), ("3.12", str(real), "pyenv"),
        ("3.13", str(uv), "uv"), ("3.10", str(conda), "conda")]
    assert [f.version for f in pythons.listed()] == ["3.11", "3.12", "3.13", "3.10"]
    assert envs.choose_python("3.12") == str(real)


def test_a_broken_interpreter_is_left_out_and_the_error_says_what_to_run(machine):
    _, bin_dir = machine
    _python(bin_dir, "python3.12", None, code=1)  # its name says 3.12; it does not run
    _python(bin_dir, "python3.11", "3.11")
    assert [f.version for f in pythons.installed()] == ["3.11"]
    with pytest.raises(EnvironmentProblem) as err:
        envs.choose_python("3.12")
    assert "no Python 3.12 on this machine" in err.value.message
    assert "found: 3.11 (" in err.value.message
    assert "uv python install 3.12" in err.value.hint and "--python 3.11" in err.value.hint
    assert err.value.exit_code == 4


def test_python_option_is_checked_against_the_lock(machine):
    _, bin_dir = machine
    py311 = _python(bin_dir, "python3.11", "3.11")
    py312 = _python(bin_dir / "other", "python3", "3.12")
    assert envs.choose_python("3.12", str(py312)) == str(py312)
    assert envs.choose_python("3.11", "3.11") == str(py311)
    with pytest.raises(UsageError, match=r"is Python 3\.11; this lock is for Python 3\.12"):
        envs.choose_python("3.12", str(py311))
    with pytest.raises(UsageError, match=r"--python 3\.11: this lock is for Python 3\.12"):
        envs.choose_python("3.12", "3.11")
    with pytest.raises(UsageError, match="not a Python interpreter that runs here"):
        envs.choose_python("3.12", str(bin_dir / "missing" / "python"))


def test_target_pythons_narrow_the_resolve_and_explain_themselves(fixture_matrix):
    from envgen.errors import InfeasibleError
    from envgen.facts.matrix import Matrix

    facts = Matrix.locate(str(fixture_matrix)).facts
    request = Request(framework="deepspeed")
    every = {c.python for c in resolve(request, facts, limit=None)}
    one = sorted(every)[0]
    assert {c.python for c in resolve(Request(framework="deepspeed",
                                    pythons=(one,)), facts, limit=None)} == {one}
    assert validate(Request(pythons=(one,)), facts).given() == {}  # not an option given
    with pytest.raises(InfeasibleError) as err:
        resolve(Request(framework="deepspeed", pythons=("3.99",)), facts)
    removed = {r.constraint: r for r in err.value.explanation.removed}
    assert "is not on this machine (found: 3.99)" in removed["target-python"].example


def test_an_image_of_a_venv_flavor_takes_the_base_images_python(fixture_matrix):
    from envgen.facts.matrix import Matrix

    facts = Matrix.locate(str(fixture_matrix)).facts
    combos = resolve(Request(framework="deepspeed"), facts, limit=None)
    os_ids = sorted({c.os for c in combos})
    pairs = {c.os: c.python for c in combos}
    pinned = tuple((o, (pairs[o],)) for o in os_ids)
    got = resolve(Request(framework="deepspeed", os_pythons=pinned), facts,
                  limit=None)
    assert got and all(c.python == dict(pinned)[c.os][0] for c in got)
