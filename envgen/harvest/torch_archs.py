"""The GPU architectures a torch CUDA build was compiled for, read from the wheel itself.

Every CUDA wheel of torch carries ``torch/include/ATen/cuda/CUDAConfig.h``, generated at build
time, whose ``NVCC_FLAGS_EXTRA`` holds the exact ``-gencode`` list the build used, e.g.
``-gencode;arch=compute_90,code=sm_90`` (SASS for sm_90) or ``code=compute_90`` (PTX, which a
newer GPU can JIT-compile). That small member is range-read (the central directory plus a few
KB of a 0.5–3 GB wheel) and cached by the wheel's sha256, so each build record states its own
arch list (PyTorch drops old archs from some CUDA variants) instead of a curated guess.
"""

from __future__ import annotations

import re
from typing import Any

from envgen.harvest.fetcher import Fetcher
from envgen.harvest.simple_index import FileLink

CUDA_CONFIG = "torch/include/ATen/cuda/CUDAConfig.h"
CACHE_MEMBER = "torch-archs-v1.json"
_FLAGS = re.compile(r'^\s*#\s*define\s+NVCC_FLAGS_EXTRA\s+"(?P<flags>[^"]*)"', re.M)
_CODE = re.compile(r"arch=compute_(\d+[af]?),code=(\[[^\]]*\]|[a-z_0-9]+)")


def archs_from_config(text: str) -> dict[str, Any] | None:
    """``{"sm": ["sm_50", …], "ptx": ["compute_90"], "where": "<member>:<line>"}`` from the
    text of ``CUDAConfig.h``; None when it has no ``-gencode`` flags (a CPU build)."""
    match = _FLAGS.search(text)
    if match is None:
        return None
    sm: set[str] = set()
    ptx: set[str] = set()
    for _arch, code in _CODE.findall(match["flags"]):
        for target in code.strip("[]").split(","):
            target = target.strip()
            if target.startswith("sm_"):
                sm.add(target)
            elif target.startswith("compute_"):
                ptx.add(target)
    if not sm and not ptx:
        return None
    line = text.count("\n", 0, match.start()) + 1
    key = _arch_key
    return {"sm": sorted(sm, key=key), "ptx": sorted(ptx, key=key),
            "where": f"{CUDA_CONFIG}:{line}"}


def _arch_key(name: str) -> tuple[int, str]:
    digits = re.search(r"(\d+)", name)
    return (int(digits.group(1)) if digits else 0, name)


def read_build_archs(fetch: Fetcher, link: FileLink) -> tuple[dict[str, Any] | None, str]:
    """(archs of the wheel at ``link``, how its bytes were checked), read and cached by
    :meth:`Fetcher.wheel_facts`."""
    facts = fetch.wheel_facts(
        link, CACHE_MEMBER, ("archs",), lambda n: n == CUDA_CONFIG,
        lambda members: {"archs": archs_from_config(
            members.get(CUDA_CONFIG, b"").decode("utf-8", "replace"))})
    return facts["archs"], facts["verified"]
