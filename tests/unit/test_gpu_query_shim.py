"""envgen/inside/sitecustomize.py: on a GPU-less builder, torch.cuda's device queries are answered
from TORCH_CUDA_ARCH_LIST (Colossal-AI's extensions ask for the GPU's compute capability while
computing their nvcc flags); a stand-in torch records what the shim did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import json, torch; print(json.dumps([list(torch.cuda.get_device_capability()), "
         "torch.cuda.get_arch_list()]))")


def _torch(tmp: Path, devices: int) -> Path:
    site = tmp / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("from torch import cuda\n")
    (site / "torch" / "cuda.py").write_text(
        f"def device_count():\n    return {devices}\n"
        "def get_device_capability(device=None):\n    raise RuntimeError('No CUDA GPUs are "
        "available')\n"
        "def get_arch_list():\n    return ['sm_50', 'sm_60', 'sm_70', 'sm_80', 'sm_90']\n")
    return site


def _run(site: Path, **env: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(ROOT / "envgen" / "inside"), str(site)])
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": path, **env},
                          timeout=60)


@pytest.mark.parametrize(("arch_list", "capability", "archs"), [
    ("9.0+PTX", [9, 0], ["sm_90"]),
    ("8.0;9.0", [9, 0], ["sm_80", "sm_90"]),
    ("9.0a", [9, 0], ["sm_90"]),
    ("8.6 8.0", [8, 6], ["sm_80", "sm_86"]),
])
def test_without_a_gpu_the_queries_answer_with_the_images_archs(tmp_path, arch_list,
                                                                 capability, archs):
    proc = _run(_torch(tmp_path, 0), ENVGEN_GPU_QUERY_SHIM="1", TORCH_CUDA_ARCH_LIST=arch_list)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [capability, archs]


def test_a_real_gpu_answers_for_itself(tmp_path):
    proc = _run(_torch(tmp_path, 1), ENVGEN_GPU_QUERY_SHIM="1", TORCH_CUDA_ARCH_LIST="9.0")
    assert "No CUDA GPUs are available" in proc.stderr  # the stand-in's own answer, untouched


@pytest.mark.parametrize("env", [{"TORCH_CUDA_ARCH_LIST": "9.0"},  # not switched on
                                 {"ENVGEN_GPU_QUERY_SHIM": "1"}])  # nothing to answer with
def test_it_does_nothing_unless_switched_on_with_archs(tmp_path, env):
    proc = _run(_torch(tmp_path, 0), **env)
    assert proc.returncode != 0 and "No CUDA GPUs are available" in proc.stderr


def test_the_colossalai_image_puts_it_on_the_builds_path_only():
    from envgen.facts.images import load_recipes

    recipes = load_recipes(ROOT / "matrix")
    assert recipes.ops["colossalai"].gpu_query_shim
    assert not recipes.ops["deepspeed"].gpu_query_shim
    assert not recipes.ops["megatron-core"].gpu_query_shim
