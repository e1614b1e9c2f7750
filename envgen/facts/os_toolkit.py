"""The CUDA toolkit an OS release ships as an OS package (``matrix/harvested/os_toolkits.json``,
written by :mod:`envgen.harvest.os_packages`): what the "os-package" flavor builds with.

:func:`read_os_toolkits` turns a document that already passed
``envgen/schemas/harvested-os-toolkits.schema.json`` into values; it checks nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class OsToolkit:
    """The CUDA toolkit an OS ships as a distribution package."""

    os: str  # OS id of curated/os.toml ("debian-12")
    package: str  # the toolkit package ("nvidia-cuda-toolkit")
    version: str  # its Debian version ("11.8.89~11.8.0-5~deb12u1")
    cuda: str  # CUDA major.minor of the toolkit release ("11.8")
    # nvcc's own version where the package version carries it ("11.8.89" of
    # "11.8.89~11.8.0-5~deb12u1"); None where it holds only the toolkit release ("11.5.1-1ubuntu1")
    nvcc_version: str | None
    gcc: int | None  # the host g++ major nvcc is set up with (nvidia-cuda-toolkit-gcc's g++-N)
    compilers: tuple[str, ...]  # the g++-N / clang-N alternatives of its Depends, in order
    driver_min: str | None  # minimum driver branch: libcuda1 (>= N) of nvidia-cuda-dev ("520")
    install: tuple[str, ...]  # what to apt-get install: the toolkit (and its -gcc package)
    download_bytes: int  # .deb sizes of the toolkit, nvidia-cuda-dev and the -gcc package
    suite: str  # the suite the newest version was found in ("bookworm")
    components: tuple[str, ...]  # the archive components it needs enabled ("non-free")
    index: str  # the mirror root read ("http://deb.debian.org/debian")
    source_url: str  # the Packages.xz the record was read from


def read_os_toolkit(record: dict[str, Any]) -> OsToolkit:
    return OsToolkit(
        os=record["os"],
        package=record["package"],
        version=record["version"],
        cuda=record["cuda"],
        nvcc_version=record.get("nvcc_version"),
        gcc=None if record.get("gcc") is None else int(record["gcc"]),
        compilers=tuple(record.get("compilers", ())),
        driver_min=record.get("driver_min"),
        install=tuple(record["install"]),
        download_bytes=int(record["download_bytes"]),
        suite=record["suite"],
        components=tuple(record["components"]),
        index=record["index"],
        source_url=record["source"]["url"],
    )


def read_os_toolkits(doc: dict[str, Any]) -> dict[str, OsToolkit]:
    """OS id → its toolkit, for a schema-checked os_toolkits.json document."""
    return {r["os"]: read_os_toolkit(r) for r in doc.get("toolkits", ())}
