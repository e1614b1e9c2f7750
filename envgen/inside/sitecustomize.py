"""envgen's builder-only answer to op builds that ask the GPU what to compile for.

Colossal-AI's CUDA extensions call ``torch.cuda.get_device_capability()`` while computing
their nvcc flags (``extensions/utils.py`` ``get_cuda_cc_flag``, e.g. layernorm_cuda's
``nvcc_flags``), so ``BUILD_EXT=1 pip install colossalai`` on a builder without a GPU stops with
"RuntimeError: No CUDA GPUs are available" (hpcaitech/ColossalAI issue #5732; reproduced by
`envgen evidence` on 2026-11-23). The image's builder puts this file on PYTHONPATH, with
ENVGEN_GPU_QUERY_SHIM=1, only in the RUN that builds the framework. Then, and only when torch
sees no GPU, the two queries are answered from TORCH_CUDA_ARCH_LIST, the architectures the
image is built for: ``get_device_capability()`` is the newest of them, ``get_arch_list()`` all
of them, so the extension compiles for exactly those. Copied into the build context by
`envgen make --image` from envgen's images/; standard library and torch only.
"""

from __future__ import annotations

import os
import re


def _archs() -> list[tuple[int, int]]:
    """TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX", "9.0a") as sorted (major, minor) pairs."""
    found = set()
    for item in re.split(r"[;,\s]+", os.environ.get("TORCH_CUDA_ARCH_LIST", "")):
        item = item.strip().removesuffix("+PTX")
        major, _, minor = item.partition(".")
        if major.isdigit():
            found.add((int(major), int(minor.rstrip("af") or 0)))
    return sorted(found)


def _install() -> None:
    if os.environ.get("ENVGEN_GPU_QUERY_SHIM") != "1":
        return
    archs = _archs()
    if not archs:
        return
    import torch

    if torch.cuda.device_count() > 0:  # a real GPU answers for itself
        return
    torch.cuda.get_device_capability = lambda device=None: archs[-1]
    torch.cuda.get_arch_list = lambda: [f"sm_{major}{minor}" for major, minor in archs]


_install()
