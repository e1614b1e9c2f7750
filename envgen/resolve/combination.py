"""A complete, resolved combination and its stable id."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envgen.facts.model import to_jsonable

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def combination_id(framework: str, framework_version: str, torch: str, cuda: str, python: str,
                   os_id: str, platform: str) -> str:
    """Stable id usable as a file name, a Docker tag and a nox parameter id.

    ``deepspeed-0.16.4-torch2.5.1-cu121-py3.11-ubuntu22.04-x86_64``: only ``[A-Za-z0-9_.-]``,
    never starting with ``.`` or ``-``, at most 128 characters (Docker's tag limit).
    """
    arch = platform.split("-", 1)[-1]
    raw = (f"{framework}-{framework_version}-torch{torch}-cu{cuda.replace('.', '')}"
           f"-py{python}-{os_id.replace('-', '')}-{arch}")
    return _ID_UNSAFE.sub("_", raw)[:128]


@dataclass(frozen=True, slots=True, kw_only=True)
class Combination:
    """One complete environment the resolver vouches for. See README "Resolve" for fields."""

    id: str
    framework: str
    framework_version: str
    torch: str
    torch_pin: str
    torch_index: str
    cuda: str
    python: str
    os: str
    platform: str
    nccl: str | None
    cudnn: str | None
    triton: str | None
    nvcc: str
    nvcc_package: str | None
    nvcc_version: str | None
    nvcc_from: str  # "lock" (the lock installs it), "system" (--nvcc: a toolkit already there)
    # or "os-package" (--flavor os-package: the OS's own nvidia-cuda-toolkit package)
    gcc: int
    gcc_source: str
    glibc: str
    torch_glibc: str | None
    min_driver: str | None  # CUDA minor-version-compatibility floor of torch's CUDA
    release_driver: str | None  # the driver of torch's CUDA runtime release (full support)
    nvcc_driver: str | None  # the driver of the toolkit release whose nvcc builds the ops
    cuda_archs: tuple[str, ...]  # nvcc's archs that the torch build was also compiled for
    framework_archs: tuple[str, ...] | None  # the framework's default arch list for that nvcc
    ops_unavailable: tuple[str, ...]  # "op: why" for ops that cannot build or run here
    evidence: str
    facts: dict[str, str]  # where the deciding facts came from: harvested / curated / unknown
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return to_jsonable(self)


_ID = re.compile(r"^(?P<framework>[a-z0-9][a-z0-9_.-]*?)-(?P<framework_version>\d[^-]*)"
                 r"-torch(?P<torch>\d[^-]*)-cu(?P<cuda>\d{3,})-py(?P<python>\d+\.\d+t?)"
                 r"-(?P<os_name>[a-z]+)(?P<os_version>\d[\d.]*)-(?P<arch>x86_64|aarch64)$")


def parse_combination_id(text: str) -> dict[str, str] | None:
    """The request fields a combination id encodes (the inverse of ``combination_id``):
    ``deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64`` → framework deepspeed,
    framework_version 0.19.8, torch 2.15.0, cuda 13.2, python 3.11, os debian-12, platform
    linux-x86_64. None if ``text`` does not have that shape."""
    m = _ID.match(text.strip())
    if not m:
        return None
    cu = m["cuda"]
    return {"framework": m["framework"], "framework_version": m["framework_version"],
            "torch": m["torch"], "cuda": f"{cu[:-1]}.{cu[-1]}", "python": m["python"],
            "os": f"{m['os_name']}-{m['os_version']}", "platform": f"linux-{m['arch']}"}
