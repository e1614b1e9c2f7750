"""This machine's NVIDIA GPUs and driver, read through NVML (the ``nvidia-ml-py`` bindings).

Outputs: :func:`visible_gpus` (one frozen :class:`Gpu` per device NVML lists),
:func:`driver_version` (``"550.54.15"``) and :func:`cuda_driver_version` (the newest CUDA the
driver supports, ``"12.4"``). Without a driver, without the NVML library or without
``nvidia-ml-py`` they answer ``()`` / ``None``; they never raise and never start a process.
``pynvml`` is imported inside the functions, so importing this module costs nothing. NVML
lists every GPU of the machine, whatever ``CUDA_VISIBLE_DEVICES`` says (as ``nvidia-smi``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML's device index
    name: str  # "NVIDIA H100 80GB HBM3"
    uuid: str  # "GPU-…"
    memory_total_bytes: int
    compute_capability: str  # "9.0"
    driver_version: str  # "550.54.15"


@contextmanager
def _nvml() -> Iterator[Any]:
    """The initialised ``pynvml`` module, or ``None`` when NVML cannot be used here."""
    try:
        import pynvml
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        yield None
        return
    try:
        yield pynvml
    finally:
        with suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _query(read: Callable[[Any], T], absent: T) -> T:
    """``read(pynvml)`` with NVML initialised; ``absent`` without NVML or when it fails."""
    with _nvml() as nvml:
        if nvml is None:
            return absent
        try:
            return read(nvml)
        except nvml.NVMLError:
            return absent


def _gpus(nvml: Any) -> tuple[Gpu, ...]:
    driver = nvml.nvmlSystemGetDriverVersion()
    found = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
        found.append(Gpu(index=index, name=nvml.nvmlDeviceGetName(handle),
                         uuid=nvml.nvmlDeviceGetUUID(handle),
                         memory_total_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                         compute_capability=f"{major}.{minor}", driver_version=driver))
    return tuple(found)


def visible_gpus() -> tuple[Gpu, ...]:
    """Every NVIDIA GPU NVML lists, in its index order; ``()`` without a driver or NVML."""
    return _query(_gpus, ())


def driver_version() -> str | None:
    """The NVIDIA driver's version (``"550.54.15"``); ``None`` without a driver or NVML."""
    return _query(lambda nvml: str(nvml.nvmlSystemGetDriverVersion()), None)


def cuda_driver_version() -> str | None:
    """The newest CUDA version the driver supports (``"12.4"``, what ``nvidia-smi`` shows as
    "CUDA Version"); ``None`` without a driver or NVML."""

    def read(nvml: Any) -> str:
        version = int(nvml.nvmlSystemGetCudaDriverVersion())  # 12040
        return f"{version // 1000}.{version % 1000 // 10}"

    return _query(read, None)
