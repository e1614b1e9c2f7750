"""A real local conda channel built from tiny real conda packages.

What is real: the archives are genuine conda packages (``.conda``: a stored zip holding
``metadata.json`` and zstd-compressed ``info-``/``pkg-`` tars; ``.tar.bz2``: one bzip2 tar) with
``info/index.json``, ``info/paths.json`` and ``info/files`` laid out as conda-build writes them,
and the channel is indexed by rattler's own indexer, so ``repodata.json`` carries real sha256,
md5 and sizes. py-rattler solves against it and installs from it exactly as from conda-forge.

What is a stand-in: the payloads. Compilers and CUDA tools are small ``sh`` scripts that answer
``--version``; libraries and headers are a few bytes of text. The ``python`` package for the
host's own major.minor is a venv-like prefix whose interpreter symlinks to the host's base
interpreter (so a channel built on one machine only installs a working Python on that machine),
and ``pip`` is the real pip wheel bundled with the host's ``ensurepip``.

Packages are byte-for-byte deterministic: fixed timestamps in ``index.json`` and in every tar
and zip header, so the same inputs always give the same sha256.
"""

from __future__ import annotations

import asyncio
import bz2
import concurrent.futures
import functools
import hashlib
import inspect
import io
import json
import os
import platform
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

try:  # the zstd binding conda-package-handling itself uses
    from compression import zstd  # type: ignore[import-not-found]  # Python >= 3.14
except ImportError:
    from backports import zstd  # type: ignore[no-redef]

import rattler
from rattler import BuildString, GenericVirtualPackage, PackageName, RepoDataRecord, Version

TIMESTAMP_MS = 1_763_700_000_000  # 2025-11-21, written into every index.json
_EPOCH = TIMESTAMP_MS // 1000  # mtime of every tar member
_ZIP_DATE = (2025, 11, 21, 0, 0, 0)
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

# conda's subdir -> (index.json arch, index.json platform)
_SUBDIR_ARCH = {
    "linux-64": ("x86_64", "linux"),
    "linux-aarch64": ("aarch64", "linux"),
    "linux-ppc64le": ("ppc64le", "linux"),
    "osx-64": ("x86_64", "osx"),
    "osx-arm64": ("arm64", "osx"),
    "win-64": ("x86_64", "win"),
    "noarch": (None, None),
}
# conda's subdir -> NVIDIA's targets/<dir> for headers (conda-forge's CUDA 12+ layout)
_CUDA_TARGET = {"linux-64": "x86_64-linux", "linux-aarch64": "sbsa-linux"}


@dataclass
class CondaPkg:
    """One conda package. ``files`` maps prefix-relative paths to contents; ``symlinks`` maps
    paths to link targets (relative or absolute). Files under ``bin/`` or starting with ``#!``
    are packed executable (0755). ``noarch`` ("python" or "generic") forces subdir ``noarch``;
    noarch python packages keep their modules under ``site-packages/`` as conda-forge's do and
    may list ``entry_points`` ("name = module:func") for ``info/link.json``."""

    name: str
    version: str
    build: str = "0"
    build_number: int = 0
    subdir: str = "linux-64"
    depends: Sequence[str] = ()
    constrains: Sequence[str] = ()
    files: dict[str, bytes | str] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)
    noarch: str | None = None
    entry_points: Sequence[str] = ()
    license: str = "Apache-2.0"

    def __post_init__(self) -> None:
        if self.noarch:
            self.subdir = "noarch"
        if self.subdir not in _SUBDIR_ARCH:
            raise ValueError(f"unknown conda subdir {self.subdir!r}")

    def filename(self, fmt: str = ".conda") -> str:
        if fmt not in (".conda", ".tar.bz2"):
            raise ValueError(f"conda package format must be .conda or .tar.bz2, not {fmt!r}")
        return f"{self.name}-{self.version}-{self.build}{fmt}"


