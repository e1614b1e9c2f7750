"""``machine_request()``: a request whose driver or GPU says ``auto`` → the same request with
this machine's driver and GPU in their place, and what was read.

Input: a :class:`~envgen.resolve.request.Request` with ``driver="auto"`` and/or
``gpu="auto"`` (``--driver auto`` / ``--gpu auto``), the matrix (its curated GPU names), and
optionally what was already read (:class:`envgen.machine_gpus.MachineGpus`; default: read now,
NVML then nvidia-smi). Output: the request to resolve and a :class:`MachineAnswer`: what was
read, the values used, and a note for each ``auto`` that could not be answered; that axis is
then left unconstrained, as if the flag were absent. A read GPU becomes the catalogue's name
(``curated/gpus.toml``: ``--gpu H100``) when the catalogue knows it and agrees with the
driver's compute capability, else its architecture (``--gpu-arch sm_120``). GPUs of more than
one architecture are a UsageError that lists them: one resolve answers for one architecture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from envgen.errors import UsageError
from envgen.facts.matrix import Matrix
from envgen.resolve.request import Request
from envgen.versions import dotted_key

if TYPE_CHECKING:
    from envgen.facts.model import Facts, Gpu
    from envgen.machine_gpus import MachineGpus

AUTO = "auto"
AXES = ("driver", "gpu")  # the request axes that may say "auto"
_SPLIT = re.compile(r"[\s_-]+")


@dataclass(frozen=True)
class MachineAnswer:
    """What ``auto`` was answered with: ``read`` (the driver and GPUs as read, where from, why
    not), ``asked`` (the axes that said auto), the values used (None: not known, that axis
    left free) and the notes saying why one was not used."""

    read: MachineGpus
    asked: tuple[str, ...]
    driver: str | None = None
    gpu: str | None = None  # the catalogue's name (curated/gpus.toml)
    gpu_arch: str | None = None  # from the name, or from the driver's compute capability
    notes: tuple[str, ...] = ()

    def flags(self) -> str:
        """The options ``auto`` stood for: ``--driver 550.54.15 --gpu H100``."""
        out = []
        if self.driver:
            out.append(f"--driver {self.driver}")
        if self.gpu:
            out.append(f"--gpu {self.gpu}")
        elif self.gpu_arch:
            out.append(f"--gpu-arch {self.gpu_arch}")
        return " ".join(out)

    def dropped(self) -> tuple[str, ...]:
        """The options that said auto and were answered with nothing (``--gpu``)."""
        used = {"driver": self.driver, "gpu": self.gpu or self.gpu_arch}
        return tuple(f"--{a}" for a in self.asked if not used[a])

    def line(self) -> str:
        """``Machine: driver 550.54.15 and 8× NVIDIA H100 80GB HBM3 (sm_90) read through NVML
        → --driver 550.54.15 --gpu H100``; what was not read: ``as if --gpu were not given``."""
        dropped = " and ".join(self.dropped())
        said = [x for x in (self.flags(), dropped and f"as if {dropped} were not given") if x]
        return f"Machine: {self.read.summary()} → {'; '.join(said)}"

    def to_dict(self) -> dict[str, Any]:
        return {**self.read.to_dict(), "asked": list(self.asked),
                "used": {"driver": self.driver, "gpu": self.gpu, "gpu_arch": self.gpu_arch},
                "notes": list(self.notes)}


def asks_machine(request: Request) -> tuple[str, ...]:
    """The axes of ``request`` that say ``auto`` (any case)."""
    return tuple(a for a in AXES
                 if (getattr(request, a) or "").strip().lower() == AUTO)


def machine_request(request: Request, *, matrix: Matrix | None = None,
                    machine: MachineGpus | None = None) -> tuple[Request, MachineAnswer | None]:
    """``request`` with each ``auto`` replaced by what this machine has (see the module
    docstring); ``(request, None)`` when none says auto. UsageError: --gpu auto with
    --gpu-arch, or GPUs of several architectures."""
    asked = asks_machine(request)
    if not asked:
        return request, None
    if "gpu" in asked and request.gpu_arch is not None:
        raise UsageError("--gpu auto and --gpu-arch both choose the GPU",
                         hint="give one: --gpu auto reads this machine's GPU", source="--gpu")
    if machine is None:
        from envgen.machine_gpus import read

        machine = read()
    answer = MachineAnswer(read=machine, asked=asked)
    changes: dict[str, str | None] = {}
    notes: list[str] = []
    if not machine.known:
        flags = " and ".join(f"--{a}" for a in asked)
        notes.append(f"{' '.join(f'--{a} auto' for a in asked)}: nothing read "
                     f"({machine.reason}); resolved as if {flags} were not given")
        return replace(request, **dict.fromkeys(asked)), replace(answer, notes=tuple(notes))
    if "driver" in asked:
        driver = _driver(machine, notes)
        changes["driver"] = driver
        answer = replace(answer, driver=driver)
    if "gpu" in asked:
        try:
            gpu, arch = _gpu(machine, (matrix or Matrix.locate()).facts, notes)
        except UsageError as exc:  # its --json object says what was read
            exc.extra = {**(exc.extra or {}), "machine": answer.to_dict()}
            raise
        changes.update(gpu=gpu, gpu_arch=None if gpu else arch)
        answer = replace(answer, gpu=gpu, gpu_arch=arch)
    return replace(request, **changes), replace(answer, notes=tuple(notes))


def _driver(machine: MachineGpus, notes: list[str]) -> str | None:
    try:
        dotted_key(machine.driver or "")
    except ValueError:
        notes.append(f"--driver auto: {machine.driver!r} is not a driver version; resolved as "
                     "if --driver were not given")
        return None
    return machine.driver


def _gpu(machine: MachineGpus, facts: Facts, notes: list[str]) -> tuple[str | None, str | None]:
    """(the catalogue's name, the architecture) for the machine's GPUs; (None, None) when not
    known (a note says why)."""
    unused = "resolved as if --gpu were not given"
    if not machine.gpus:
        why = f" ({machine.reason})" if machine.reason else ""
        notes.append(f"--gpu auto: the driver lists no GPU{why}; {unused}")
        return None, None
    seen = []  # (GPU read, count, the catalogue's record or None, its architecture or None)
    for read, count in machine.groups():
        known = catalogue_gpu(facts, read.name)
        if known is not None and read.arch is not None and known.arch != read.arch:
            notes.append(f"--gpu auto: the driver gives {read.name} compute capability "
                         f"{read.compute_capability}, curated/gpus.toml says {known.name} is "
                         f"{known.arch}: the driver's {read.arch} is used")
            known = None
        seen.append((read, count, known, read.arch or (known.arch if known else None)))
    unknown = [read.name for read, _, _, arch in seen if arch is None]
    if unknown:
        notes.append(f"--gpu auto: the architecture of {', '.join(unknown)} is not known (the "
                     "driver's nvidia-smi has no compute_cap field, and curated/gpus.toml has "
                     f"no such GPU); {unused}: give --gpu-arch")
        return None, None
    archs = sorted({arch for *_, arch in seen})
    if len(archs) > 1:
        listed = ", ".join(f"{n}× {r.name} ({a})" for r, n, _, a in seen)
        options: dict[str, str] = {}
        for *_, known, arch in seen:
            options.setdefault(arch, f"--gpu {known.name}" if known else f"--gpu-arch {arch}")
        raise UsageError(f"this machine has GPUs of {len(archs)} architectures ({listed}); "
                         "--gpu auto answers for one",
                         hint="name the GPUs the job will run on: " + " or ".join(options.values()),
                         source="--gpu auto")
    names = {k.name if k else None for _, _, k, _ in seen}
    name = names.pop() if len(names) == 1 else None
    return name, archs[0]


def catalogue_gpu(facts: Facts, name: str) -> Gpu | None:
    """The curated GPU (``curated/gpus.toml``) a driver's name is: the name or an alias, else
    the longest one contained in it as whole words ("NVIDIA H200 141GB HBM3e" → H200)."""
    key = name.strip().lower()
    for k in (key, key.removeprefix("nvidia ").strip()):
        if k in facts.gpus:
            return facts.gpus[k]

    def words(text: str) -> str:
        return " " + " ".join(_SPLIT.split(text.lower().replace("nvidia", " ")
                                           .replace("tesla", " ").strip())) + " "

    have, best = words(name), None
    for k, gpu in facts.gpus.items():
        w = words(k)
        if w.strip() and w in have and (best is None or len(w) > len(best[0])):
            best = (w, gpu)
    return best[1] if best else None
