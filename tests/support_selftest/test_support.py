"""The test stand-ins in tests/support are real: rattler indexes, solves and installs the conda
channel, pip installs the wheels, and uv locks against the loopback index."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import conda_package_handling.api as cph
import pytest
from rattler.exceptions import InstallerError, SolverError
from uv import find_uv_bin

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from support.conda_channel import (
    ChannelServer,
    CondaPkg,
    build_channel,
    build_package,
    install,
    solve,
    tamper,
    toolchain_packages,
    virtual_packages,
)
from support.index_server import IndexServer
from support.wheels import build_wheel, serve_wheels

HOST_PY = f"{sys.version_info[0]}.{sys.version_info[1]}"

# The conda part of a lock, as matrix/curated/toolchain.toml spells it for CUDA >= 12.0.
CUDA_SPECS = [
    "cuda-nvcc",
    "cuda-cudart-dev",
    "cuda-nvrtc-dev",
    "libcublas-dev",
    "libcusparse-dev",
    "libcusolver-dev",
    "libcurand-dev",
    "cuda-profiler-api",
    "cuda-nvtx-dev",
]


def lock_specs(cuda: str, gcc: int) -> list[str]:
    return [
        f"python {HOST_PY}.*",
        "pip",
        "ninja",
        "libaio",
        f"gcc {gcc}.*",
        f"gxx {gcc}.*",
        f"cuda-version {cuda}.*",
        *CUDA_SPECS,
    ]


@pytest.fixture(scope="module")
def channel(tmp_path_factory) -> Path:
    return build_channel(tmp_path_factory.mktemp("channel"), toolchain_packages(python=HOST_PY))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(*cmd: str | Path) -> str:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True)
    return done.stdout


# --- the conda channel ---------------------------------------------------------------------


def test_channel_is_indexed_with_real_hashes(channel):
    for subdir in ("linux-64", "noarch"):
        repodata = json.loads((channel / subdir / "repodata.json").read_text())
        records = repodata["packages.conda"]
        archives = sorted(p.name for p in (channel / subdir).glob("*.conda"))
        assert sorted(records) == archives
        for filename, record in records.items():
            data = (channel / subdir / filename).read_bytes()
            assert record["sha256"] == hashlib.sha256(data).hexdigest()
            assert record["md5"] == hashlib.md5(data).hexdigest()
            assert record["size"] == len(data)
            assert record["subdir"] == subdir
    noarch = json.loads((channel / "noarch" / "repodata.json").read_text())["packages.conda"]
    # rattler's indexer rewrites specs canonically: "cudatoolkit 12.1|12.1.*" -> "==12.1|12.1.*"
    assert noarch["cuda-version-12.1-3.conda"]["constrains"] == [
        "__cuda >=12",
        "cudatoolkit ==12.1|12.1.*",
    ]
    assert next(r for f, r in noarch.items() if f.startswith("pip-"))["noarch"] == "python"


def test_archive_reads_back_with_conda_package_handling(tmp_path):
    pkg = CondaPkg(
        "demo",
        "1.0",
        depends=["__glibc >=2.17"],
        files={"bin/demo": "#!/bin/sh\necho hi\n", "share/demo.txt": "x"},
        symlinks={"bin/demo-link": "demo"},
    )
    for fmt in (".conda", ".tar.bz2"):
        out = tmp_path / fmt.strip(".")
        cph.extract(str(build_package(pkg, tmp_path / "ch", fmt)), str(out))
        index = json.loads((out / "info/index.json").read_text())
        assert (index["name"], index["arch"], index["platform"]) == ("demo", "x86_64", "linux")
        assert index["depends"] == ["__glibc >=2.17"]
        paths = {p["_path"]: p for p in json.loads((out / "info/paths.json").read_text())["paths"]}
        assert paths["bin/demo-link"]["path_type"] == "softlink"
        assert paths["share/demo.txt"]["sha256"] == hashlib.sha256(b"x").hexdigest()
        assert (out / "info/files").read_text().split() == sorted(paths)
        assert os.access(out / "bin/demo", os.X_OK)
        assert os.readlink(out / "bin/demo-link") == "demo"


def test_build_is_deterministic_and_idempotent(channel, tmp_path):
    pkgs = toolchain_packages(python=HOST_PY)
    again = build_channel(tmp_path / "again", pkgs)
    build_channel(again, pkgs)
    for archive in channel.glob("*/*.conda"):
        assert sha256(again / archive.parent.name / archive.name) == sha256(archive)
    repodata = json.loads((again / "linux-64/repodata.json").read_text())
    assert len(repodata["packages.conda"]) == len(list(again.glob("linux-64/*.conda")))


@pytest.mark.parametrize("gcc", [11, 12, 13])
@pytest.mark.parametrize("cuda", ["12.1", "13.2"])
def test_solve_pins_every_cuda_component_to_cuda_version(channel, cuda, gcc):
    records = solve(channel, lock_specs(cuda, gcc), virtual=virtual_packages(cuda=cuda))
    versions = {r.name.normalized: str(r.version) for r in records}
    assert versions["cuda-version"] == cuda
    components = [n for n in versions if n.startswith(("cuda-", "libcu")) and n != "cuda-version"]
    assert len(components) == 16  # 9 asked for + the 7 runtimes the -dev packages pull in
    assert all(versions[n].startswith(cuda + ".") for n in components)
    assert versions["gcc"].split(".")[0] == versions["gxx"].split(".")[0] == str(gcc)
    assert versions["python"] == sys.version.split()[0]


def test_virtual_packages_decide(channel):
    with pytest.raises(SolverError, match="__glibc"):
        solve(channel, [f"python {HOST_PY}.*"], virtual=virtual_packages(glibc=None))
    with pytest.raises(SolverError, match="__cuda"):
        solve(channel, ["cuda-version 13.2.*"], virtual=virtual_packages(cuda="12.4"))
    newest = solve(channel, ["cuda-nvcc"], virtual=virtual_packages(cuda="12.4"))
    assert {r.name.normalized: str(r.version) for r in newest}["cuda-version"] == "12.1"


def test_helpers_work_inside_a_running_event_loop(channel):
    async def caller():
        return solve(channel, ["ninja"])

    assert [r.name.normalized for r in asyncio.run(caller())] == ["ninja"]


def test_other_python_versions_are_stubs(tmp_path):
    other = "3.10" if HOST_PY != "3.10" else "3.12"
    (python,) = [p for p in toolchain_packages(python=other, cudas=()) if p.name == "python"]
    assert python.version == f"{other}.0"
    channel = build_channel(tmp_path, [python])
    assert [str(r.version) for r in solve(channel, [f"python {other}.*"])] == [f"{other}.0"]


@pytest.mark.integration
def test_install_gives_a_working_python_pip_and_toolchain(channel, tmp_path):
    prefix = tmp_path / "env"
    install(solve(channel, lock_specs("12.1", 12)), prefix, cache_dir=tmp_path / "pkgs")
    python = prefix / "bin/python"
    assert run(python, "-c", "import sys; print(sys.prefix)").strip() == str(prefix)
    site = prefix / f"lib/python{HOST_PY}/site-packages"
    assert f"from {site}/pip " in run(python, "-m", "pip", "--version")
    assert str(site) in run(prefix / "bin/pip", "--version")  # entry point from link.json
    assert "release 12.1, V12.1.105" in run(prefix / "bin/nvcc", "--version")
    assert run(prefix / "bin/g++", "--version").startswith("g++ (conda-forge gcc 12.")
    assert (prefix / "targets/x86_64-linux/include/cusparse.h").is_file()
    assert (prefix / "lib/libaio.so").resolve() == prefix / "lib/libaio.so.1.0.2"

    wheel = build_wheel(tmp_path / "wheels", "envgen-probe", "1.2.3")
    run(python, "-m", "pip", "install", "--isolated", "--no-index", "--no-deps", wheel)
    probe = "import envgen_probe as p; print(p.__version__, p.__file__)"
    assert run(python, "-c", probe).split() == ["1.2.3", str(site / "envgen_probe/__init__.py")]


@pytest.mark.integration
def test_tar_bz2_channel_installs(tmp_path):
    pkgs = [p for p in toolchain_packages(python=HOST_PY, cudas=("12.1",)) if p.name != "pip"]
    channel = build_channel(tmp_path / "channel", pkgs, fmt=".tar.bz2")
    assert json.loads((channel / "linux-64/repodata.json").read_text())["packages"]
    install(solve(channel, ["cuda-nvcc", "libaio"]), tmp_path / "env", cache_dir=tmp_path / "c")
    assert "V12.1.105" in run(tmp_path / "env/bin/nvcc", "--version")


@pytest.mark.integration
def test_tamper_breaks_the_hash_and_rattler_refuses_it_over_http(channel, tmp_path):
    copy = build_channel(tmp_path / "channel", toolchain_packages(python=HOST_PY, cudas=()))
    filename = "libaio-0.3.113-0.conda"
    indexed = json.loads((copy / "linux-64/repodata.json").read_text())["packages.conda"]
    before = sha256(copy / "linux-64" / filename)
    path = tamper(copy, filename)
    assert before == indexed[filename]["sha256"] != sha256(path)
    assert zipfile.is_zipfile(path)
    assert json.loads((copy / "linux-64/repodata.json").read_text())["packages.conda"] == indexed

    with ChannelServer(copy) as server:
        records = solve(server.url, ["libaio"])
        with pytest.raises(InstallerError) as failure:
            install(records, tmp_path / "env", cache_dir=tmp_path / "pkgs")
        assert f"/linux-64/{filename}" in server.requests
    assert "hash mismatch" in "".join(str(a) for a in failure.value.args)


@pytest.mark.integration
def test_file_channels_are_not_hash_checked_by_rattler(tmp_path):
    """A fact about py-rattler 0.28 that tests of hash checking must design around: from a
    file:// channel it links a tampered archive without complaint (serve it over HTTP)."""
    channel = build_channel(tmp_path / "channel", toolchain_packages(python=HOST_PY, cudas=()))
    tamper(channel, "ninja-1.12.1-0.conda")
    install(solve(channel, ["ninja"]), tmp_path / "env", cache_dir=tmp_path / "pkgs")
    assert (tmp_path / "env/bin/ninja").exists()


