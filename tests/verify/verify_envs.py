"""Real CPU environments for the verify tests, one venv per framework with a torch build and
the framework (no ops prebuilt), and the helpers the verify tests share.

- deepspeed and megatron-core: torch from ENVGEN_TEST_TORCH (a requirement or a wheel path)
  if set, else the newest CPU wheel in the machine's pip find-links folder (/opt/wheels on
  the dev and CI machines), else PyTorch's CPU index.
- colossalai: its newest release caps torch at 2.5.1, and PyPI's 2.5.1 (a CUDA build) runs
  on CPU as well.

Without them the tests skip, unless ENVGEN_REQUIRE_TORCH=1 (CI), where they fail.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# framework → (its requirement, torch, whether it builds against the installed torch);
# each pair is a combination the matrix allows (its torch range, Python 3.11)
FRAMEWORKS = {
    "deepspeed": ("deepspeed==0.19.8", None, True),
    "megatron-core": ("megatron-core==0.16.1", None, False),
    "colossalai": ("colossalai==0.5.0", "torch==2.5.1", True),
}


def cpu_torch() -> list[str]:
    if os.environ.get("ENVGEN_TEST_TORCH"):
        return [os.environ["ENVGEN_TEST_TORCH"]]
    local = sorted(glob.glob("/opt/wheels/torch-*+cpu-*.whl"))
    if local:
        return [local[-1]]
    return ["torch", "--index-url", "https://download.pytorch.org/whl/cpu"]


def fail_or_skip(reason: str):
    if os.environ.get("ENVGEN_REQUIRE_TORCH"):
        pytest.fail(reason)
    pytest.skip(reason)


def framework_env(tmp_path_factory, framework: str) -> dict[str, str]:
    requirement, torch, no_isolation = FRAMEWORKS[framework]
    root = tmp_path_factory.mktemp(f"env-{framework}") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    py = str(root / "bin" / "python")
    pip = [py, "-m", "pip", "install", "--quiet"]
    steps = [
        [*pip, "setuptools", "wheel", "numpy"],
        [*pip, *([torch] if torch else cpu_torch())],
        [*pip, *(["--no-build-isolation"] if no_isolation else []), requirement],
    ]
    # DS_BUILD_OPS=0 / BUILD_EXT unset: the ops are JIT-built by the checks, as without a GPU
    env = {**os.environ, "DS_BUILD_OPS": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if proc.returncode != 0:
            fail_or_skip(f"cannot build the CPU {framework} env ({' '.join(cmd[5:])}): "
                         f"{proc.stderr[-1500:]}")
    ext = Path(os.environ.get("ENVGEN_TEST_TORCH_EXTENSIONS",
                              tmp_path_factory.mktemp("torch-extensions")))
    run_env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext)}
    run_env.pop("DS_ACCELERATOR", None)  # CPU runs must auto-detect the CPU accelerator
    return {"python": py, "env": run_env, "framework": framework}


LOCK_HASH = "sha256:" + "ab" * 32


def envgen(*args: str, env: dict | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", *args], capture_output=True,
                          text=True, env=env, timeout=1800)


def write_lock(directory: Path, combination: str, framework: str) -> Path:
    """A lock manifest (valid, with its manifest hash) for a venv built outside envgen make:
    a record takes its id, lock hash and framework from it."""
    from envgen.lock.manifest import SCHEMA, manifest_hash
    from envgen.resolve.combination import parse_combination_id

    fields = parse_combination_id(combination)
    assert fields and fields["framework"] == framework
    doc = {
        "schema": SCHEMA, "id": combination, "flavor": "venv", "lock_hash": LOCK_HASH,
        "inputs_hash": LOCK_HASH, "combination": {"id": combination, **fields},
        "target": {"platform": fields["platform"], "python": fields["python"].rstrip("t"),
                   "python_platform": "x86_64-manylinux_2_36"},
        "conda": None,
        "pip": {"index_url": "https://pypi.org/simple", "extra_index_urls": [],
                "requirements": [], "packages": 0},
        "toolchain": {}, "image": None, "tools": {}, "files": {},
    }
    doc["manifest_hash"] = manifest_hash(doc)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "envgen.lock.json").write_text(json.dumps(doc, indent=2))
    return directory
