"""envgen/inside/check-ops.py, the builder's proof that the ops were compiled, run as the image
runs it: a script with the target's Python and the standard library only."""

from __future__ import annotations

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
