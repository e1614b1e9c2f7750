"""Real local stand-ins for the lock tests (and the fault suite; registered for every test by
tests/conftest.py): a conda channel built from small real conda
packages and indexed by rattler, and a PEP 503 index on loopback serving small real wheels.

The combination the tests lock comes from a copy of the fixture matrix extended with one CUDA
13 torch build (so the venv flavor has something to lock): deepspeed 0.18.2 + torch 2.9.0
(CUDA 12.8, PyPI) for the conda flavor, torch 2.12.0 (CUDA 13.0, PyPI) for venv, on the host's
Python so the installed prefix can really run pip.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from support.conda_channel import build_channel, toolchain_packages
from support.index_server import IndexServer
from support.run import HOST_PY
from support.wheels import build_wheel, serve_wheels

FIXTURE_MATRIX = Path(__file__).parent.parent / "fixtures" / "matrix"
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"
MANYLINUX = "manylinux_2_28_x86_64"
DS_OPS = ("fused_adam", "cpu_adam", "transformer_inference", "async_io")
# as DeepSpeed's setup.py records it: async_io pulls in pin_memory, which nobody asked for
INSTALLED = {**{op: True for op in DS_OPS}, "pin_memory": True, "cpu_lion": False}
# what the real nvcc 13.0.88 prints for --version (its last two lines)
NVCC_STANDIN = ("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n"
                "echo 'Build cuda_13.0.r13.0/compiler.36424714_0'\n")
SOABI = f"cpython-{sys.version_info.major}{sys.version_info.minor}-x86_64-linux-gnu"


def _extend_matrix(dst: Path) -> Path:
    """Fixture matrix + torch 2.12.0 built for CUDA 13.0 + an nvcc 13.0 toolkit."""
    shutil.copytree(FIXTURE_MATRIX, dst)
    torch = json.loads((dst / "harvested" / "torch.json").read_text())
    base = next(b for b in torch["builds"] if b["version"] == "2.9.0")
    torch["builds"].append({**base, "version": "2.12.0", "cuda": "13.0",
                            "cuda_from": "nvidia-cuda-runtime==13.0.96", "cuda_runtime": "13.0.96",
                            "nccl": "2.28.3"})
    (dst / "harvested" / "torch.json").write_text(json.dumps(torch, indent=1))
    cuda = json.loads((dst / "harvested" / "cuda.json").read_text())
    base = next(t for t in cuda["toolkits"] if t["cuda"] == "12.8")
    cuda["toolkits"].append({**base, "cuda": "13.0", "max_gcc": 15,
                             "nvcc_package": "nvidia-cuda-nvcc", "nvcc_version": "13.0.88",
                             "archs": [a for a in base["archs"] if int(a[3:].rstrip("af")) >= 75]})
    (dst / "harvested" / "cuda.json").write_text(json.dumps(cuda, indent=1))
    policy = dst / "curated" / "policy.toml"
    policy.write_text(policy.read_text().replace("available = [9, 10, 11, 12, 13, 14]",
                                                 "available = [9, 10, 11, 12, 13, 14, 15]"))
    return dst


@pytest.fixture(scope="session")
def lock_matrix(tmp_path_factory) -> Path:
    return _extend_matrix(tmp_path_factory.mktemp("lockmatrix") / "matrix")


@pytest.fixture(scope="session")
def conda_channel(tmp_path_factory) -> Path:
    """conda-forge look-alike: python (a working venv-style prefix on the host's Python), pip,
    ninja, libaio, gcc/gxx 11-15 and the CUDA 12.8 / 13.0 packages toolchain.toml names."""
    root = tmp_path_factory.mktemp("channel") / "conda-forge"
    return build_channel(root, toolchain_packages(python=HOST_PY, cudas=("12.8", "13.0"),
                                                  gccs=(11, 12, 13, 14, 15)))


def _torch_files(version: str, cuda: str) -> dict[str, str]:
    """torch's version module, as a CUDA build has it (what `envgen doctor` reads)."""
    return {"torch/__init__.py": "from torch import version\n__version__ = version.__version__\n",
            "torch/version.py": f"__version__ = '{version}'\ncuda = '{cuda}'\n"}


def wheels(out: Path) -> list[Path]:
    """torch/deepspeed stand-ins with the shape of the real dependency tree."""
    made = [
        build_wheel(out, "torch", "2.9.0", tag=f"{CP}-{CP}-{MANYLINUX}",
                    requires=["filelock", "nvidia-nccl-cu12==2.27.5; platform_system == 'Linux'"],
                    files=_torch_files("2.9.0", "12.8")),
        build_wheel(out, "torch", "2.12.0", tag=f"{CP}-{CP}-{MANYLINUX}",
                    requires=["filelock", "nvidia-nccl-cu13==2.28.3; platform_system == 'Linux'"],
                    files=_torch_files("2.12.0", "13.0")),
        # the layout DeepSpeed's setup.py leaves when it prebuilt ops (what
        # envgen/inside/check-ops.py checks); the .so files are placeholders: the image tests
        # exercise envgen's build, the real op compile is the nox `image` session's job
        build_wheel(out, "deepspeed", "0.18.2", requires=["torch", "ninja", "packaging"],
                    files={"deepspeed/__init__.py": "__version__ = '0.18.2'\n",
                           "deepspeed/git_version_info.py": f"installed_ops = {INSTALLED}\n",
                           **{f"deepspeed/ops/{d}/{op}_op.{SOABI}.so": "placeholder\n"
                              for d, op in zip(("adam", "adam", "transformer", "aio"), DS_OPS,
                                               strict=True)}}),
        build_wheel(out, "filelock", "3.16.1"),
        build_wheel(out, "ninja", "1.11.1.1", tag="py3-none-manylinux_2_12_x86_64",
                    files={"ninja/__init__.py": '__version__ = "1.11.1.1"\n',
                           # the real wheel's bin/ninja, which torch's builder runs by name
                           "ninja-1.11.1.1.data/scripts/ninja": "#!/bin/sh\necho 1.11.1\n"}),
        build_wheel(out, "packaging", "24.2"),
        # newer, but not for this Python: the resolver must skip it
        build_wheel(out, "packaging", "99.0", requires_python=">=3.99"),
        build_wheel(out, "nvidia-nccl-cu12", "2.27.5", tag="py3-none-manylinux_2_18_x86_64"),
        build_wheel(out, "nvidia-nccl-cu13", "2.28.3", tag="py3-none-manylinux_2_18_x86_64"),
        build_wheel(out, "cuda-toolkit", "13.0.2", requires=[
            f"nvidia-cuda-nvcc==13.0.88.*; extra == '{x}'" for x in ("nvcc", "crt")] + [
            f"nvidia-cuda-runtime==13.0.96.*; extra == '{x}'" for x in (
                "cudart", "nvrtc", "cublas", "cusparse", "cusolver", "curand", "profiler",
                "nvtx")]),
        build_wheel(out, "nvidia-cuda-nvcc", "13.0.88", tag="py3-none-manylinux_2_27_x86_64",
                    files={"nvidia_cuda_nvcc/__init__.py": '__version__ = "13.0.88"\n',
                           "nvidia/cu13/bin/nvcc": NVCC_STANDIN}),
        build_wheel(out, "nvidia-cuda-runtime", "13.0.96", tag="py3-none-manylinux_2_27_x86_64",
                    files={"nvidia/cu13/lib/libcudart.so.13": "placeholder\n"}),
    ]
    return made


@pytest.fixture(scope="session")
def wheel_index(tmp_path_factory):
    """A PEP 503 index on 127.0.0.1 serving the stand-in wheels; yields (server, URL)."""
    out = tmp_path_factory.mktemp("wheels")
    with IndexServer() as server:
        url = serve_wheels(server, wheels(out))
        yield server, url


@pytest.fixture
def make_args(lock_matrix, conda_channel, wheel_index, tmp_path):
    """Arguments for `envgen make` against the local stand-ins, with a private cache."""
    _, url = wheel_index
    return ["make", "--matrix-dir", str(lock_matrix), "--framework", "deepspeed",
            "--python", HOST_PY, "--os", "debian-12", "--channel", str(conda_channel),
            "--index-url", url, "--cache-dir", str(tmp_path / "cache"),
            "--out", str(tmp_path / "locks")]

