"""`envgen doctor --snapshot` as a user runs it: the screen (worst first, each with its fix),
--json's contract, exit codes 0 / 1 / 2, errors naming the file and the fix (as JSON too), and
--save writing whole files that say how to write them again."""

from __future__ import annotations

import json

import pytest
from support.run import in_process
from test_doctor_rules import GOOD  # the same known-good environment


@pytest.fixture
def run(fixture_matrix, capsys, monkeypatch, tmp_path):
    return in_process(fixture_matrix, capsys, monkeypatch, tmp_path)


def snap(tmp_path, name="env.json", **changes):
    path = tmp_path / name
    path.write_text(json.dumps({"schema": 1, **GOOD, **changes}))
    return path


def test_a_good_snapshot_exits_0_and_says_so(run, tmp_path):
    code, out, _ = run("doctor", "--snapshot", str(snap(tmp_path)))
    assert code == 0
    assert "no problems found" in out and "deepspeed 0.18.2" in out
    assert "torch 2.5.1+cu121 (CUDA 12.1)" in out


def test_findings_worst_first_with_fix_and_command_exit_1(run, tmp_path):
    path = snap(tmp_path, ninja=None, conflicts=[
        {"package": "sphinx", "version": "7.0", "requires": "docutils<0.21", "have": "0.21"}])
    code, out, _ = run("doctor", "--snapshot", str(path))
    assert code == 1
    assert out.index("✗ error    ninja_missing") < out.index("! warning  dependency_conflict")
    assert "  run      python -m pip install ninja" in out  # a snapshot: no interpreter path
    assert "1 error, 1 warning" in out


def test_json_contract(run, tmp_path):
    code, out, _ = run("doctor", "--snapshot", str(snap(tmp_path, driver="470.82.01")),
                       "--json")
    doc = json.loads(out)
    assert code == 1
    assert {"schema", "findings", "needs", "snapshot"} <= set(doc) and doc["schema"] == 1
    assert doc["findings"][0]["kind"] == "driver_too_old"
    assert doc["snapshot"]["driver"] == "470.82.01"


def test_needs_are_listed_with_how_to_get_them(run, tmp_path):
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({"frameworks": {"deepspeed": "0.18.2"}, "torch": "2.5.1+cu121",
                                "torch_cuda": "12.1"}))
    code, out, _ = run("doctor", "--snapshot", str(path))
    assert code == 0 and "needs (facts a rule needs" in out
    assert "? nvcc:" in out and "nvcc --version" in out


def test_framework_flag_judges_for_a_framework_not_installed(run, tmp_path):
    path = snap(tmp_path, frameworks={}, python="3.9.18")
    code, out, _ = run("doctor", "--snapshot", str(path), "--framework", "megatron-core",
                       "--json")
    kinds = [f["kind"] for f in json.loads(out)["findings"]]
    assert code == 1 and "python_unsupported" in kinds


@pytest.mark.parametrize("content, says", [
    (None, "no such snapshot file"),
    ("{not json", "is not JSON"),
    ("[1, 2]", "holds a JSON list, not an object"),
    ('{"schema": 2}', "snapshot schema 2"),
    ('{"gcc": 12}', "gcc"),
])
def test_bad_snapshots_exit_2_naming_the_file_and_the_fix(run, tmp_path, content, says):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    code, _, err = run("doctor", "--snapshot", str(path))
    assert code == 2 and says in err and str(path) in err


def test_errors_as_json(run, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    code, out, _ = run("doctor", "--snapshot", str(path), "--json")
    error = json.loads(out)["error"]
    assert code == 2 and "is not JSON" in error["message"] and error["fix"]


def test_snapshot_and_report_together_are_a_usage_error(run, tmp_path):
    code, _, err = run("doctor", "--snapshot", str(snap(tmp_path)), "--report", "x.txt")
    assert code == 2 and "not allowed with" in err


def test_save_writes_the_snapshot_whole_with_how_to_regenerate_it(run, tmp_path):
    out_file = tmp_path / "out" / "saved.json"
    code, out, _ = run("doctor", "--snapshot", str(snap(tmp_path)), "--save", str(out_file))
    assert code == 0 and f"snapshot saved to {out_file}" in out
    doc = json.loads(out_file.read_text())
    assert doc["generated"]["command"].startswith("envgen doctor --snapshot")
    assert doc["schema"] == 1 and doc["torch"] == GOOD["torch"]
    # it reads back as the same snapshot
    code, again, _ = run("doctor", "--snapshot", str(out_file), "--json")
    assert code == 0 and json.loads(again)["snapshot"]["gcc"] == GOOD["gcc"]


def test_a_failed_run_leaves_no_saved_file(run, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 3}')
    target = tmp_path / "never.json"
    code, _, _ = run("doctor", "--snapshot", str(bad), "--save", str(target))
    assert code == 2 and not target.exists()
    assert list(tmp_path.iterdir()) == [bad]  # no temporary files either


def test_help_teaches(run):
    with pytest.raises(SystemExit) as exit_:
        run("doctor", "--help")
    assert exit_.value.code == 0


REPORTS = __import__("pathlib").Path(__file__).parents[1] / "fixtures" / "reports"


@pytest.mark.parametrize("name, kinds", [
    ("cuda_mismatch_370.txt", ["cuda_major_mismatch"]),  # DeepSpeed's CUDAMismatchException
    ("colossalai_check_2992.txt", ["cuda_major_mismatch"]),  # nvcc 12.0 vs torch's CUDA 11.x
    ("module_not_found_2973.txt", ["import_failed"]),
    ("ninja_missing_242.txt", ["ninja_missing"]),
    ("ds_report_libaio_yum_1687.txt", ["libaio_missing"]),
    ("gcc_version_3094.txt", []),
])
def test_real_reports_are_judged(run, name, kinds):
    code, out, _ = run("doctor", "--report", str(REPORTS / name), "--json")
    doc = json.loads(out)
    assert [f["kind"] for f in doc["findings"]] == kinds
    assert code == (1 if any(f["severity"] == "error" for f in doc["findings"]) else 0)


def test_a_report_on_stdin_with_explain(run, monkeypatch):
    import io

    text = (REPORTS / "cuda_mismatch_370.txt").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, _ = run("doctor", "--report", "-", "--explain", "--framework", "deepspeed")
    assert code == 1 and "read from the report:" in out and "nvcc = 12.0" in out
    assert "✗ error    cuda_major_mismatch" in out


def test_a_report_with_nothing_recognised_is_a_usage_error(run, tmp_path):
    path = tmp_path / "prose.txt"
    path.write_text("My training hangs after a few steps, please help.\n")
    code, _, err = run("doctor", "--report", str(path))
    assert code == 2 and "no environment facts recognised" in err and "collect_env" in err


def test_an_unknown_framework_is_a_usage_error_with_a_suggestion(run, tmp_path):
    code, _, err = run("doctor", "--snapshot", str(snap(tmp_path)), "--framework", "deepseed")
    assert code == 2 and "--framework deepseed" in err and "did you mean 'deepspeed'" in err



def test_an_unexplained_error_line_in_the_verdict_is_escaped(run, tmp_path):
    # a pasted error line is text from a file: the verdict quotes it, with no control character
    report = tmp_path / "report.txt"
    report.write_text("torch 2.1.0+cu121\nerror: command '/usr/local/cuda/bin/nvcc' failed with "
                      "exit code 1 \u001b[2J\u001b]0;title\u0007\n")
    code, out, _ = run("doctor", "--report", str(report))
    assert code == 0
    assert "not explained: the facts given do not say why \"error: command" in out
    assert not any(c in out for c in "\u001b\u0007")
