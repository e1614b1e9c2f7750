"""A matrix for the os-package flavor: the fixture matrix (tests/fixtures/matrix) plus what that
flavor reads, as the real matrix has it (values copied from matrix/, 2026-11-23):

- harvested/os_toolkits.json: the CUDA toolkit debian-12 (11.8, g++-11), debian-13 (12.4,
  g++-13) and ubuntu-24.04 (12.0, g++-12) ship; ubuntu-22.04 and centos-7 ship none here
- curated/os.toml: debian-13 (glibc 2.41, gcc 14, packages gcc 12-14)
- curated/toolchain.toml: [os-package] os_packages and cuda_home per family
- curated/images.toml: a debian-13 base (Python 3.13), Debian 13's libaio1t64 runtime, and the
  [os_package.<family>] apt sources commands

Pure files, no network: for unit tests of resolve / plan / render / evidence cells.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

FIXTURE_MATRIX = Path(__file__).parent.parent / "fixtures" / "matrix"

_SOURCE = {"retrieved": "2026-11-23", "sha256": "0" * 64, "verified": "sha256 (Release)"}


def _toolkit(os_id: str, cuda: str, version: str, nvcc: str | None, gcc: int, suite: str,
             components: list[str], index: str) -> dict:
    return {
        "os": os_id, "package": "nvidia-cuda-toolkit", "version": version, "cuda": cuda,
        "nvcc_version": nvcc, "gcc": gcc, "compilers": [f"g++-{gcc}", f"g++-{gcc - 1}"],
        "driver_min": "520", "install": ["nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc"],
        "download_bytes": 858247316, "suite": suite, "components": components, "index": index,
        "source": {**_SOURCE, "url": f"{index}/dists/{suite}/{components[-1]}/binary-amd64/"
                                     "Packages.xz"},
    }


TOOLKITS = [
    _toolkit("debian-12", "11.8", "11.8.89~11.8.0-5~deb12u1", "11.8.89", 11, "bookworm",
             ["contrib", "non-free"], "http://deb.debian.org/debian"),
    _toolkit("debian-13", "12.4", "12.4.131~12.4.1-2", "12.4.131", 13, "trixie",
             ["contrib", "non-free"], "http://deb.debian.org/debian"),
    _toolkit("ubuntu-24.04", "12.0", "12.0.140~12.0.1-4build4", "12.0.140", 12, "noble",
             ["multiverse"], "http://archive.ubuntu.com/ubuntu"),
]

DEBIAN_13 = '''
[[os]]
id = "debian-13"
name = "Debian 13 (trixie)"
family = "debian"
glibc = "2.41"
gcc = 14
gcc_available = [12, 13, 14]
archs = ["x86_64", "aarch64"]
source = "https://example.invalid/debian-13"
'''

TOOLCHAIN = '''
[os-package]
source = "test fixture (a copy of matrix/curated/toolchain.toml [os-package])"

[os-package.os_packages]
debian = ["gcc-{gcc}", "g++-{gcc}", "libaio-dev"]
ubuntu = ["gcc-{gcc}", "g++-{gcc}", "libaio-dev"]

[os-package.cuda_home]
debian = "/usr"
ubuntu = "/usr"
'''

IMAGES_BASE = '''
[[base]]
os = "debian-13"
image = "docker.io/library/debian:13"
digest = "sha256:9999999999999999999999999999999999999999999999999999999999999999"
python = ["3.13"]
observed = "2026-11-23"
source = "test fixture (not a real digest)"
'''

_SOURCES = ("printf 'Types: deb\\\\nURIs: %s\\\\nSuites: %s\\\\nComponents: %s\\\\nSigned-By: "
            "/usr/share/keyrings/{distro}-archive-keyring.gpg\\\\n' {{index}} {{suite}} "
            "{{components_quoted}} > /etc/apt/sources.list.d/envgen-cuda.sources")
IMAGES_OS_PACKAGE = "".join(
    f'\n[os_package.{distro}]\nsources = "{_SOURCES.format(distro=distro)}"\n'
    f'source = "test fixture (a copy of matrix/curated/images.toml)"\n'
    for distro in ("debian", "ubuntu"))

DEBIAN_RUNTIME = 'runtime = ["ca-certificates", "python{python}", "libaio1"]\n'
DEBIAN_13_RUNTIME = ('runtime_by_os = { "debian-13" = ["ca-certificates", "python{python}", '
                     '"libaio1t64"] }\n')


def toolkits_doc(toolkits: list[dict] | None = None) -> dict:
    return {"schema": 1, "generated": {"command": "envgen matrix update --write",
                                       "date": "2026-11-23", "envgen": "0.1.0"},
            "toolkits": copy.deepcopy(TOOLKITS if toolkits is None else toolkits)}


def extend_for_os_package(dst: Path, source: Path = FIXTURE_MATRIX) -> Path:
    """Copy ``source`` (default: the fixture matrix) to ``dst`` and add the os-package data:
    os_toolkits.json is always this module's; the curated parts only where ``source`` lacks
    them."""
    shutil.copytree(source, dst)
    (dst / "harvested" / "os_toolkits.json").write_text(json.dumps(toolkits_doc(), indent=1))
    os_toml = dst / "curated" / "os.toml"
    if 'id = "debian-13"' not in os_toml.read_text():
        os_toml.write_text(os_toml.read_text() + DEBIAN_13)
    toolchain = dst / "curated" / "toolchain.toml"
    if "[os-package]" not in toolchain.read_text():
        toolchain.write_text(toolchain.read_text() + TOOLCHAIN)
    images = dst / "curated" / "images.toml"
    text = images.read_text()
    debian = text.index("[family.debian]")
    family = text[debian:text.index("\n[", debian + 1)]
    if "runtime_by_os" not in family:
        at = text.index(DEBIAN_RUNTIME, debian) + len(DEBIAN_RUNTIME)
        text = text[:at] + DEBIAN_13_RUNTIME + text[at:]
    if 'os = "debian-13"' not in text:
        at = text.index("# ------------------------------------------------------------------ "
                        "OS families")
        text = text[:at] + IMAGES_BASE.lstrip() + "\n" + text[at:]
    if "[os_package." not in text:
        text += IMAGES_OS_PACKAGE
    images.write_text(text)
    return dst
