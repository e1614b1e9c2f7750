"""The facts envgen reasons with, loaded from the matrix/ data directory."""

from envgen.facts.load import load_facts
from envgen.facts.locate import find_matrix_dir
from envgen.facts.model import (
    CudaToolkit,
    Facts,
    FrameworkConstraint,
    FrameworkRelease,
    OSBase,
    Policy,
    Source,
    TorchBuild,
)

__all__ = [
    "CudaToolkit",
    "Facts",
    "FrameworkConstraint",
    "FrameworkRelease",
    "OSBase",
    "Policy",
    "Source",
    "TorchBuild",
    "find_matrix_dir",
    "load_facts",
]