# --- archive writing ---------------------------------------------------------------------


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode() if isinstance(data, str) else data


def _is_executable(path: str, data: bytes) -> bool:
    return path.startswith(("bin/", "python-scripts/")) or data.startswith(b"#!")


def _index_json(pkg: CondaPkg) -> dict:
    arch, plat = _SUBDIR_ARCH[pkg.subdir]
    doc = {
        "arch": arch,
        "build": pkg.build,
        "build_number": pkg.build_number,
        "constrains": list(pkg.constrains),
        "depends": list(pkg.depends),
        "license": pkg.license,
        "name": pkg.name,
        "platform": plat,
        "subdir": pkg.subdir,
        "timestamp": TIMESTAMP_MS,
        "version": pkg.version,
    }
    if pkg.noarch:
        doc["noarch"] = pkg.noarch
    if not doc["constrains"]:
        del doc["constrains"]  # conda-build leaves the key out when empty
    return doc


def _softlink_digest(pkg: CondaPkg, path: str, target: str) -> tuple[str, int]:
    """conda-build hashes what a symlink points at; a dangling link hashes as empty."""
    if os.path.isabs(target):
        resolved = Path(target)
        if resolved.is_file():
            data = resolved.read_bytes()
            return hashlib.sha256(data).hexdigest(), len(data)
        return _EMPTY_SHA256, 0
    for _ in range(8):  # follow links to links inside the package
        inside = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if inside in pkg.files:
            data = _as_bytes(pkg.files[inside])
            return hashlib.sha256(data).hexdigest(), len(data)
        if inside not in pkg.symlinks:
            break
        path, target = inside, pkg.symlinks[inside]
    return _EMPTY_SHA256, 0


def _paths_json(pkg: CondaPkg) -> dict:
    entries = []
    for path in sorted([*pkg.files, *pkg.symlinks]):
        if path in pkg.files:
            data = _as_bytes(pkg.files[path])
            kind, digest, size = "hardlink", hashlib.sha256(data).hexdigest(), len(data)
        else:
            digest, size = _softlink_digest(pkg, path, pkg.symlinks[path])
            kind = "softlink"
        entries.append({"_path": path, "path_type": kind, "sha256": digest, "size_in_bytes": size})
    return {"paths": entries, "paths_version": 1}


