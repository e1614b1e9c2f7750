"""The GitHub workflows, validated against the GitHub workflow schema that check-jsonschema
bundles (offline), and the wiring between them and envgen."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

WORKFLOWS = sorted((Path(__file__).parents[2] / ".github" / "workflows").glob("*.yml"))


def test_there_are_the_five_workflows():
    assert {p.stem for p in WORKFLOWS} >= {"ci", "gpu", "refresh", "images", "docs"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_the_github_schema(workflow):
    exe = shutil.which("check-jsonschema")
    assert exe, "check-jsonschema missing: pip install -e .[test]"
    proc = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(workflow)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_schema_check_catches_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - uses: actions/checkout@v4\n        run: echo both\n"
                   "    timeout-minutes: soon\n")
    proc = subprocess.run([shutil.which("check-jsonschema"), "--builtin-schema",
                           "vendor.github-workflows", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 1


def test_gpu_workflow_uses_envgens_matrix_and_sessions():
    text = (Path(__file__).parents[2] / ".github/workflows/gpu.yml").read_text()
    assert "envgen matrix github" in text and "fromJSON(needs.plan.outputs.matrix)" in text
    for session in ("image", "ops", "smoke", "publish"):
        assert f"nox -s {session}" in text
    assert "self-hosted" in text
