"""envgen.api.verify() called as a library runs envgen/inside/ops.py for real in a target
Python, here this interpreter with a stand-in torch and DeepSpeed on PYTHONPATH (no GPU: the
GPU op skips, an op whose module is missing fails): nothing is printed, every op's line comes
through the progress callback, and the record is written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from verify_envs import LOCK_HASH, write_lock

from envgen.api import VerifyRequest, verify

pytestmark = pytest.mark.integration
COMBINATION = "deepspeed-0.19.8-torch2.13.0-cu128-py3.11-debian12-x86_64"


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        "import types\n__version__ = '2.13.0+cpu'\nversion = types.SimpleNamespace(cuda=None)\n"
        "cuda = types.SimpleNamespace(is_available=lambda: False)\n")
    (site / "deepspeed").mkdir()
    (site / "deepspeed" / "__init__.py").write_text("__version__ = '0.19.8'\n")
    (site / "deepspeed" / "git_version_info.py").write_text("installed_ops = {}\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


def test_verify_ops_in_a_target_python(stand_in, tmp_path, capsys):
    lines: list[str] = []
    record = tmp_path / "record.json"
    result = verify(VerifyRequest("ops", python=sys.executable, ops=("fused_adam",),
                                  lock_dir=write_lock(tmp_path / "lock", COMBINATION,
                                                      "deepspeed"),
                                  record_path=record), progress=lines.append)
    assert capsys.readouterr() == ("", "")
    assert result.status == "pass", result.log
    (op,) = result.ops["ops"]
    assert (op["name"], op["status"]) == ("fused_adam", "skip") and "GPU" in op["message"]
    assert lines[0] == f"ops: deepspeed in {sys.executable}"
    assert lines[1].startswith("  fused_adam") and " skip " in lines[1]
    assert lines[-1] == f"wrote {record} (envgen results add {record})"
    doc = json.loads(record.read_text())
    assert doc == result.to_dict()["record"] and doc["lock_hash"] == LOCK_HASH
    assert doc["tools"]["torch"] == "2.13.0+cpu" and doc["tools"]["framework_version"] == "0.19.8"
    assert doc["smoke"] is None and doc["status"] == "pass"


def test_a_failed_op_fails_the_result(stand_in, capsys):
    result = verify(VerifyRequest("ops", framework="deepspeed", ops=("fused_adam", "cpu_adam")))
    assert capsys.readouterr() == ("", "")
    assert result.status == "fail" and result.record is None
    assert {o["name"]: o["status"] for o in result.ops["ops"]} == {"fused_adam": "skip",
                                                                   "cpu_adam": "fail"}
    assert "ModuleNotFoundError" in result.ops["ops"][1]["message"]


def test_an_unknown_op_is_reported_with_the_scripts_output(stand_in):
    from envgen.errors import EnvgenError

    with pytest.raises(EnvgenError) as err:
        verify(VerifyRequest("ops", framework="deepspeed", ops=("no_such_op",)))
    assert "the ops check did not run" in err.value.message
    assert "unknown deepspeed op(s) ['no_such_op']" in err.value.hint