def _info_files(pkg: CondaPkg) -> dict[str, bytes]:
    dumps = lambda doc: (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()  # noqa: E731
    info = {
        "info/index.json": dumps(_index_json(pkg)),
        "info/paths.json": dumps(_paths_json(pkg)),
        "info/files": "".join(p + "\n" for p in sorted([*pkg.files, *pkg.symlinks])).encode(),
        "info/about.json": dumps({"summary": f"{pkg.name} stand-in for envgen's tests"}),
    }
    if pkg.noarch == "python":
        link = {"type": "python", "entry_points": list(pkg.entry_points)}
        info["info/link.json"] = dumps({"noarch": link, "package_metadata_version": 1})
    return info


def _tar(files: dict[str, bytes], symlinks: dict[str, str]) -> bytes:
    """An uncompressed tar with fixed owners and mtimes, members sorted by path."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted([*files, *symlinks]):
            member = tarfile.TarInfo(path)
            member.mtime = _EPOCH
            member.uid = member.gid = 0
            member.uname = member.gname = ""
            if path in files:
                data = files[path]
                member.size = len(data)
                member.mode = 0o755 if _is_executable(path, data) else 0o644
                tar.addfile(member, io.BytesIO(data))
            else:
                member.type = tarfile.SYMTYPE
                member.linkname = symlinks[path]
                member.mode = 0o777
                tar.addfile(member)
    return buf.getvalue()


def _zip_member(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def _conda_bytes(stem: str, info: dict[str, bytes], pkg: CondaPkg) -> bytes:
    payload = {p: _as_bytes(d) for p, d in pkg.files.items()}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _zip_member(zf, "metadata.json", json.dumps({"conda_pkg_format_version": 2}).encode())
        pkg_tar = _tar(payload, dict(pkg.symlinks))
        _zip_member(zf, f"pkg-{stem}.tar.zst", zstd.compress(pkg_tar, level=3))
        _zip_member(zf, f"info-{stem}.tar.zst", zstd.compress(_tar(info, {}), level=3))
    return buf.getvalue()


def _tar_bz2_bytes(info: dict[str, bytes], pkg: CondaPkg) -> bytes:
    members = {**info, **{p: _as_bytes(d) for p, d in pkg.files.items()}}
    return bz2.compress(_tar(members, dict(pkg.symlinks)), 9)


def package_bytes(pkg: CondaPkg, fmt: str = ".conda") -> bytes:
    """The archive's bytes; the same package always gives the same bytes."""
    filename = pkg.filename(fmt)
    info = _info_files(pkg)
    if fmt == ".conda":
        return _conda_bytes(filename[: -len(".conda")], info, pkg)
    return _tar_bz2_bytes(info, pkg)


def build_package(pkg: CondaPkg, channel_dir: Path, fmt: str = ".conda") -> Path:
    """Write ``<channel_dir>/<subdir>/<name>-<version>-<build><fmt>``; return its path."""
    out = Path(channel_dir) / pkg.subdir / pkg.filename(fmt)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = package_bytes(pkg, fmt)
    if not out.exists() or out.read_bytes() != data:
        out.write_bytes(data)
    return out


# --- rattler, synchronously ----------------------------------------------------------------


def _run(result):
    """py-rattler's index_fs, solve and install are coroutines; run one to completion here,
    also when the caller is already inside an event loop."""
    if not inspect.isawaitable(result):
        return result

    async def wait():
        return await result

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def index_channel(channel_dir: Path) -> None:
    """(Re)write every subdir's repodata.json with rattler's indexer, from what is on disk."""
    channel_dir = Path(channel_dir)
    (channel_dir / "noarch").mkdir(parents=True, exist_ok=True)
    _run(rattler.index.index_fs(channel_dir, force=True))


def build_channel(channel_dir: Path, pkgs: Iterable[CondaPkg], fmt: str = ".conda") -> Path:
    """Build ``pkgs`` into ``channel_dir`` and index it. Calling it again with the same packages
    leaves the same bytes; packages already in the folder stay in the channel."""
    channel_dir = Path(channel_dir)
    for pkg in pkgs:
        build_package(pkg, channel_dir, fmt)
    index_channel(channel_dir)
    return channel_dir


def channel_url(channel_dir: Path) -> str:
    return Path(channel_dir).resolve().as_uri()


class ChannelServer:
    """Serves a channel folder over HTTP on 127.0.0.1, as anaconda.org serves conda-forge.

    Use it whenever a test needs rattler to check package hashes: py-rattler 0.28 verifies a
    downloaded archive's sha256 against repodata only for http(s) URLs; a ``file://`` channel
    is linked from without that check. ``requests`` records every path asked for."""

    def __init__(self, channel_dir: Path) -> None:
        self.requests: list[str] = []
        log = self.requests

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                log.append(self.path)
                super().do_GET()

        handler = functools.partial(Handler, directory=str(Path(channel_dir).resolve()))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ChannelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def virtual_packages(
    *,
    glibc: str | None = "2.35",
    cuda: str | None = "13.2",
    linux: str | None = "4.18",
    archspec: str = "x86_64",
) -> list[GenericVirtualPackage]:
    """The target machine's virtual packages, as explicit objects (None leaves one out)."""
    wanted = [("__glibc", glibc, "0"), ("__cuda", cuda, "0"), ("__linux", linux, "0")]
    wanted.append(("__archspec", "1", archspec))
    return [
        GenericVirtualPackage(PackageName(name), Version(version), BuildString(build))
        for name, version, build in wanted
        if version is not None
    ]


def solve(
    channel: Path | str,
    specs: Sequence[str],
    *,
    virtual: Sequence[GenericVirtualPackage] | None = None,
    platforms: Sequence[str] = ("linux-64", "noarch"),
) -> list[RepoDataRecord]:
    """Solve ``specs`` against one channel only (a folder, or a URL such as a ChannelServer's)
    for the given virtual packages (default: ``virtual_packages()``)."""
    source = channel if isinstance(channel, str) else channel_url(channel)
    return _run(
        rattler.solve(
            sources=[source],
            specs=list(specs),
            platforms=list(platforms),
            virtual_packages=list(virtual_packages() if virtual is None else virtual),
            channel_relations="disabled",
        )
    )


def install(records: Sequence[RepoDataRecord], prefix: Path, *, cache_dir: Path) -> None:
    """Link ``records`` into ``prefix`` (created if missing) through a private package cache."""
    _run(
        rattler.install(
            list(records),
            target_prefix=Path(prefix),
            cache_dir=Path(cache_dir),
            show_progress=False,
        )
    )


def tamper(channel_dir: Path, filename: str) -> Path:
    """Rewrite a package in place so that it is still a valid archive of the same name and
    about the same size but different bytes, without reindexing: repodata's sha256/md5/size
    for it are now wrong, which only a hash check catches."""
    matches = sorted(Path(channel_dir).glob(f"*/{filename}"))
    if len(matches) != 1:
        raise FileNotFoundError(f"{filename} in {channel_dir}: found {matches}")
    path = matches[0]
    original = path.read_bytes()
    marker = b"tampered after indexing\n"
    if filename.endswith(".conda"):
        buf = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(original)) as src, zipfile.ZipFile(buf, "w") as dst:
            for item in src.infolist():
                dst.writestr(item, src.read(item))
            _zip_member(dst, "tampered.txt", marker)
        path.write_bytes(buf.getvalue())
    else:
        tar = bz2.decompress(original)
        with tarfile.open(fileobj=io.BytesIO(tar)) as src:
            members = {m.name: src.extractfile(m).read() for m in src.getmembers() if m.isfile()}
            links = {m.name: m.linkname for m in src.getmembers() if m.issym()}
        members["info/tampered.txt"] = marker
        path.write_bytes(bz2.compress(_tar(members, links), 9))
    return path


