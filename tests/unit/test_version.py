"""`envgen --version`: envgen's version and the date of the data snapshot it answers from."""

from __future__ import annotations

import json
import re
import shutil

from support.run import run_envgen

from envgen import __version__


def test_version_names_the_data_snapshot(fixture_matrix):
    import os

    env = {**os.environ, "ENVGEN_MATRIX_DIR": str(fixture_matrix)}
    for flag in ("--version", "-V"):
        proc = run_envgen(flag, env=env)
        assert proc.returncode == 0, proc.stderr
        first, second = proc.stdout.splitlines()
        assert first == f"envgen {__version__}"
        date = json.loads((fixture_matrix / "harvested" / "torch.json").read_text())[
            "generated"]["date"]
        assert second == f"data snapshot {date} (shipped: {fixture_matrix / 'harvested'})"


def test_a_newer_refreshed_snapshot_is_the_one_named(fixture_matrix, tmp_path):
    import os

    data = tmp_path / "data"
    shutil.copytree(fixture_matrix / "harvested", data / "harvested")
    torch = data / "harvested" / "torch.json"
    doc = json.loads(torch.read_text())
    doc["generated"]["date"] = "2099-01-02"
    torch.write_text(json.dumps(doc, indent=2, sort_keys=True))
    env = {**os.environ, "ENVGEN_MATRIX_DIR": str(fixture_matrix), "ENVGEN_DATA": str(data)}
    proc = run_envgen("--version", env=env)
    assert re.fullmatch(r"data snapshot 2099-01-02 \(refreshed by `envgen matrix update`: "
                        r".*/data/harvested\)", proc.stdout.splitlines()[1])


def test_without_data_the_version_says_so(tmp_path):
    import os

    env = {**os.environ, "ENVGEN_MATRIX_DIR": str(tmp_path / "nowhere")}
    proc = run_envgen("--version", env=env)
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[1].startswith("data: none found (no matrix data at ")


def test_the_usual_case_says_what_the_general_path_says(monkeypatch, tmp_path):
    """The fast path (no pathlib, json, re or platformdirs) against the general one, for a
    checkout with no config file and no variables; both name the same snapshot."""
    from envgen.cli import version

    for name in ("ENVGEN_MATRIX_DIR", "ENVGEN_DATA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    fast = version._usual_case()
    assert fast is not None and fast == version._general()
    assert fast.splitlines()[1].startswith("data snapshot ")
    (tmp_path / "envgen.toml").write_text('matrix-dir = "elsewhere"\n')
    assert version._usual_case() is None  # a config naming a directory: the general path


def test_the_linux_data_dir_is_platformdirs_own(monkeypatch, tmp_path):
    import platformdirs

    from envgen.cli.version import _linux_user_data_dir

    for value in (str(tmp_path / "xdg"), "", "   "):
        monkeypatch.setenv("XDG_DATA_HOME", value)
        assert _linux_user_data_dir() == platformdirs.user_data_dir("envgen", appauthor=False)
    monkeypatch.delenv("XDG_DATA_HOME")
    assert _linux_user_data_dir() == platformdirs.user_data_dir("envgen", appauthor=False)


def test_the_date_is_read_as_the_facts_loader_reads_it(fixture_matrix, tmp_path):
    from envgen.cli.version import _date_of
    from envgen.facts.locate import find_matrix_dir, generated_date

    for harvested in (fixture_matrix / "harvested", find_matrix_dir() / "harvested"):
        assert _date_of(str(harvested)) == generated_date(harvested) is not None
    (tmp_path / "torch.json").write_text('{"generated": {"date": "soon"}}')
    assert _date_of(str(tmp_path)) is None
    assert _date_of(str(tmp_path / "missing")) is None
