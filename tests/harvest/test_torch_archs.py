"""The GPU archs of each torch CUDA build, read from its wheel's ATen/cuda/CUDAConfig.h."""

from __future__ import annotations

import json

import pytest

from envgen.harvest.torch_archs import CUDA_CONFIG, archs_from_config

# torch/include/ATen/cuda/CUDAConfig.h of torch-2.5.1-cp310-cp310-manylinux1_x86_64.whl (PyPI,
# CUDA 12.4), the NVCC_FLAGS_EXTRA line as published
REAL_251 = (
    "#pragma once\n\n// Test these using #if AT_CUDNN_ENABLED(), not #ifdef, so that it's\n"
    "#define AT_CUDNN_ENABLED() 1\n"
    '#define NVCC_FLAGS_EXTRA "-gencode;arch=compute_50,code=sm_50;-gencode;arch=compute_60,'
    "code=sm_60;-gencode;arch=compute_70,code=sm_70;-gencode;arch=compute_75,code=sm_75;"
    "-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_86,code=sm_86;-gencode;"
    'arch=compute_90,code=sm_90"\n'
)


def test_real_2_5_1_config():
    got = archs_from_config(REAL_251)
    assert got == {"sm": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
                   "ptx": [], "where": f"{CUDA_CONFIG}:5"}


def test_ptx_and_bracketed_codes():
    text = ('#define NVCC_FLAGS_EXTRA "-gencode;arch=compute_100a,code=sm_100a;'
            '-gencode;arch=compute_120,code=[sm_120,compute_120]"\n')
    assert archs_from_config(text) == {"sm": ["sm_100a", "sm_120"], "ptx": ["compute_120"],
                                       "where": f"{CUDA_CONFIG}:1"}


def test_cpu_build_has_none():
    assert archs_from_config('#define NVCC_FLAGS_EXTRA ""\n') is None
    assert archs_from_config("#pragma once\n") is None


@pytest.mark.integration
def test_each_build_record_gets_its_own_wheels_archs(mini_matrix, index_server, fast):
    from support.mini_pypi import add_wheel, fixture

    from envgen.harvest.update import UpdateOptions, update_matrix

    meta = fixture("torch-2.12.0-cp312-manylinux_2_28_x86_64.METADATA").replace(
        "Version: 2.12.0", "Version: 2.14.0")
    x86 = REAL_251
    arm = '#define NVCC_FLAGS_EXTRA "-gencode;arch=compute_90,code=[sm_90,compute_90]"\n'
    add_wheel(index_server, "torch", "torch-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl", meta,
              extra_members={CUDA_CONFIG: x86})
    add_wheel(index_server, "torch", "torch-2.14.0-cp312-cp312-manylinux_2_28_aarch64.whl",
              meta, extra_members={CUDA_CONFIG: arm})
    result = update_matrix(mini_matrix, UpdateOptions(**fast))
    builds = {b["platform"]: b for b in json.loads(result.texts["torch.json"])["builds"]
              if b["version"] == "2.14.0"}
    assert builds["linux-x86_64"]["archs"]["sm"][-1] == "sm_90"
    assert builds["linux-aarch64"]["archs"]["ptx"] == ["compute_90"]
    assert builds["linux-aarch64"]["archs"]["source"]["url"].endswith("aarch64.whl")
    assert builds["linux-x86_64"]["archs"]["source"]["verified"] == "range"
    # a wheel without the header (the mini index's other releases): null, not a failure
    other = [b for b in json.loads(result.texts["torch.json"])["builds"]
             if b["version"] == "2.5.1" and b["cuda"]]
    assert other and all(b["archs"] is None for b in other)
