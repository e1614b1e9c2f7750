"""This machine's NVIDIA driver and GPUs, as ``--driver auto`` / ``--gpu auto`` read them.

Input: nothing but the machine. Output: one frozen :class:`MachineGpus`: the driver version,
each GPU's name and compute capability, where they were read (``"nvml"`` or ``"nvidia-smi"``),
and, when something could not be read, why. :func:`read` never raises for a machine without a
driver, a missing library, an NVML error or a hanging driver: the answer is then "not known"
with the reason.

How: NVML first, through NVIDIA's own binding (``nvidia-ml-py``, imported as ``pynvml``, a
dependency; it loads ``libnvidia-ml.so.1``, the library every NVIDIA driver installs, as the
dynamic loader finds it); then, when NVML cannot be loaded or started, ``nvidia-smi
--query-gpu`` (the ``compute_cap`` column exists only in newer drivers: without it the names
alone are read). Both run under a deadline (``envgen.proc.limit``: 30 s, or
``$ENVGEN_TOOL_TIMEOUT``). NVML lists every GPU of the machine, whatever
``CUDA_VISIBLE_DEVICES`` says (as ``nvidia-smi``); a device this process may not use answers
``NVML_ERROR_NO_PERMISSION`` and is left out (https://docs.nvidia.com/deploy/nvml-api/).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

DEFAULT_SECONDS = 30.0  # NVML's start on a many-GPU machine without persistence mode is slow
MAX_GPUS = 256  # a library answering more is not believed past this many

_NAME_BUFFER = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE: a longer name is not believed past it
_DRIVER_RE = re.compile(r"\d{1,4}(\.\d{1,4}){1,3}")
_CC_RE = re.compile(r"(\d{1,2})\.(\d{1,2})")
_SMI_FIELDS = ("driver_version,name,compute_cap", "driver_version,name")


@dataclass(frozen=True)
class GpuSeen:
    """One GPU as the driver names it."""

    name: str  # "NVIDIA H100 80GB HBM3"
    compute_capability: str | None  # "9.0"; None: an nvidia-smi without the compute_cap column

    @property
    def arch(self) -> str | None:
        """``"sm_90"`` for compute capability 9.0; None when it was not read."""
        if self.compute_capability is None:
            return None
        major, minor = self.compute_capability.split(".")
        return f"sm_{major}{minor}"


@dataclass(frozen=True)
class MachineGpus:
    """What was read: the driver (None: not known), the GPUs in the driver's order, where
    they were read from, and ``reason``: why the driver or a GPU is not known (None when
    everything was read)."""

    driver: str | None
    gpus: tuple[GpuSeen, ...] = ()
    source: str | None = None  # "nvml" | "nvidia-smi"; None: nothing could be read
    reason: str | None = None
    absent: bool = False  # nothing to ask: no NVML library and no nvidia-smi (no driver here)

    @property
    def known(self) -> bool:
        return self.driver is not None

    def groups(self) -> list[tuple[GpuSeen, int]]:
        """Identical GPUs folded: (GPU, how many), in the order first seen."""
        counts: dict[GpuSeen, int] = {}
        for gpu in self.gpus:
            counts[gpu] = counts.get(gpu, 0) + 1
        return list(counts.items())

    def gpus_text(self) -> str:
        """``8× NVIDIA H100 80GB HBM3 (sm_90)``; several models comma-separated."""
        return ", ".join(f"{n}× {g.name} ({g.arch or 'compute capability not read'})"
                         for g, n in self.groups()) or "no GPU"

    def summary(self) -> str:
        """``driver 550.54.15 and 8× NVIDIA H100 80GB HBM3 (sm_90) read through NVML``, or
        ``nothing read: <why>``."""
        if not self.known:
            return f"nothing read: {self.reason}"
        via = {"nvml": "NVML"}.get(self.source or "", self.source)
        return f"driver {self.driver} and {self.gpus_text()} read through {via}"

    def to_dict(self) -> dict[str, Any]:
        return {"driver": self.driver,
                "gpus": [{"name": g.name, "compute_capability": g.compute_capability,
                          "arch": g.arch, "count": n} for g, n in self.groups()],
                "gpu_count": len(self.gpus), "source": self.source, "reason": self.reason}


def read(*, timeout: float | None = None) -> MachineGpus:
    """This machine's driver and GPUs: NVML, else nvidia-smi, else not known (with why).

    ``timeout``: seconds for each reader (default ``envgen.proc.limit(30)``). Never raises
    for what the machine answers."""
    from envgen.proc import limit

    seconds = limit(DEFAULT_SECONDS) if timeout is None else timeout
    nvml = _within(read_nvml, seconds, "NVML")
    if nvml is None:  # a hung driver: nvidia-smi, which asks NVML, would hang as well
        return MachineGpus(driver=None, reason=f"NVML did not answer within {seconds:g} s "
                           "(a driver in a bad state: `nvidia-smi` would hang as well)")
    if nvml.known:
        return nvml
    smi = read_nvidia_smi(timeout=seconds)
    if smi.known:
        return smi
    return MachineGpus(driver=None, reason=f"{nvml.reason}; {smi.reason}",
                       absent=nvml.absent and smi.absent)


def _within(reader: Callable[[], MachineGpus], seconds: float, what: str
            ) -> MachineGpus | None:
    """``reader()`` on a daemon thread; None when it has not answered after ``seconds`` (a
    driver in a bad state can block NVML's calls; a ctypes call cannot be interrupted, only
    left behind)."""
    answer: list[MachineGpus] = []

    def run() -> None:
        try:
            answer.append(reader())
        except Exception as exc:  # never a crash: whatever the library does, "not known"
            answer.append(MachineGpus(driver=None, reason=f"{what}: {type(exc).__name__}: "
                                      f"{exc}"))

    worker = threading.Thread(target=run, name=f"envgen-{what.lower()}", daemon=True)
    worker.start()
    worker.join(seconds)
    return answer[0] if answer else None


# ---------------------------------------------------------------- NVML

def read_nvml() -> MachineGpus:
    """The driver and GPUs through NVML (``pynvml``); not known, with the reason, when the
    library cannot be loaded, lacks a function or fails to start. A device that fails after
    the driver was read leaves the GPUs not known (the driver stays); a device this process
    has no permission for is left out."""
    try:
        import pynvml
    except ImportError:  # a dependency of envgen: only a broken install lacks it
        return MachineGpus(driver=None, reason="NVML: nvidia-ml-py (pynvml) is not installed: "
                           "reinstall envgen")

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return MachineGpus(driver=None, reason="NVML: libnvidia-ml.so.1 not found (no NVIDIA "
                           "driver installed here?)", absent=True)
    except pynvml.NVMLError as exc:
        return MachineGpus(driver=None, reason=f"NVML: nvmlInit failed: {exc}")
    try:
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError as exc:
            return MachineGpus(driver=None, reason=f"NVML: nvmlSystemGetDriverVersion failed: "
                               f"{exc}")
        if not _DRIVER_RE.fullmatch(driver):
            return MachineGpus(driver=None, reason=f"NVML: the driver version {driver!r} "
                               "is not a version")
        found, left_out = [], 0
        try:
            for index in range(min(pynvml.nvmlDeviceGetCount(), MAX_GPUS)):
                try:
                    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                except pynvml.NVMLError_NoPermission:
                    left_out += 1
                    continue
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc = f"{major}.{minor}"
                found.append(GpuSeen(name=_text(pynvml.nvmlDeviceGetName(handle))
                                     or f"GPU {index}",
                                     compute_capability=cc if _CC_RE.fullmatch(cc) else None))
        except pynvml.NVMLError as exc:
            return MachineGpus(driver=driver, source="nvml",
                               reason=f"NVML: {exc}: the GPUs are not known")
        reason = (f"NVML: {left_out} GPU(s) this process has no permission to use were left "
                  "out") if left_out else None
        return MachineGpus(driver=driver, gpus=tuple(found), source="nvml", reason=reason)
    finally:
        with suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _text(raw: bytes | str) -> str:
    """A C string from the library (bytes from older bindings), decoded and bounded (never
    trusted to be clean)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return text.strip()[:_NAME_BUFFER]