# --- the toolchain a lock needs, named like conda-forge's ----------------------------------


def _host_python() -> tuple[str, str]:
    """(major.minor, full version) of the interpreter running the tests."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}", platform.python_version()


def _python_package(python: str, subdir: str) -> CondaPkg:
    """``python``: for the host's major.minor a venv-like prefix on the host's interpreter,
    so ``<prefix>/bin/python -m pip install`` really installs into the prefix; for any other
    version a stub whose ``bin/python`` only prints its version."""
    depends = ["__glibc >=2.28,<3.0.a0"]  # what conda-forge's python 3.x builds require
    host_mm, host_full = _host_python()
    site = f"lib/python{python}/site-packages/README.txt"
    readme = "This directory exists so that 3rd party packages can be installed here.\n"
    if python != host_mm:
        version = f"{python}.0"
        script = f'#!/bin/sh\necho "Python {version} (envgen test stand-in, cannot run code)"\n'
        return CondaPkg(
            "python",
            version,
            build="0_cpython",
            subdir=subdir,
            depends=depends,
            files={f"bin/python{python}": script, site: readme},
            symlinks={"bin/python": f"python{python}", "bin/python3": f"python{python}"},
        )
    base = getattr(sys, "_base_executable", None) or sys.executable
    cfg = (
        f"home = {os.path.dirname(base)}\n"
        "include-system-site-packages = false\n"
        f"version = {host_full}\n"
        f"executable = {os.path.realpath(base)}\n"
    )
    links = {f"bin/{n}": base for n in ("python", "python3", f"python{python}")}
    return CondaPkg(
        "python",
        host_full,
        build="0_cpython",
        subdir=subdir,
        depends=depends,
        files={"pyvenv.cfg": cfg, site: readme},
        symlinks=links,
    )


def _bundled_pip_wheel() -> Path:
    import ensurepip

    folders = [Path(ensurepip.__file__).parent / "_bundled"]
    if getattr(ensurepip, "_WHEEL_PKG_DIR", None):  # distro Pythons keep the wheels elsewhere
        folders.insert(0, Path(ensurepip._WHEEL_PKG_DIR))
    for folder in folders:
        wheels = sorted(folder.glob("pip-*.whl"))
        if wheels:
            return wheels[-1]
    raise FileNotFoundError(f"no pip wheel bundled with this Python (looked in {folders})")


@cache
def _pip_files() -> tuple[str, tuple[tuple[str, bytes], ...]]:
    wheel = _bundled_pip_wheel()
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as zf:
        files = [("site-packages/" + n, zf.read(n)) for n in zf.namelist() if not n.endswith("/")]
    files.append((f"site-packages/pip-{version}.dist-info/INSTALLER", b"conda\n"))
    return version, tuple(files)


def pip_package() -> CondaPkg:
    """``pip``: the real pip bundled with the host's ensurepip, as a noarch python package."""
    version, files = _pip_files()
    return CondaPkg(
        "pip",
        version,
        build="pyh_0",
        noarch="python",
        depends=["python >=3.8"],
        files=dict(files),
        entry_points=["pip = pip._internal.cli.main:main", "pip3 = pip._internal.cli.main:main"],
    )


