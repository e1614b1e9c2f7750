"""`envgen results add|show` and `envgen table` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from results_data import GOLDEN, INVALID, RECORDS
from support.run import run_envgen

pytestmark = pytest.mark.integration


@pytest.fixture
def env(fixture_matrix, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no envgen.toml / pyproject.toml from the checkout
    return {**os.environ, "ENVGEN_MATRIX_DIR": str(fixture_matrix)}


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("argv", [("results", "--help"), ("results", "add", "--help"),
                                  ("results", "show", "--help"), ("table", "--help")])
def test_help_has_examples_and_exit_codes(env, argv):
    proc = run_envgen(*argv, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "examples:" in proc.stdout and "Exit codes:" in proc.stdout


def test_results_without_subcommand_exits_2(env):
    proc = run_envgen("results", env=env)
    assert proc.returncode == 2 and "SUBCOMMAND" in proc.stderr


def test_add_then_add_again(env, tmp_path):
    results = tmp_path / "results"
    proc = run_envgen("results", "add", *map(str, RECORDS), "--results-dir", str(results),
                      env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(RECORDS) and all(line.startswith("added ") for line in lines)
    assert f"{len(RECORDS)} added, 0 already recorded" in proc.stderr
    before = _tree(results)
    proc = run_envgen("results", "add", str(RECORDS[0]), "--results-dir", str(results), "--json",
                      env=env)
    assert proc.returncode == 0, proc.stderr
    (out,) = json.loads(proc.stdout)
    assert out["added"] is False and (tmp_path / out["path"]).is_file()
    assert set(out) == {"combination", "record_id", "kind", "tier", "status", "path", "added"}
    assert _tree(results) == before


def test_add_default_results_dir_is_in_the_matrix(env, fixture_matrix, tmp_path):
    matrix = tmp_path / "matrix"
    matrix.mkdir()
    (matrix / "curated").symlink_to(fixture_matrix / "curated")
    (matrix / "harvested").symlink_to(fixture_matrix / "harvested")
    proc = run_envgen("--matrix-dir", str(matrix), "results", "add", str(RECORDS[0]), env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("added             matrix/results/")
    assert len(list((matrix / "results").rglob("*.json"))) == 1


def test_add_with_a_bad_file_writes_nothing_and_lists_every_problem(env, tmp_path):
    results = tmp_path / "results"
    proc = run_envgen("results", "add", str(RECORDS[0]), str(INVALID / "many-problems.json"),
                      str(INVALID / "inconsistent.json"), "--results-dir", str(results),
                      env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "envgen: error: 2 of 3 result file(s) invalid, 22 problem(s):" in proc.stderr
    assert "many-problems.json: $.ops[1]: 'cpu_adam' is not an object {name, status, " \
        "build_seconds, check, message}" in proc.stderr
    assert "inconsistent.json: $.smoke.backend: 'nccl' needs GPUs" in proc.stderr
    assert "hint: nothing was written" in proc.stderr
    assert not results.exists()


def test_add_with_a_bad_attempt_writes_nothing_and_lists_every_problem(env, tmp_path):
    results = tmp_path / "results"
    proc = run_envgen("results", "add", str(RECORDS[0]),
                      str(INVALID / "attempt-many-problems.json"),
                      str(INVALID / "attempt-inconsistent.json"), "--results-dir", str(results),
                      env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "envgen: error: 2 of 3 result file(s) invalid, 26 problem(s):" in proc.stderr
    assert "attempt-many-problems.json: $.build.ops[0].status: 'passed' is not one of pass, " \
           "fail, skip" in proc.stderr
    assert "attempt-inconsistent.json: $.lock: a passing T1 attempt needs its lock" \
        in proc.stderr
    assert not results.exists()


def test_show_tiers_and_statuses(env, tmp_path):
    results = tmp_path / "results"
    assert run_envgen("results", "add", *map(str, RECORDS), "--results-dir", str(results),
                      env=env).returncode == 0
    proc = run_envgen("results", "show", "--results-dir", str(results), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    shown = {s["combination"]: s for s in json.loads(proc.stdout)}
    found = {c: (s["tier"], s["status"], s["note"], s["records"]) for c, s in shown.items()}
    assert found["deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"] == (
        "T4", "known-good", None, 2)
    assert found["megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"] == (
        "T2", "untested", "CPU only", 1)
    ds = shown["deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"]
    assert (ds["tier"], ds["tier_label"], ds["flavor"], ds["status"]) == (
        "T1", "locked", "venv", "known-bad")
    assert (ds["proof"]["kind"], ds["proof"]["tier"], ds["proof"]["status"]) == (
        "attempt", "T1", "pass")
    assert (ds["failed"]["tier"], ds["failed"]["error"]) == (
        "T2", 'cpu_adam: error: identifier "__nv_bfloat162" is undefined')
    assert ds["newest"] == ds["failed"] and (tmp_path / ds["proof"]["path"]).is_file()
    assert ds["proof"]["machine"] == "2 CPUs, Debian GNU/Linux 12, no GPU"
    proc = run_envgen("results", "show", "--results-dir", str(results), env=env)
    assert proc.stdout.splitlines()[0].split() == ["combination", "tier", "status", "records",
                                                   "newest", "evidence"]
    assert "T1 locked · T2 failed" in proc.stdout and "known-bad" in proc.stdout
    assert "T2 built" in proc.stdout and "untested (CPU only)" in proc.stdout
    one = "colossalai-0.4.6-torch2.5.1-cu118-py3.12-ubuntu22.04-x86_64"
    proc = run_envgen("results", "show", "--results-dir", str(results), "--combination", one,
                      "--json", env=env)
    assert json.loads(proc.stdout) == [{
        "combination": one, "tier": "T0", "tier_label": "resolves", "flavor": None,
        "status": "untested", "note": None, "records": 0, "date": None, "proof": None,
        "failed": None, "newest": None}]
    proc = run_envgen("results", "show", "--combination", "nonsense", env=env)
    assert proc.returncode == 2 and "is not a combination id" in proc.stderr


def test_show_names_a_corrupt_stored_record(env, tmp_path):
    results = tmp_path / "results"
    run_envgen("results", "add", str(RECORDS[0]), "--results-dir", str(results), env=env)
    (stored,) = results.rglob("*.json")
    stored.write_text("{")
    proc = run_envgen("results", "show", "--results-dir", str(results), env=env)
    assert proc.returncode == 1 and f"{stored}: $: not JSON" in proc.stderr


def _project(tmp_path: Path, env) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# demo\n\n<!-- envgen:table:start -->\n"
                                        "<!-- envgen:table:end -->\ntail\n")
    assert run_envgen("results", "add", *map(str, RECORDS), "--results-dir",
                      "matrix/results", env=env).returncode == 0
    return tmp_path


def test_table_prints_the_page_or_json(env, tmp_path):
    _project(tmp_path, env)
    proc = run_envgen("table", "--results-dir", "matrix/results", "--markdown", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (GOLDEN / "compatibility.md").read_text(encoding="utf-8")
    proc = run_envgen("table", "--results-dir", "matrix/results", env=env)  # for a terminal
    head, rule, first = proc.stdout.splitlines()[:3]
    assert head.split() == ["tier", "status", "framework", "torch", "cuda", "python", "os",
                            "evidence"] and set(rule) <= {"-", " "}
    assert first.split()[:2] == ["T4", "known-good"] and "<" not in proc.stdout
    proc = run_envgen("table", "--results-dir", "matrix/results", "--json", env=env)
    assert proc.stdout == (GOLDEN / "compatibility.json").read_text(encoding="utf-8")
    assert not (tmp_path / "docs" / "compatibility.md").exists()


def test_table_write(env, tmp_path):
    _project(tmp_path, env)
    proc = run_envgen("table", "--write", "--results-dir", "matrix/results", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["wrote     docs/compatibility.md",
                                        "wrote     docs/compatibility.json", "wrote     README.md",
                                        "wrote     docs/selector.json"]
    selector = json.loads((tmp_path / "docs" / "selector.json").read_text())
    assert selector["generated"].startswith("generated by envgen")
    assert selector["subset"]["recorded"] > 0 and selector["rows"]
    assert (tmp_path / "docs" / "compatibility.md").read_text() == \
        (GOLDEN / "compatibility.md").read_text()
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# demo\n\n<!-- envgen:table:start -->\n<!-- generated by envgen")
    assert readme.endswith("only resolve (T0); every row with its records and upstream "
                           "citations: the [full table](docs/compatibility.md).\n"
                           "<!-- envgen:table:end -->\ntail\n")
    proc = run_envgen("table", "--write", "--results-dir", "matrix/results", "--json", env=env)
    assert json.loads(proc.stdout)["unchanged"] == ["docs/compatibility.md",
                                                    "docs/compatibility.json", "README.md",
                                                    "docs/selector.json"]


def test_table_write_without_readme_markers_exits_2_and_writes_nothing(env, tmp_path):
    _project(tmp_path, env)
    (tmp_path / "README.md").write_text("# no markers\n")
    proc = run_envgen("table", "--write", "--results-dir", "matrix/results", env=env)
    assert proc.returncode == 2
    assert "README.md needs exactly one table start marker line" in proc.stderr
    assert "hint: add the two marker lines" in proc.stderr
    assert "<!-- envgen:table:start -->" in proc.stderr
    assert list((tmp_path / "docs").iterdir()) == []


def test_table_write_with_an_unwritable_selector_file_writes_nothing(env, tmp_path):
    _project(tmp_path, env)
    readme = (tmp_path / "README.md").read_bytes()
    (tmp_path / "a-file").write_text("not a folder")
    proc = run_envgen("table", "--write", "--results-dir", "matrix/results", "--selector-file",
                      "a-file/selector.json", env=env)
    assert proc.returncode == 4, proc.stderr
    assert "a-file" in proc.stderr
    assert not (tmp_path / "docs" / "compatibility.md").exists()
    assert (tmp_path / "README.md").read_bytes() == readme