# --- wheels and the simple index -----------------------------------------------------------


def test_wheel_is_well_formed_and_deterministic(tmp_path):
    wheel = build_wheel(
        tmp_path / "a", "Deep.Speed", "0.19.8", requires=["torch", "ninja"], requires_python=">=3.9"
    )
    assert wheel.name == "deep_speed-0.19.8-py3-none-any.whl"
    assert (
        build_wheel(
            tmp_path / "b",
            "Deep.Speed",
            "0.19.8",
            requires=["torch", "ninja"],
            requires_python=">=3.9",
        ).read_bytes()
        == wheel.read_bytes()
    )
    with zipfile.ZipFile(wheel) as zf:
        info = "deep_speed-0.19.8.dist-info"
        metadata = zf.read(f"{info}/METADATA").decode()
        assert "Requires-Dist: torch\nRequires-Dist: ninja\n" in metadata
        assert "Requires-Python: >=3.9\n" in metadata
        assert zf.read("deep_speed/__init__.py") == b'__version__ = "0.19.8"\n'
        record = zf.read(f"{info}/RECORD").decode().splitlines()
        assert f"{info}/RECORD,," in record
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            if digest:
                data = zf.read(path)
                expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                assert (digest, int(size)) == ("sha256=" + expected.decode(), len(data))
        assert sorted(r.rsplit(",", 2)[0] for r in record) == sorted(zf.namelist())
    platform = build_wheel(tmp_path, "torch", "2.15.0", tag="cp311-cp311-manylinux_2_28_x86_64")
    with zipfile.ZipFile(platform) as zf:
        assert "Root-Is-Purelib: false\n" in zf.read("torch-2.15.0.dist-info/WHEEL").decode()


