"""The verify tests' environments (verify_envs.py builds them), once per session."""

from __future__ import annotations

import pytest
from verify_envs import framework_env


@pytest.fixture(scope="session")
def torch_env(tmp_path_factory) -> dict[str, str]:
    """DeepSpeed's env: {"python": the venv's interpreter, "env": environment to run it}."""
    return framework_env(tmp_path_factory, "deepspeed")


@pytest.fixture(scope="session")
def megatron_env(tmp_path_factory) -> dict[str, str]:
    return framework_env(tmp_path_factory, "megatron-core")


@pytest.fixture(scope="session")
def colossalai_env(tmp_path_factory) -> dict[str, str]:
    return framework_env(tmp_path_factory, "colossalai")
