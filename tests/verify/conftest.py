"""A real CPU environment for the verify tests: a venv with a CPU build of torch and
DeepSpeed (no ops prebuilt), made once per session.

torch comes from ENVGEN_TEST_TORCH (a requirement or a wheel path) if set, else the newest
CPU wheel in the machine's pip find-links folder (/opt/wheels on the dev and CI machines),
else PyTorch's CPU index. Without it the tests skip, unless ENVGEN_REQUIRE_TORCH=1 (CI).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

DEEPSPEED = "deepspeed==0.19.8"


def _torch_requirement() -> list[str]:
    if os.environ.get("ENVGEN_TEST_TORCH"):
        return [os.environ["ENVGEN_TEST_TORCH"]]
    local = sorted(glob.glob("/opt/wheels/torch-*+cpu-*.whl"))
    if local:
        return [local[-1]]
    return ["torch", "--index-url", "https://download.pytorch.org/whl/cpu"]


def _fail_or_skip(reason: str):
    if os.environ.get("ENVGEN_REQUIRE_TORCH"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def torch_env(tmp_path_factory) -> dict[str, str]:
    """{"python": the venv's interpreter, "env": environment for running it}."""
    root = tmp_path_factory.mktemp("torchenv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    py = str(root / "bin" / "python")
    steps = [
        [py, "-m", "pip", "install", "--quiet", "setuptools", "wheel", "numpy"],
        [py, "-m", "pip", "install", "--quiet", *_torch_requirement()],
        [py, "-m", "pip", "install", "--quiet", "--no-build-isolation", DEEPSPEED],
    ]
    env = {**os.environ, "DS_BUILD_OPS": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
        if proc.returncode != 0:
            _fail_or_skip(f"cannot build the CPU torch env ({' '.join(cmd[3:])}): "
                          f"{proc.stderr[-1500:]}")
    ext = Path(os.environ.get("ENVGEN_TEST_TORCH_EXTENSIONS",
                              tmp_path_factory.mktemp("torch-extensions")))
    run_env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext)}
    run_env.pop("DS_ACCELERATOR", None)  # CPU runs must auto-detect the CPU accelerator
    return {"python": py, "env": run_env}
