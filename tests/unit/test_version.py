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