@pytest.mark.integration
def test_pip_installs_a_built_wheel(tmp_path):
    wheel = build_wheel(tmp_path, "ninja", "1.11.1", files={"ninja/__init__.py": "X = 1\n"})
    target = tmp_path / "target"
    pip = [sys.executable, "-m", "pip", "install", "--isolated", "--no-index", "--no-deps"]
    run(*pip, "--target", target, wheel)
    assert (target / "ninja/__init__.py").read_text() == "X = 1\n"
    assert (target / "ninja-1.11.1.dist-info/METADATA").is_file()


@pytest.mark.integration
def test_uv_locks_against_the_served_wheels(tmp_path):
    wheels = [
        build_wheel(tmp_path / "w", "torch", "2.15.0", tag="cp311-cp311-manylinux_2_28_x86_64"),
        build_wheel(
            tmp_path / "w", "deepspeed", "0.19.8", requires=["torch", "ninja", "packaging"]
        ),
        build_wheel(tmp_path / "w", "ninja", "1.11.1"),
        build_wheel(tmp_path / "w", "packaging", "24.2"),
        build_wheel(tmp_path / "w", "packaging", "99.0", requires_python=">=3.99"),
    ]
    (tmp_path / "in.txt").write_text("deepspeed==0.19.8\n")
    out = tmp_path / "pylock.toml"  # uv insists on pylock.toml or pylock.<name>.toml
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "NO_PROXY": "127.0.0.1"}
    with IndexServer() as server:
        index = serve_wheels(server, wheels)
        assert index == f"{server.url}/simple"
        subprocess.run(
            [find_uv_bin(), "pip", "compile", tmp_path / "in.txt", "--index-url", index,
             "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_35",
             "--generate-hashes", "--no-config", "--no-python-downloads",
             "--format", "pylock.toml", "-o", out],
            check=True, capture_output=True, env=env,
        )  # fmt: skip
        assert "/simple/deepspeed/" in [path for path, _ in server.state.log]
    lock = tomllib.loads(out.read_text())
    by_name = {p["name"]: p for p in lock["packages"]}
    assert {n: p["version"] for n, p in by_name.items()} == {
        "deepspeed": "0.19.8",
        "ninja": "1.11.1",
        "packaging": "24.2",  # 99.0 needs Python >= 3.99 (data-requires-python)
        "torch": "2.15.0",
    }
    served = {w.name: sha256(w) for w in wheels}
    for package in by_name.values():
        (entry,) = package["wheels"]
        filename = entry["url"].rsplit("/", 1)[1]
        assert entry["url"] == f"{server.url}/files/{filename}"
        assert entry["hashes"]["sha256"] == served[filename]
