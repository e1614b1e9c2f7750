"""Build a small, real PyPI look-alike (wheels, sdists, nvcc wheels) from captured fixtures."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from support.index_server import IndexServer, Served

FIXTURES = Path(__file__).parents[1] / "harvest" / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def wheel(filename: str, members: dict[str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def dist_info(filename: str, metadata: str) -> dict[str, str]:
    name, version = filename.split("-")[:2]
    return {
        f"{name}/__init__.py": "",
        f"{name}-{version}.dist-info/METADATA": metadata,
        # the file name makes every wheel's bytes (so its sha256) distinct
        f"{name}-{version}.dist-info/WHEEL": f"Wheel-Version: 1.0\nFile: {filename}\n",
    }


def sdist(root: str, members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def ptxas_standin(version: str) -> bytes:
    """Binary-ish ptxas stand-in holding the real compute_/sm_ strings of that release."""
    strings = fixture(f"ptxas-strings-{version}.txt").split()
    return (
        b"\x7fELF\x00" + b"\x00".join(s.encode() for s in strings) + b"\x00sm_11 sm_20 legacy\x00"
    )


def add_wheel(
    server: IndexServer,
    project: str,
    filename: str,
    metadata: str,
    *,
    pep658: bool = True,
    advertise: bool = False,
    page: str | None = None,
    files_dir: str = "/files/",
    requires_python: str | None = None,
    extra_members: dict[str, bytes | str] | None = None,
) -> Served:
    members = {**dist_info(filename, metadata), **(extra_members or {})}
    served = Served(
        filename,
        wheel(filename, members),
        metadata.encode() if pep658 else None,
        advertise,
        requires_python,
    )
    server.state.add(page or f"/simple/{project}/", served, files_dir)
    return served


def torch_metadata(version: str, base: str = "torch-2.5.1-cp311-manylinux1_x86_64.METADATA") -> str:
    text = fixture(base)
    return text.replace("Version: 2.5.1", f"Version: {version}")


def populate(server: IndexServer) -> None:
    """torch (PyPI-style and a cu121 PyTorch-style index), 3 frameworks, nvcc wheels."""
    t251 = fixture("torch-2.5.1-cp311-manylinux1_x86_64.METADATA")
    for py in ("cp311", "cp313"):
        add_wheel(
            server,
            "torch",
            f"torch-2.5.1-{py}-{py}-manylinux1_x86_64.whl",
            t251,
            requires_python=">=3.8.0",
        )
    aarch = fixture("torch-1.13.1-cp310-manylinux2014_aarch64.METADATA").replace("1.13.1", "2.5.1")
    add_wheel(server, "torch", "torch-2.5.1-cp311-cp311-manylinux2014_aarch64.whl", aarch)
    add_wheel(server, "torch", "torch-2.5.1-cp311-none-macosx_11_0_arm64.whl", t251)
    add_wheel(server, "torch", "torch-2.5.1-cp311-cp311-win_amd64.whl", t251)
    add_wheel(
        server, "torch", "torch-1.12.1-cp310-cp310-manylinux1_x86_64.whl", torch_metadata("1.12.1")
    )
    add_wheel(
        server,
        "torch",
        "torch-2.6.0rc1-cp311-cp311-manylinux1_x86_64.whl",
        torch_metadata("2.6.0rc1"),
    )
    add_wheel(
        server,
        "torch",
        "torch-2.12.0-cp313-cp313t-manylinux_2_28_x86_64.whl",
        fixture("torch-2.12.0-cp312-manylinux_2_28_x86_64.METADATA"),
    )
    # like PyPI for torch 2.15: no .metadata file; must be read from the wheel by Range
    add_wheel(
        server,
        "torch",
        "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        fixture("torch-2.15.0-cp312-manylinux_2_28_x86_64.METADATA"),
        pep658=False,
    )
    # PyTorch's own index: relative hrefs, local version, bare linux tag, advertised metadata
    cu121 = torch_metadata("2.1.0+cu121")
    add_wheel(
        server,
        "torch",
        "torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl",
        cu121,
        advertise=True,
        page="/whl/cu121/torch/",
        files_dir="/whl/cu121/",
    )
    server.state.relative.add("/whl/cu121/torch/")

    ds = fixture("deepspeed-0.19.8.PKG-INFO")
    server.state.add(
        "/simple/deepspeed/",
        Served(
            "deepspeed-0.19.8.tar.gz",
            sdist(
                "deepspeed-0.19.8",
                {
                    "PKG-INFO": ds,
                    "deepspeed.egg-info/requires.txt": fixture("deepspeed-0.19.8.requires.txt"),
                },
            ),
        ),
    )
    server.state.add(
        "/simple/deepspeed/",
        Served(
            "deepspeed-0.8.0.tar.gz",
            sdist(
                "deepspeed-0.8.0",
                {
                    "PKG-INFO": fixture("deepspeed-0.8.0.PKG-INFO"),
                    "deepspeed.egg-info/requires.txt": fixture("deepspeed-0.8.0.requires.txt"),
                },
            ),
        ),
    )
    server.state.add(
        "/simple/deepspeed/",
        Served(
            "deepspeed-0.7.7.tar.gz",
            sdist(
                "deepspeed-0.7.7",
                {"PKG-INFO": "Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.7.7\n"},
            ),
        ),
    )
    add_wheel(server, "deepspeed", "deepspeed-0.19.8-cp311-cp311-win_amd64.whl", ds)
    server.state.add(
        "/simple/colossalai/",
        Served(
            "colossalai-0.5.0.tar.gz",
            sdist(
                "colossalai-0.5.0",
                {
                    "PKG-INFO": fixture("colossalai-0.5.0.PKG-INFO"),
                    "colossalai.egg-info/requires.txt": fixture("colossalai-0.5.0.requires.txt"),
                },
            ),
        ),
    )
    server.state.add(
        "/simple/colossalai/",
        Served(
            "colossalai-0.4.0.tar.gz",
            sdist(
                "colossalai-0.4.0",
                {
                    "PKG-INFO": "Metadata-Version: 2.1\nName: colossalai\nVersion: 0.4.0\n",
                    "requirements/requirements.txt": (
                        "# core\nnumpy\ntorch>=2.1.0,<2.3.0\n-r extra.txt\n"
                    ),
                },
            ),
        ),
    )
    mc = fixture("megatron_core-0.19.2-cp312.METADATA")
    for py in ("cp312", "cp313"):
        add_wheel(
            server,
            "megatron-core",
            f"megatron_core-0.19.2-{py}-{py}-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
            mc,
            pep658=False,
        )
    add_wheel(
        server,
        "megatron-core",
        "megatron_core-0.20.0rc1-cp312-cp312-manylinux_2_28_x86_64.whl",
        mc.replace("0.19.2", "0.20.0rc1"),
    )

    for version in ("12.1.66", "12.1.105", "12.9.86"):
        key = version if version != "12.1.66" else "12.1.105"
        add_wheel(
            server,
            "nvidia-cuda-nvcc-cu12",
            f"nvidia_cuda_nvcc_cu12-{version}-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
            f"Metadata-Version: 2.1\nName: nvidia-cuda-nvcc-cu12\nVersion: {version}\n",
            extra_members={
                "nvidia/cuda_nvcc/include/crt/host_config.h": fixture(f"host_config-{key}.h"),
                "nvidia/cuda_nvcc/bin/ptxas": ptxas_standin(key),
            },
        )
    add_wheel(
        server,
        "nvidia-cuda-nvcc",
        "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        "Metadata-Version: 2.1\nName: nvidia-cuda-nvcc\nVersion: 13.0.88\n",
        extra_members={"nvidia/cu13/bin/ptxas": ptxas_standin("12.9.86")},
    )
    add_wheel(
        server,
        "nvidia-cuda-crt",
        "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        "Metadata-Version: 2.1\nName: nvidia-cuda-crt\nVersion: 13.0.88\n",
        extra_members={
            "nvidia/cu13/include/crt/host_config.h": fixture("host_config-12.9.86.h").replace(
                "__GNUC__ > 14", "__GNUC__ > 15"
            )
        },
    )
    # a project with files but none that gives a record (no Linux wheel): no CUDA 11 toolkit
    add_wheel(
        server,
        "nvidia-cuda-nvcc-cu11",
        "nvidia_cuda_nvcc_cu11-11.8.89-py3-none-win_amd64.whl",
        "Metadata-Version: 2.1\nName: nvidia-cuda-nvcc-cu11\nVersion: 11.8.89\n",
    )


SOURCES = """
[[index]]
name = "pypi"
url = "{url}/simple/"
default = true
projects = ["torch", "deepspeed", "megatron-core", "colossalai",
            "nvidia-cuda-nvcc-cu11", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc", "nvidia-cuda-crt"]

[[index]]
name = "pytorch-cu121"
url = "{url}/whl/cu121"
default = false
projects = ["torch"]

[torch]
project = "torch"
min_version = "1.13"
platforms = ["linux-x86_64", "linux-aarch64"]
cuda_local_pattern = 'cu(?P<major>\\d+)(?P<minor>\\d)'
cpu_local_labels = ["cpu"]

[torch.pins]
cuda_runtime = 'nvidia-cuda-runtime(-cu\\d+)?|cuda-toolkit'
nccl = 'nvidia-nccl(-cu\\d+)?'
cudnn = 'nvidia-cudnn(-cu\\d+)?'
triton = '(pytorch-)?triton'

[[frameworks]]
project = "deepspeed"
min_version = "0.8.0"

[[frameworks]]
project = "megatron-core"
min_version = "0.1.0"

[[frameworks]]
project = "colossalai"
min_version = "0.2.0"

[[cuda_toolkits]]
project = "nvidia-cuda-nvcc-cu11"

[[cuda_toolkits]]
project = "nvidia-cuda-nvcc-cu12"

[[cuda_toolkits]]
project = "nvidia-cuda-nvcc"
host_config_project = "nvidia-cuda-crt"

[refresh]
max_removed_share = {max_removed_share}
max_whole_download_mb = {max_whole_download_mb}
"""

POLICY = """
[manylinux_aliases]
manylinux1 = "2.5"
manylinux2010 = "2.12"
manylinux2014 = "2.17"
source = "https://peps.python.org/pep-0600/"
"""


def make_matrix(
    root: Path, url: str, *, max_removed_share: float = 0.05, max_whole_download_mb: float = 0
) -> Path:
    """A matrix harvesting the mini index at ``url``. ``max_whole_download_mb`` is 0 by default
    so the (tiny) wheels are read by Range, as multi-GB torch wheels are; pass e.g. 64 for the
    real behaviour (small wheels downloaded whole and hashed)."""
    matrix = root / "matrix"
    (matrix / "curated").mkdir(parents=True)
    (matrix / "harvested").mkdir()
    (matrix / "sources.toml").write_text(
        SOURCES.format(
            url=url,
            max_removed_share=max_removed_share,
            max_whole_download_mb=max_whole_download_mb,
        )
    )
    (matrix / "curated" / "policy.toml").write_text(POLICY)
    return matrix


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (relative name -> bytes), for byte-for-byte comparisons."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }
