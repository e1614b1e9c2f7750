"""envgen/inside/check-ops.py, the builder's proof that the ops were compiled, run as the image
runs it: a script with the target's Python and the standard library only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from envgen import inside

SCRIPT = inside.path("check-ops.py")
# a compiled module that moved between releases, like megatron.core.datasets.helpers(_cpp):
# NumPy 2 has _multiarray_umath under numpy._core, NumPy 1 under numpy.core
RENAMED = "numpy._core._multiarray_umath|numpy.core._multiarray_umath"


def check_ops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)


def test_modules_accepts_the_first_name_that_is_compiled():
    proc = check_ops("modules", RENAMED)
    assert proc.returncode == 0, proc.stderr
    assert "_multiarray_umath" in proc.stdout and ".so" in proc.stdout


def test_modules_names_every_alternative_when_none_is_there():
    proc = check_ops("modules", RENAMED, "envgen_nope._C.op|envgen_nope.op")
    assert proc.returncode == 1
    assert "error: envgen_nope._C.op or envgen_nope.op: no compiled extension module" \
        in proc.stderr
    assert "_multiarray_umath" not in proc.stderr


def test_a_pure_python_module_is_not_a_compiled_op():
    proc = check_ops("modules", "json")
    assert proc.returncode == 1 and "json: no compiled extension module" in proc.stderr


def test_unknown_check_is_a_usage_error():
    proc = check_ops("nope", "x")
    assert proc.returncode == 2 and "usage: check-ops.py {deepspeed,modules}" in proc.stderr


def test_the_report_is_the_frameworks_own_list_of_built_ops(tmp_path):
    """DeepSpeed records every op its setup.py compiled in git_version_info.installed_ops;
    async_io pulls in pin_memory, which nobody asked for: the report has it, not cpu_adam
    (False there)."""
    pkg = tmp_path / "site" / "deepspeed"
    (pkg / "ops" / "aio").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "git_version_info.py").write_text(
        "installed_ops = {'async_io': True, 'pin_memory': True, 'cpu_adam': False}\n")
    (pkg / "ops" / "aio" / "async_io_op.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    report = tmp_path / "out" / "ops.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "deepspeed", "async_io"],
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(tmp_path / "site"),
                               "ENVGEN_OPS_REPORT": str(report)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(report.read_text()) == {
        "check": "deepspeed", "source": "deepspeed.git_version_info.installed_ops",
        "ops": ["async_io", "pin_memory"]}
    assert "built, as deepspeed.git_version_info.installed_ops reports: async_io pin_memory" \
        in proc.stdout


def test_the_report_of_modules_is_the_compiled_modules_found(tmp_path):
    report = tmp_path / "ops.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "modules", RENAMED], capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "ENVGEN_OPS_REPORT": str(report)})
    assert proc.returncode == 0, proc.stderr
    built = json.loads(report.read_text())
    assert built["source"] == "compiled extension modules"
    assert built["ops"] in (["numpy._core._multiarray_umath"], ["numpy.core._multiarray_umath"])


def test_no_report_when_an_op_is_missing(tmp_path):
    report = tmp_path / "ops.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "modules", "json"], capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "ENVGEN_OPS_REPORT": str(report)})
    assert proc.returncode == 1 and not report.exists()
