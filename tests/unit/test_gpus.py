"""envgen.gpus: NVML through nvidia-ml-py. This machine has no GPU, so the absent path runs for
real; the shape of what a GPU machine answers is checked with pynvml's functions replaced."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pynvml
import pytest

from envgen import gpus
from envgen.evidence import machine


def test_without_a_driver_there_are_no_gpus():
    try:  # the real thing: only meaningful where NVML cannot start (no driver here)
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    assert gpus.visible_gpus() == ()
    assert gpus.driver_version() is None and gpus.cuda_driver_version() is None
    assert machine.gpus() == []


def test_without_nvidia_ml_py_there_are_no_gpus(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    assert gpus.visible_gpus() == () and gpus.driver_version() is None


@pytest.fixture
def two_gpus(monkeypatch):
    """pynvml answering like a machine with an H100 and an A100 (driver 550.54.15, CUDA 12.4)."""
    calls = []
    devices = [("NVIDIA H100 80GB HBM3", "GPU-aaaa", 85520809984, (9, 0)),
               ("NVIDIA A100-SXM4-40GB", "GPU-bbbb", 42949672960, (8, 0))]
    fake = {
        "nvmlInit": lambda: calls.append("init"),
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlSystemGetCudaDriverVersion": lambda: 12040,
        "nvmlDeviceGetCount": lambda: len(devices),
        "nvmlDeviceGetHandleByIndex": lambda i: devices[i],
        "nvmlDeviceGetName": lambda h: h[0],
        "nvmlDeviceGetUUID": lambda h: h[1],
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(total=h[2], free=0, used=h[2]),
        "nvmlDeviceGetCudaComputeCapability": lambda h: h[3],
    }
    for name, func in fake.items():
        monkeypatch.setattr(pynvml, name, func)
    return calls


def test_gpus_and_driver_from_nvml(two_gpus):
    found = gpus.visible_gpus()
    assert found == (
        gpus.Gpu(0, "NVIDIA H100 80GB HBM3", "GPU-aaaa", 85520809984, "9.0", "550.54.15"),
        gpus.Gpu(1, "NVIDIA A100-SXM4-40GB", "GPU-bbbb", 42949672960, "8.0", "550.54.15"),
    )
    assert gpus.driver_version() == "550.54.15" and gpus.cuda_driver_version() == "12.4"
    assert two_gpus == ["init", "shutdown"] * 3  # NVML is shut down after every query
    assert machine.gpus() == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert machine.machine()["gpus"] == machine.gpus()


def test_an_nvml_error_mid_query_reads_as_no_gpus(two_gpus, monkeypatch):
    def lost(handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetUUID", lost)
    assert gpus.visible_gpus() == ()
    assert two_gpus[-1] == "shutdown"


def test_importing_envgen_gpus_does_not_import_pynvml():
    code = "import sys, envgen.gpus; print('pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
