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
    gcc: int
    gcc_source: str
    glibc: str
    torch_glibc: str | None
    min_driver: str | None
    cuda_archs: tuple[str, ...]
    evidence: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return to_jsonable(self)