# ---------------------------------------------------------------- nvidia-smi

def read_nvidia_smi(*, timeout: float = DEFAULT_SECONDS, program: str = "nvidia-smi"
                    ) -> MachineGpus:
    """The driver and GPUs from ``nvidia-smi --query-gpu=driver_version,name,compute_cap
    --format=csv,noheader`` (the ``program`` found on PATH), asked again without
    ``compute_cap`` where the driver's nvidia-smi does not know that field."""
    import shutil
    import subprocess

    from envgen.proc import run

    smi = shutil.which(program)
    if smi is None:
        return MachineGpus(driver=None, reason=f"{program}: not on PATH", absent=True)
    last = f"{program}: no answer"
    for fields in _SMI_FIELDS:
        try:
            proc = run([smi, f"--query-gpu={fields}", "--format=csv,noheader"],
                       capture_output=True, text=True, errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired:
            return MachineGpus(driver=None, reason=f"{program} did not answer within "
                               f"{timeout:g} s")
        except OSError as exc:
            return MachineGpus(driver=None, reason=f"{program}: {exc.strerror or exc}")
        if proc.returncode == 0:
            return parse_nvidia_smi(proc.stdout, with_cc="compute_cap" in fields,
                                    program=program)
        said = " ".join((proc.stdout + " " + proc.stderr).split())[:300]
        last = f"{program} exited with {proc.returncode}: {said or '(nothing printed)'}"
        if "compute_cap" not in said:  # a failure the shorter query would share
            break
    return MachineGpus(driver=None, reason=last)


def parse_nvidia_smi(text: str, *, with_cc: bool = True, program: str = "nvidia-smi"
                     ) -> MachineGpus:
    """What ``nvidia-smi --query-gpu=driver_version,name[,compute_cap] --format=csv,noheader``
    printed (``550.54.15, NVIDIA H100 80GB HBM3, 9.0`` a line) as a :class:`MachineGpus`."""
    drivers, gpus = [], []
    for line in text.splitlines()[:MAX_GPUS]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < (3 if with_cc else 2) or not _DRIVER_RE.fullmatch(cells[0]):
            continue
        cc = cells[-1] if with_cc else None
        name = ", ".join(cells[1:-1] if with_cc else cells[1:])[:_NAME_BUFFER]
        drivers.append(cells[0])
        gpus.append(GpuSeen(name=name or "GPU",
                            compute_capability=cc if cc and _CC_RE.fullmatch(cc) else None))
    if not drivers:
        return MachineGpus(driver=None, reason=f"{program} listed no GPU"
                           + (f" ({' '.join(text.split())[:200]})" if text.strip() else ""))
    reason = None if with_cc else (f"{program} has no compute_cap field (an older driver): "
                                   "the GPUs' architectures are known only by their names")
    return MachineGpus(driver=drivers[0], gpus=tuple(gpus), source="nvidia-smi",
                       reason=reason)