def _version_script(tool: str, text: str) -> str:
    """A POSIX sh stand-in for ``tool`` that answers ``--version`` with ``text``."""
    return (
        "#!/bin/sh\n"
        f"# envgen test stand-in for {tool}: only --version is implemented\n"
        'case "$1" in\n'
        f"  --version|-V) cat <<'EOF'\n{text}EOF\n    exit 0;;\n"
        "esac\n"
        f'echo "{tool} stand-in: only --version is supported" >&2\n'
        "exit 1\n"
    )


_GCC_RELEASE = {9: "9.5.0", 10: "10.4.0", 11: "11.4.0", 12: "12.4.0", 13: "13.3.0", 14: "14.2.0"}


def _compiler_packages(gcc: int, subdir: str) -> list[CondaPkg]:
    version = _GCC_RELEASE.get(gcc, f"{gcc}.1.0")
    banner = f"{{}} (conda-forge gcc {version}-0) {version}\nCopyright (C) 2024 FSF\n"
    return [
        CondaPkg(
            "gcc",
            version,
            subdir=subdir,
            depends=["__glibc >=2.17,<3.0.a0"],
            files={"bin/gcc": _version_script("gcc", banner.format("gcc"))},
        ),
        CondaPkg(
            "gxx",
            version,
            subdir=subdir,
            depends=[f"gcc {gcc}.*"],
            files={"bin/g++": _version_script("g++", banner.format("g++"))},
        ),
    ]


# Patch levels chosen to look like NVIDIA's releases; not a source of truth.
_CUDA_PATCH = {"11.8": 89, "12.1": 105, "12.4": 131, "12.6": 85, "12.8": 93, "13.0": 88}

# component -> headers it ships (under targets/<arch>-linux/include); "-dev" ones also
# depend on their runtime package of the same version, as conda-forge's do.
_CUDA_HEADERS = {
    "cuda-cudart-dev": ["cuda_runtime_api.h", "cuda_runtime.h"],
    "cuda-nvrtc-dev": ["nvrtc.h"],
    "libcublas-dev": ["cublas_v2.h"],
    "libcusparse-dev": ["cusparse.h"],
    "libcusolver-dev": ["cusolverDn.h"],
    "libcurand-dev": ["curand.h"],
    "cuda-profiler-api": ["cuda_profiler_api.h"],
    "cuda-nvtx-dev": ["nvtx3/nvToolsExt.h"],
}


