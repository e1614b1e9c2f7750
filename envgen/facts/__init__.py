"""The facts stage: everything envgen knows, read from the matrix/ data directory.

Input: matrix/ (harvested/*.json from the package indexes, curated/*.toml with citations,
sources.toml, cells.toml, results/) and the data directory. Output: typed, validated, frozen
values: ``Facts`` (torch builds, framework releases, CUDA toolkits, OSes, policy, toolchain),
the sources, the image recipes, upstream evidence and cells. ``Matrix`` (facts/matrix.py) is
the one owner of those files; every other stage takes its values, never a path.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "load_facts": "load", "find_matrix_dir": "locate", "Matrix": "matrix",
    **{name: "model" for name in ("CudaToolkit", "Facts", "FrameworkConstraint",
                                  "FrameworkRelease", "OSBase", "Policy", "Source",
                                  "TorchBuild")},
}

__all__ = [
    "CudaToolkit",
    "Facts",
    "FrameworkConstraint",
    "FrameworkRelease",
    "Matrix",
    "OSBase",
    "Policy",
    "Source",
    "TorchBuild",
    "find_matrix_dir",
    "load_facts",
]


def __getattr__(name: str) -> Any:
    """Names are imported on first use: reading one matrix file loads only its module."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'envgen.facts' has no attribute {name!r}")
    # (__import__, not importlib: importing importlib is start-up time)
    return getattr(__import__(f"envgen.facts.{module}", fromlist=(name,)), name)
