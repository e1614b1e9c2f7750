"""CUDA 13 renamed Thor's sm_101 to sm_110 (curated/cuda.toml [[arch_rename]], NVIDIA's
cuRANDDx/nvCOMPDx release notes): a request for sm_101 is read under each toolkit's own name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from envgen.facts.matrix import Matrix

ROOT = Path(__file__).parents[2]


def test_the_rename_applies_from_cuda_13_on() -> None:
    facts = Matrix.locate(ROOT / "matrix").facts
    assert facts.arch_for("sm_101", "12.9") == ("sm_101", None)
    new, rename = facts.arch_for("sm_101", "13.0")
    assert new == "sm_110" and rename.cuda == "13.0" and "curanddx" in rename.source
    assert facts.arch_for("sm_90", "13.0") == ("sm_90", None)
    # the harvested nvcc lists agree with the curated rename
    assert "sm_101" in facts.toolkits["12.9"].archs and "sm_110" not in facts.toolkits["12.9"].archs
    assert "sm_110" in facts.toolkits["13.0"].archs and "sm_101" not in facts.toolkits["13.0"].archs


def _resolve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envgen", "resolve", *args, "--limit", "1",
                           "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_sm_101_with_cuda_13_is_judged_as_sm_110() -> None:
    # nvcc 13.0 knows sm_110, not sm_101: the request is not refused for the name
    on_arm = _resolve("--platform", "linux-aarch64", "--gpu-arch", "sm_101", "--cuda", "13.0")
    assert on_arm.returncode == 0, on_arm.stderr[-500:]
    on_x86 = _resolve("--gpu-arch", "sm_101", "--cuda", "13.0")
    assert on_x86.returncode == 3
    said = json.dumps(json.loads(on_x86.stdout))
    assert "cannot target sm_101" not in said
    assert "which CUDA 13.0 calls what CUDA < 13.0 called sm_101" in said