def _nvcc_version_text(cuda: str, full: str) -> str:
    return (
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Copyright (c) 2005-2025 NVIDIA Corporation\n"
        "Built on Thu_Jan_01_00:00:00_UTC_2025\n"
        f"Cuda compilation tools, release {cuda}, V{full}\n"
        f"Build cuda_{cuda}.r{cuda}/compiler.00000000_0\n"
    )


def _cuda_packages(cuda: str, subdir: str) -> list[CondaPkg]:
    """``cuda-version`` X.Y and every component at X.Y.<patch>, pinned to it as conda-forge
    pins them (``cuda-version >=X.Y,<X.(Y+1).0a0``)."""
    major, minor = (int(p) for p in cuda.split("."))
    full = f"{cuda}.{_CUDA_PATCH.get(cuda, 50)}"
    pin = f"cuda-version >={cuda},<{major}.{minor + 1}.0a0"
    include = f"targets/{_CUDA_TARGET.get(subdir, 'x86_64-linux')}/include"
    pkgs = [
        CondaPkg(
            "cuda-version",
            cuda,
            build="3",
            noarch="generic",
            constrains=[f"__cuda >={major}", f"cudatoolkit {cuda}|{cuda}.*"],
        ),
        CondaPkg(
            "cuda-nvcc",
            full,
            subdir=subdir,
            depends=[pin],
            files={"bin/nvcc": _version_script("nvcc", _nvcc_version_text(cuda, full))},
        ),
    ]
    for name, headers in _CUDA_HEADERS.items():
        depends = [pin]
        if name.endswith("-dev"):
            runtime = name[: -len("-dev")]
            lib = f"lib/{runtime.removeprefix('cuda-')}.so.{major}"
            if not lib.startswith("lib/lib"):
                lib = lib.replace("lib/", "lib/lib", 1)
            glibc = ["__glibc >=2.17,<3.0.a0"] if runtime == "cuda-cudart" else []
            pkgs.append(
                CondaPkg(
                    runtime,
                    full,
                    subdir=subdir,
                    depends=[pin, *glibc],
                    files={lib: f"stand-in for {lib} from CUDA {full}\n"},
                )
            )
            depends.append(f"{runtime} =={full}")
        files = {f"{include}/{h}": f"/* {h}: CUDA {full} stand-in */\n" for h in headers}
        pkgs.append(CondaPkg(name, full, subdir=subdir, depends=depends, files=files))
    return pkgs


def toolchain_packages(
    *,
    python: str,
    cudas: Sequence[str] = ("12.1", "13.2"),
    gccs: Sequence[int] = (11, 12, 13),
    linux_subdir: str = "linux-64",
) -> list[CondaPkg]:
    """Everything the conda part of a lock asks for (python, pip, ninja, libaio, gcc/gxx and
    the CUDA toolkit pieces), named like conda-forge's, for each CUDA and gcc given."""
    pkgs = [
        _python_package(python, linux_subdir),
        pip_package(),
        CondaPkg(
            "ninja",
            "1.12.1",
            subdir=linux_subdir,
            files={"bin/ninja": _version_script("ninja", "1.12.1\n")},
        ),
        CondaPkg(
            "libaio",
            "0.3.113",
            subdir=linux_subdir,
            files={
                "include/libaio.h": "/* libaio stand-in */\n",
                "lib/libaio.so.1.0.2": "stand-in for libaio.so.1.0.2\n",
            },
            symlinks={"lib/libaio.so.1": "libaio.so.1.0.2", "lib/libaio.so": "libaio.so.1"},
        ),
    ]
    for gcc in gccs:
        pkgs += _compiler_packages(gcc, linux_subdir)
    for cuda in cudas:
        pkgs += _cuda_packages(cuda, linux_subdir)
    return pkgs
